/* Per-layer times for `scaleout predict` and `scaleout plan` (scaleout/job.h):
 * a zoo model (a GPT-2 at the job's --seq-len) is timed at a batch that
 * fits half the memory available here and takes a step of a second or two,
 * checked before anything is built, then scaled in proportion to the batch asked for; a second, smaller batch
 * tells how linear the layers really are. Over the public job API (and
 * parts_measure, the same steps on a job's model). */
#include "scaleout/job.h"
#include "parts.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"
#include "scaleout/zoo.h"

#define MEASURE_SHARE 0.5       /* of the available memory, for the automatic choice */
#define ASSUMED_EFFICIENCY 0.7  /* of the FMA rate, to guess a step's time before timing one (ResNet-50
                                   at batch 4 runs 0.69 of it on a Zen 3 core) */

int so_job_measure_layers(so_job *j, const so_predict_run *run, double *t_fwd, double *t_bwd, double *t_other,
                          int *timed)
{
    return parts_measure(so_job_model(j), so_job_optim(j), run, t_fwd, t_bwd, t_other, timed);
}

void so_job_layer_times_free(so_job_layer_times *t)
{
    if (!t)
        return;
    free(t->t_fwd);
    free(t->t_bwd);
    t->t_fwd = t->t_bwd = NULL;
}

/* ---- one measurement --------------------------------------------------------- */

typedef struct {
    const so_job_measure_config *mc;
    int rank, batch;
    double said;                /* so_now() of the last step line */
} measure_ctx;

static void say(const measure_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const measure_ctx *c, const char *fmt, ...)
{
    if (!c->mc->progress || c->rank != 0)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->mc->progress(c->mc->progress_ctx, line);
}

/* A step line at most every second: small models take many short steps. */
static void on_step(void *ctx, int done, int most)
{
    measure_ctx *c = ctx;
    if (so_now() - c->said < 1)
        return;
    c->said = so_now();
    say(c, "batch %d: step %d of at most %d", c->batch, done, most);
}

/* What is about to be measured, in one line. */
static void announce(const measure_ctx *ctx, const so_job_config *c, const so_job_measure_config *mc,
                     const so_job_layer_times *t)
{
    char check[96] = "";
    if (t->check_batch)
        snprintf(check, sizeof check, ", then at batch %d to check that they scale linearly", t->check_batch);
    if (t->measured_batch == mc->batch)
        say(ctx, "%s: timing the layers at batch %d (about %.2f GB of %.2f GB available)", c->model, mc->batch,
            t->measure_bytes / 1e9, t->avail_bytes / 1e9);
    else
        say(ctx, "%s: batch %d would need about %.2f GB (%.2f GB available); timing the layers at batch %d "
            "(about %.2f GB) and scaling them to %d%s", c->model, mc->batch, t->batch_bytes / 1e9,
            t->avail_bytes / 1e9, t->measured_batch, t->measure_bytes / 1e9, mc->batch, check);
}

/* The layers of c's model timed at `batch` on a job of its own, freed before
 * returning so the next measurement has the memory. fwd/bwd: n entries.
 * plan: announced once the job knows its rank (NULL: nothing to say). */
static int time_batch(const so_job_config *base, const so_job_measure_config *mc, int batch,
                      so_job_layer_times *plan, double *fwd, double *bwd, double *other, int *timed)
{
    so_job_config c = *base;
    c.dataset = "synthetic";
    c.synthetic_samples = c.batch = batch;
    c.prefetch = 0;
    so_job *j = NULL;
    int rc = so_job_create(&c, &j);
    measure_ctx ctx = {mc, j ? so_job_rank(j) : 0, batch, so_now()};
    so_predict_run run = mc->run;
    run.on_step = on_step;
    run.ctx = &ctx;
    if (!rc && plan) {
        announce(&ctx, base, mc, plan);
        plan->act_bytes = (double)so_model_activation_bytes(so_job_model(j));
    }
    if (!rc)
        rc = so_job_measure_layers(j, &run, fwd, bwd, other, timed);
    so_job_free(j);
    return rc;
}

/* ---- the choice of batch ----------------------------------------------------- */

/* Optimizer state per parameter, from the optimizer itself. */
static int optimizer_slots(const char *name)
{
    so_optim_kind kind;
    so_optim_config oc;
    so_optim *o = NULL;
    if (so_optim_parse(name, &kind))
        return 2; /* so_job_create names the bad optimizer; count the most state meanwhile */
    so_optim_defaults(&oc, kind);
    int slots = so_optim_create(&oc, 1, &o) ? 2 : so_optim_nslots(o);
    so_optim_destroy(o);
    return slots;
}

/* The memory a measurement may take: --measure-memory (never more than is
 * available), else half of what is available (unknown: no limit). */
static double memory_limit(const so_job_measure_config *mc, double avail)
{
    if (mc->max_bytes > 0)
        return avail > 0 && avail < mc->max_bytes ? avail : mc->max_bytes;
    return avail > 0 ? MEASURE_SHARE * avail : 1e300;
}

/* --measure-batch: the caller's batch, refused when it needs more than the
 * memory there is (or --measure-memory). */
static int take_batch(const so_graph *g, const so_job_config *c, const so_job_measure_config *mc, int slots,
                      so_job_layer_times *out)
{
    out->measured_batch = mc->measure_batch < mc->batch ? mc->measure_batch : mc->batch;
    out->measure_bytes = so_predict_train_bytes(g, out->measured_batch, slots);
    double limit = mc->max_bytes > 0 ? memory_limit(mc, out->avail_bytes) : out->avail_bytes;
    if (limit > 0 && out->measure_bytes > limit)
        return so_err(SO_EINVAL, "--measure-batch %d: a training step of %s needs about %.2f GB, %.2f GB %s",
                      out->measured_batch, c->model, out->measure_bytes / 1e9, limit / 1e9,
                      mc->max_bytes > 0 ? "allowed (--measure-memory)" : "available");
    if (mc->check && out->measured_batch < mc->batch && out->measured_batch > 1)
        out->check_batch = out->measured_batch / 2;
    return 0;
}

/* The batch to time at (and the check batch), within memory and time. */
static int choose(const so_graph *g, const so_job_config *c, const so_job_measure_config *mc,
                  so_job_layer_times *out)
{
    int slots = optimizer_slots(c->optimizer);
    out->batch_bytes = so_predict_train_bytes(g, mc->batch, slots);
    if (mc->measure_batch > 0)
        return take_batch(g, c, mc, slots, out);
    double gflops = so_cpu_fma_gflops() > 0 ? so_cpu_fma_gflops() : so_cpu_peak_gflops();
    so_predict_limits l = {.target = mc->batch, .optim_slots = slots, .max_bytes = memory_limit(mc, out->avail_bytes),
                           .flops_per_s = gflops * 1e9 * (c->threads > 0 ? c->threads : 1) * ASSUMED_EFFICIENCY,
                           .step_seconds = mc->step_seconds > 0 ? mc->step_seconds : 2};
    int rc = so_predict_choose_batch(g, &l, &out->measured_batch, &out->check_batch);
    if (rc) {
        char why[256];
        snprintf(why, sizeof why, "%s", so_errmsg());
        return rc == SO_ENOMEM && mc->max_bytes > 0 ? so_err(SO_EINVAL, "--measure-memory: %s: %s", c->model, why)
                                                    : so_err(rc, "%s: %s", c->model, why);
    }
    out->measure_bytes = so_predict_train_bytes(g, out->measured_batch, slots);
    if (!mc->check)
        out->check_batch = 0;
    return 0;
}

/* ---- the whole measurement --------------------------------------------------- */

/* The check: the layers at check_batch against those at measured_batch, and
 * the rest of a step there for t_other's extrapolation. */
static int time_check(const so_job_config *c, const so_job_measure_config *mc, so_job_layer_times *t,
                      double *other_check)
{
    int n = t->n, timed;
    double *fwd = calloc((size_t)n, sizeof *fwd), *bwd = calloc((size_t)n, sizeof *bwd);
    int rc = fwd && bwd ? 0 : so_err(SO_ENOMEM, "out of memory for %d node times", n);
    if (!rc)
        rc = time_batch(c, mc, t->check_batch, NULL, fwd, bwd, other_check, &timed);
    if (!rc)
        t->linearity = so_predict_linearity(n, fwd, bwd, t->check_batch, t->t_fwd, t->t_bwd, t->measured_batch);
    free(fwd);
    free(bwd);
    return rc;
}

int so_job_model_graph(const so_job_config *c, so_graph **out)
{
    so_zoo_entry z;
    *out = NULL;
    int rc = parts_synthetic_shape(c, &z);
    return rc ? rc : so_zoo_build(c->model, z.c, z.h, z.w, z.classes, out);
}

int so_job_measure_model(const so_job_config *c, const so_job_measure_config *mc, so_job_layer_times *out)
{
    *out = (so_job_layer_times){.avail_bytes = (double)so_mem_available()};
    if (mc->batch < 1)
        return so_err(SO_EINVAL, "so_job_measure_model: batch %d", mc->batch);
    so_graph *g = NULL;
    int rc = so_job_model_graph(c, &g);
    if (!rc)
        rc = choose(g, c, mc, out);
    out->n = g ? so_graph_size(g) : 0;
    so_graph_destroy(g);
    if (!rc && (!(out->t_fwd = calloc((size_t)out->n, sizeof *out->t_fwd)) ||
                !(out->t_bwd = calloc((size_t)out->n, sizeof *out->t_bwd))))
        rc = so_err(SO_ENOMEM, "out of memory for %d node times", out->n);
    if (!rc)
        rc = time_batch(c, mc, out->measured_batch, out, out->t_fwd, out->t_bwd, &out->t_other, &out->timed_steps);
    double other_check = 0;
    if (!rc && out->check_batch)
        rc = time_check(c, mc, out, &other_check);
    if (!rc)
        so_predict_scale(out->n, out->t_fwd, out->t_bwd, &out->t_other, out->measured_batch, mc->batch,
                         out->check_batch, other_check);
    if (!rc && out->measured_batch > 0) /* activations grow with the batch */
        out->act_bytes *= (double)mc->batch / out->measured_batch;
    if (rc)
        so_job_layer_times_free(out);
    return rc;
}
