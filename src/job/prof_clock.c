/* Clock alignment of the profiler's ranks (prof_clock.h): ping-pong offset
 * measurements with rank 0, the linear offset + drift model built from the
 * measurements at the start and the end of a run (and every rank's model
 * on every rank), and the test hook that skews one rank's clock by a known
 * offset and rate. */
#include "core/test_hooks.h"
#include "prof_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/timer.h"

#define CLOCK_ROUNDS 8

void prof_clock_test_init(prof_clock_test *t, double start)
{
    const char *s = so_test_hook("SCALEOUT_PROF_TEST_CLOCK");
    char mode[16] = "drift";
    *t = (prof_clock_test){-1, 0, 0, start, PROF_CLOCK_DRIFT};
    if (!s || sscanf(s, "%d:%lf:%lf:%15s", &t->rank, &t->offset, &t->rate, mode) < 3 || t->rate <= -0.5) {
        t->rank = -1;
        return;
    }
    t->mode = !strcmp(mode, "none") ? PROF_CLOCK_NONE : !strcmp(mode, "offset") ? PROF_CLOCK_OFFSET : PROF_CLOCK_DRIFT;
}

double prof_clock_skew(const prof_clock_test *t, int rank, double time)
{
    return t && rank == t->rank ? time + t->offset + t->rate * (time - t->start) : time;
}

#ifdef SCALEOUT_HAVE_MPI
/* One round of rank r with rank 0: r sends, 0 answers with its time. */
static int ping(so_comm *c, const prof_clock_test *t, int rank, int r, double *offset, double *at, double *rtt)
{
    double buf[2] = {0, 0};
    if (rank == 0) {
        int rc = so_comm_recv_bytes(c, buf, sizeof buf, r, 1);
        buf[0] = prof_clock_skew(t, 0, so_now());
        return rc ? rc : so_comm_send_bytes(c, buf, sizeof buf, r, 2);
    }
    double ta = prof_clock_skew(t, rank, so_now());
    int rc = so_comm_send_bytes(c, buf, sizeof buf, 0, 1);
    if (!rc)
        rc = so_comm_recv_bytes(c, buf, sizeof buf, 0, 2);
    double tb = prof_clock_skew(t, rank, so_now());
    if (!rc && tb - ta < *rtt) {
        *rtt = tb - ta;
        *at = (ta + tb) / 2;
        *offset = buf[0] - *at;
    }
    return rc;
}
#endif

int prof_clock_measure(dist_handle *dh, const prof_clock_test *t, int rank, int world, double *offset, double *at)
{
    *offset = 0;
    *at = prof_clock_skew(t, rank, so_now());
    int rc = 0;
#ifdef SCALEOUT_HAVE_MPI
    so_comm *c = dist_comm(dh);
    double rtt = 1e30;
    for (int r = 1; c && !rc && r < world; r++)
        for (int k = 0; !rc && k < CLOCK_ROUNDS && (rank == 0 || rank == r); k++)
            rc = ping(c, t, rank, r, offset, at, &rtt);
#else
    (void)dh;
    (void)world;
#endif
    return rc;
}

so_prof_clock prof_clock_model(double o1, double a1, double o2, double a2, prof_clock_mode mode)
{
    so_prof_clock m = {o1, 0, a1};
    if (mode == PROF_CLOCK_NONE)
        m.offset = 0;
    else if (mode == PROF_CLOCK_DRIFT && a2 > a1)
        m.drift = (o2 - o1) / (a2 - a1);
    return m;
}

/* ---- a run's clocks ------------------------------------------------------------ */

int prof_clocks_init(prof_clocks *c, int rank, int world)
{
    *c = (prof_clocks){.rank = rank, .world = world};
    double start = so_now();
    prof_clock_test_init(&c->test, start);
    c->origin = prof_clocks_skew(c, start);
    c->clocks = calloc((size_t)world, sizeof *c->clocks);
    return c->clocks ? 0 : so_err(SO_ENOMEM, "profiler: out of memory");
}

double prof_clocks_skew(const prof_clocks *c, double t) { return prof_clock_skew(&c->test, c->rank, t); }

int prof_clocks_start(prof_clocks *c, dist_handle *dh)
{
    int rc = prof_clock_measure(dh, &c->test, c->rank, c->world, &c->start_offset, &c->start_at);
#ifdef SCALEOUT_HAVE_MPI
    if (!rc && dist_comm(dh) && c->world > 1)
        rc = so_comm_bcast_bytes(dist_comm(dh), &c->origin, sizeof c->origin, 0);
#endif
    return rc;
}

int prof_clocks_end(prof_clocks *c, dist_handle *dh, const so_dist *d)
{
    double o2, a2;
    int rc = prof_clock_measure(dh, &c->test, c->rank, c->world, &o2, &a2);
    if (rc)
        return rc;
    c->clock = prof_clock_model(c->start_offset, c->start_at, o2, a2, c->test.mode);
    double *v = calloc((size_t)c->world * 3, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    memcpy(v + 3 * c->rank, (double[3]){c->clock.offset, c->clock.drift, c->clock.t_ref}, sizeof(double[3]));
    rc = d && c->world > 1 ? d->sum(d->ctx, v, 3 * c->world) : 0;
    for (int r = 0; !rc && r < c->world; r++)
        c->clocks[r] = (so_prof_clock){v[3 * r], v[3 * r + 1], v[3 * r + 2]};
    free(v);
    return rc;
}

void prof_clocks_deinit(prof_clocks *c)
{
    free(c->clocks);
    c->clocks = NULL;
}
