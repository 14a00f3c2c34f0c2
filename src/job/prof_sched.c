/* The pipeline schedule of one step for profile.json (prof_sched.h): the
 * choice of the step and one rank's lane of it. The spans carry the
 * micro-batch only; an interleaved rank's chunk follows from the order
 * (see chunk_of). */
#include "prof_sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/json.h"

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The step whose duration is the median of the candidates [lo, n) in dur. */
static long median_step(const long *step, const double *dur, long lo, long n)
{
    long m = n - lo;
    double *sorted = malloc((size_t)m * sizeof *sorted);
    if (!sorted)
        return step[lo];
    memcpy(sorted, dur + lo, (size_t)m * sizeof *sorted);
    qsort(sorted, (size_t)m, sizeof *sorted, by_value);
    double want = sorted[(m - 1) / 2];
    free(sorted);
    for (long i = lo; i < n; i++)
        if (dur[i] == want)
            return step[i];
    return step[lo];
}

long prof_sched_choose(const so_prof *p, int skip)
{
    long n = so_prof_detailed_steps(p, NULL, NULL, NULL, 0);
    if (n < 1)
        return -1;
    long *step = malloc((size_t)n * sizeof *step);
    double *t0 = malloc((size_t)n * sizeof *t0), *t1 = malloc((size_t)n * sizeof *t1);
    long chosen = -1;
    if (step && t0 && t1) {
        so_prof_detailed_steps(p, step, t0, t1, n);
        long lo = 1; /* the window's first step follows summary steps or set-up */
        while (lo < n && step[lo] < skip)
            lo++;
        for (long i = 0; i < n; i++)
            t1[i] -= t0[i];
        chosen = median_step(step, t1, lo < n ? lo : 0, n);
    }
    free(step);
    free(t0);
    free(t1);
    return chosen;
}

static double step_bound(const so_prof *p, long step, int end)
{
    long n = so_prof_detailed_steps(p, NULL, NULL, NULL, 0);
    double t = NAN;
    long *s = malloc((size_t)(n + 1) * sizeof *s);
    double *t0 = malloc((size_t)(n + 1) * sizeof *t0), *t1 = malloc((size_t)(n + 1) * sizeof *t1);
    if (s && t0 && t1) {
        so_prof_detailed_steps(p, s, t0, t1, n);
        for (long i = 0; i < n; i++)
            if (s[i] == step)
                t = end ? t1[i] : t0[i];
    }
    free(s);
    free(t0);
    free(t1);
    return t;
}

double prof_sched_step_start(const so_prof *p, long step) { return step_bound(p, step, 0); }
double prof_sched_step_end(const so_prof *p, long step) { return step_bound(p, step, 1); }

/* An interleaved rank runs micro-batch k's forward once per chunk, chunk 0
 * first (chunk c + 1 of k depends on chunk c of k through the stages
 * between them), and its backwards in the reverse order: so the i-th
 * forward of k is chunk i, and the i-th backward of k is chunk (forwards of
 * k) - 1 - i. */
static int chunk_of(const so_prof_phase *ph, int n, int i)
{
    int before = 0, forwards = 0;
    for (int j = 0; j < n; j++) {
        if (ph[j].id != ph[i].id)
            continue;
        forwards += ph[j].kind == SO_SPAN_FORWARD;
        before += j < i && ph[j].kind == ph[i].kind;
    }
    return ph[i].kind == SO_SPAN_FORWARD ? before : forwards - 1 - before;
}

static const char *kind_name(so_span_kind k)
{
    return k == SO_SPAN_FORWARD ? "F" : k == SO_SPAN_BACKWARD ? "B" : k == SO_SPAN_COMM_WAIT ? "comm_wait" : "optimizer";
}

static double ms_since(const so_prof_clock *clock, double ref, double t)
{
    return round((so_prof_clock_map(clock, t) - ref) * 1e6) / 1e3; /* whole microseconds */
}

int prof_sched_write_rank(FILE *f, const so_prof *p, long step, int rank, const prof_sched_layout *l,
                          const so_prof_clock *clock, double ref)
{
    so_prof_phase *ph = malloc(PROF_SCHED_SPANS * sizeof *ph);
    if (!ph)
        return so_err(SO_ENOMEM, "out of memory");
    int total = step >= 0 ? so_prof_step_phases(p, step, ph, PROF_SCHED_SPANS) : 0;
    int n = total < PROF_SCHED_SPANS ? total : PROF_SCHED_SPANS;
    so_json js;
    so_json_init(&js, f, 0);
    so_json_obj_begin(&js, NULL);
    so_json_int(&js, "rank", rank);
    so_json_int(&js, "stage", l->stage);
    so_json_int(&js, "replica", l->replica);
    so_json_int(&js, "spans_dropped", total - n);
    so_json_arr_begin(&js, "spans");
    for (int i = 0; i < n; i++) {
        int pass = ph[i].kind == SO_SPAN_FORWARD || ph[i].kind == SO_SPAN_BACKWARD;
        so_json_obj_begin(&js, NULL);
        so_json_str(&js, "kind", kind_name(ph[i].kind));
        if (pass)
            so_json_int(&js, "micro_batch", ph[i].id);
        if (pass && l->chunks > 1)
            so_json_int(&js, "chunk", chunk_of(ph, n, i));
        so_json_num(&js, "t0_ms", ms_since(clock, ref, ph[i].t0));
        so_json_num(&js, "t1_ms", ms_since(clock, ref, ph[i].t1));
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    so_json_obj_end(&js);
    free(ph);
    return ferror(f) ? so_err(SO_EIO, "error writing the pipeline schedule") : 0;
}
