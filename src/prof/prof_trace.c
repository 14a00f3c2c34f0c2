/* Chrome trace-event output of one rank: metadata events naming the process
 * ("rank R") and its two threads ("compute", "comm"), then one complete ("X")
 * event per recorded interval. Times are mapped onto rank 0's clock and
 * rounded to whole ticks of 1/8 us before printing as microseconds: such
 * values are exact in binary, so ts + dur computed by a viewer in floating
 * point lands exactly on the next event's ts, and an event that nests in the
 * recording nests in every viewer (speedscope warns about 1-ulp overlaps). */
#include "prof_internal.h"

#include <math.h>

#include "scaleout/err.h"

static const char *const agg_names[AGG_FIELDS] = {"data_ms", "forward_ms", "backward_ms", "comm_wait_ms",
                                                  "optimizer_ms"};

static void write_meta(const so_prof *p, FILE *f)
{
    int r = p->cfg.rank;
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n", r, r);
    fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n", r, r);
    fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n", r);
    fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"comm\"}}", r);
}

static const char *category(const prof_ev *e)
{
    switch (e->kind) {
    case EV_PHASE: return "phase";
    case EV_NODE: return e->sub ? "backward" : "forward";
    case EV_COMM: return so_prof_use_name((so_prof_use)e->sub);
    case EV_STEP: return "step_summary";
    case EV_STEP_COMM: return "comm_summary";
    default: return "mark";
    }
}


double so_prof_clock_map(const so_prof_clock *c, double t)
{
    return c ? t + c->offset + c->drift * (t - c->t_ref) : t;
}

static void write_args(const so_prof *p, const prof_ev *e, FILE *f, const so_prof_clock *clock, double origin)
{
    fprintf(f, "\"args\":{\"step\":%ld", e->step);
    switch (e->kind) {
    case EV_PHASE:
        if (e->name <= SO_SPAN_BACKWARD)
            fprintf(f, ",\"micro_batch\":%d", e->sub);
        break;
    case EV_COMM:
        fprintf(f, ",\"bytes\":%llu,\"algorithm\":\"%s\",\"use\":\"%s\",\"queued_us\":%.3f,\"queue_wait_us\":%.3f",
                (unsigned long long)e->u.c.bytes, p->names[e->u.c.algo], so_prof_use_name((so_prof_use)e->sub),
                (so_prof_clock_map(clock, e->u.c.t_queued) - origin) * 1e6, (e->t0 - e->u.c.t_queued) * 1e6);
        if (e->bucket >= 0)
            fprintf(f, ",\"bucket\":%d", e->bucket);
        break;
    case EV_STEP:
        for (int k = 0; k < AGG_FIELDS; k++)
            fprintf(f, ",\"%s\":%.3f", agg_names[k], e->u.agg[k] * 1e3);
        break;
    case EV_STEP_COMM:
        fprintf(f, ",\"collectives\":%d,\"bytes\":%llu", e->bucket, (unsigned long long)e->u.c.bytes);
        break;
    default: break;
    }
    fputs("}", f);
}

long long prof_ticks(const so_prof_clock *clock, double origin, double t)
{
    return llround((so_prof_clock_map(clock, t) - origin) * 1e6 * PROF_TICKS_PER_US);
}

int so_prof_write_trace(const so_prof *p, FILE *f, const so_prof_clock *clock, double origin)
{
    write_meta(p, f);
    for (size_t i = 0; i < p->nev; i++) {
        const prof_ev *e = &p->ev[i];
        long long t0 = prof_ticks(clock, origin, e->t0), t1 = prof_ticks(clock, origin, e->t1);
        if (t1 < t0)
            t1 = t0;
        const char *name = p->names[e->name];
        if (e->kind == EV_STEP)
            name = "step (summary)";
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,", name,
                category(e), p->cfg.rank, e->track, (double)t0 / PROF_TICKS_PER_US, (double)(t1 - t0) / PROF_TICKS_PER_US);
        write_args(p, e, f, clock, origin);
        fputs("}", f);
    }
    prof_io_write_trace((so_prof *)p, f, clock, origin); /* const but for its mutex */
    return ferror(f) ? so_err(SO_EIO, "error writing the trace") : 0;
}
