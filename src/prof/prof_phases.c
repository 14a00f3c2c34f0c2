/* Reading back one step's phases from the recorded events, for the
 * pipeline schedule in profile.json (src/job/prof_sched.c): which steps have
 * full detail and, for one of them, its forward / backward / communication
 * wait / optimizer spans in the order they ran. */
#include "prof_internal.h"

static int is_step_span(const prof_ev *e) { return e->kind == EV_PHASE && e->name == SO_SPAN_STEP; }

long so_prof_detailed_steps(const so_prof *p, long *step, double *t0, double *t1, long max)
{
    long n = 0;
    for (size_t i = 0; i < p->nev; i++) {
        const prof_ev *e = &p->ev[i];
        if (!is_step_span(e))
            continue;
        if (n < max) {
            step[n] = e->step;
            t0[n] = e->t0;
            t1[n] = e->t1;
        }
        n++;
    }
    return n;
}

/* The phases a schedule picture shows; data waits belong to the forward that follows. */
static int shown(const prof_ev *e)
{
    return e->kind == EV_PHASE && (e->name == SO_SPAN_FORWARD || e->name == SO_SPAN_BACKWARD ||
                                   e->name == SO_SPAN_COMM_WAIT || e->name == SO_SPAN_OPTIMIZER);
}

int so_prof_step_phases(const so_prof *p, long step, so_prof_phase *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < p->nev; i++) {
        const prof_ev *e = &p->ev[i];
        if (e->step != step || !shown(e))
            continue;
        if (n < max)
            out[n] = (so_prof_phase){(so_span_kind)e->name, e->sub, e->t0, e->t1};
        n++;
    }
    return n;
}
