/* Profiler overhead measured A/B inside one process: a model's training
 * steps (forward + backward + SGD on synthetic data) alternate between
 * profiling off (no hooks at all) and on (the recorder at one detail level,
 * every step in the timeline window), so load from other processes on a
 * shared machine hits both alike. Prints the median step time of each and
 * the overhead, plus the recorder's cost per event from a tight loop (and
 * per checkpoint I/O event, which the background threads record).
 *
 *   build/tests/prof_ab [model] [batch] [pairs] [detail]   (resnet20 64 40 layer)
 * Run alone: flock /tmp/scaleout-bench.lock build/tests/prof_ab ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/optim.h"
#include "scaleout/prof.h"
#include "scaleout/rng.h"
#include "scaleout/threads.h"
#include "scaleout/timer.h"
#include "scaleout/zoo.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One training step; with p, reports the phases like the trainer does. */
static double step(so_model *m, so_optim *o, const float *x, const int32_t *y, so_prof *p, long s)
{
    double t0 = so_now();
    if (p)
        so_prof_span(p, SO_SPAN_DATA, s, 0, t0, t0);
    so_model_forward(m, x, y, m->batch, 1);
    double t1 = so_now();
    if (p)
        so_prof_span(p, SO_SPAN_FORWARD, s, 0, t0, t1);
    so_model_backward(m);
    double t2 = so_now();
    if (p)
        so_prof_span(p, SO_SPAN_BACKWARD, s, 0, t1, t2);
    so_optim_step(o, m->params, m->grads, 0.01f);
    so_model_params_changed(m);
    double t3 = so_now();
    if (p) {
        so_prof_span(p, SO_SPAN_OPTIMIZER, s, 0, t2, t3);
        so_prof_span(p, SO_SPAN_STEP, s + 1, 0, t0, t3);
    }
    return so_now() - t0;
}

/* One timed loop of `calls` recorder calls on a fresh profiler: ns per call. */
typedef void (*record_fn)(so_prof *p, long i);

static double ns_per_call(so_prof_detail detail, record_fn fn, int calls_per_iter)
{
    so_prof *p = NULL;
    so_prof_config c = {detail, 0, -1, 0, 0, 0};
    if (so_prof_create(&c, &p))
        return -1;
    const long n = 200000;
    double t0 = so_now();
    for (long i = 0; i < n; i++)
        fn(p, i);
    double dt = so_now() - t0;
    so_prof_destroy(p);
    return 1e9 * dt / ((double)calls_per_iter * n);
}

/* A node span and a phase span: what the training thread records. */
static void record_spans(so_prof *p, long i)
{
    so_prof_span(p, SO_SPAN_DATA, i, 0, 0, 0);
    so_prof_span(p, SO_SPAN_STEP, i + 1, 0, 0, 1);
}

/* A checkpoint writer or flush thread's event: mutex, totals, event append. */
static void record_io(so_prof *p, long i)
{
    so_prof_io_event e = {i % 2 ? "shard write" : "snapshot", SO_PROF_TRACK_CKPT_IO, i / 4, 4096, 0, 1, 0};
    so_prof_io(p, &e);
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "resnet20";
    int batch = argc > 2 ? atoi(argv[2]) : 64, pairs = argc > 3 ? atoi(argv[3]) : 40;
    so_prof_detail detail = SO_PROF_DETAIL_LAYER;
    if ((argc > 4 && so_prof_detail_parse(argv[4], &detail)) || batch < 1 || pairs < 1) {
        fprintf(stderr, "usage: prof_ab [model] [batch] [pairs] [layer|block|step]\n");
        return 2;
    }
    const so_zoo_entry *z = so_zoo_find(model);
    so_graph *g = NULL;
    so_model *m = NULL;
    so_optim *o = NULL;
    so_optim_config oc;
    so_optim_defaults(&oc, SO_OPT_SGD);
    so_threads_set(1, 1);
    if (!z || so_zoo_build(model, z->c, z->h, z->w, z->classes, &g) || so_model_create(g, "onednn", batch, 1, &m) ||
        so_optim_create(&oc, m->nparams, &o)) {
        fprintf(stderr, "prof_ab: %s\n", z ? so_errmsg() : "unknown model");
        return 1;
    }
    size_t n = (size_t)batch * z->c * z->h * z->w;
    float *x = malloc(n * sizeof *x);
    int32_t *y = malloc((size_t)batch * sizeof *y);
    double *off = malloc((size_t)pairs * sizeof *off), *on = malloc((size_t)pairs * sizeof *on);
    so_rng r;
    so_rng_seed(&r, 1);
    for (size_t i = 0; x && i < n; i++)
        x[i] = so_rng_uniform(&r) - 0.5f;
    for (int i = 0; y && i < batch; i++)
        y[i] = i % z->classes;
    so_prof *p = NULL;
    so_prof_config pc = {detail, 0, -1, 0, 0, 0};
    if (!x || !y || !off || !on || so_prof_create(&pc, &p) || so_prof_attach_model(p, m)) {
        fprintf(stderr, "prof_ab: out of memory\n");
        return 1;
    }
    /* Switched by hand between steps (attach allocates). */
    so_node_span_fn hook = m->on_node;
    void *hook_arg = m->on_node_arg;
    m->on_node = NULL;
    for (int w = 0; w < 3; w++) /* warm-up: primitive creation */
        step(m, o, x, y, NULL, 0);
    for (int i = 0; i < pairs; i++) {
        /* ABBA order cancels a linear drift within each pair of pairs. */
        int first_on = i % 2;
        for (int k = 0; k < 2; k++) {
            int prof_on = k == 0 ? first_on : !first_on;
            m->on_node = prof_on ? hook : NULL;
            m->on_node_arg = hook_arg;
            double t = step(m, o, x, y, prof_on ? p : NULL, i);
            *(prof_on ? &on[i] : &off[i]) = t;
        }
    }
    m->on_node = NULL;
    size_t kept, dropped;
    so_prof_event_counts(p, &kept, &dropped);
    double moff = median(off, pairs), mon = median(on, pairs);
    printf("%s batch %d, %d A/B pairs, detail %s: off %.2f ms (%.2f-%.2f), on %.2f ms (%.2f-%.2f), "
           "overhead %+.2f%%; %zu events recorded, %.0f ns per recorder call, %.0f ns per checkpoint I/O event\n",
           model, batch, pairs, so_prof_detail_name(detail), 1e3 * moff, 1e3 * off[0], 1e3 * off[pairs - 1],
           1e3 * mon, 1e3 * on[0], 1e3 * on[pairs - 1], 100 * (mon - moff) / moff, kept,
           ns_per_call(detail, record_spans, 2), ns_per_call(SO_PROF_DETAIL_STEP, record_io, 1));
    so_prof_destroy(p);
    so_optim_destroy(o);
    so_model_destroy(m);
    free(x);
    free(y);
    free(off);
    free(on);
    return 0;
}
