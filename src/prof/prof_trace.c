/* Chrome trace-event output of one rank: metadata events naming the process
 * ("rank R") and its two threads ("compute", "comm"), then one complete ("X")
 * event per recorded interval. Times are integer nanoseconds before printing
 * as microseconds, so an event that nests in the recording nests in the file. */
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

static void write_args(const so_prof *p, const prof_ev *e, FILE *f, double base)
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
                (e->u.c.t_queued - base) * 1e6, (e->t0 - e->u.c.t_queued) * 1e6);
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

int so_prof_write_trace(const so_prof *p, FILE *f, double clock_offset, double origin)
{
    double base = origin - clock_offset; /* this rank's clock reading at the common origin */
    write_meta(p, f);
    for (size_t i = 0; i < p->nev; i++) {
        const prof_ev *e = &p->ev[i];
        long long t0 = llround((e->t0 - base) * 1e9), t1 = llround((e->t1 - base) * 1e9);
        if (t1 < t0)
            t1 = t0;
        const char *name = p->names[e->name];
        if (e->kind == EV_STEP)
            name = "step (summary)";
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,", name,
                category(e), p->cfg.rank, e->track, (double)t0 / 1e3, (double)(t1 - t0) / 1e3);
        write_args(p, e, f, base);
        fputs("}", f);
    }
    return ferror(f) ? so_err(SO_EIO, "error writing the trace") : 0;
}
