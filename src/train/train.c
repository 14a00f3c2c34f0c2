/* The training loop (see train.h): per step, K micro-batches of forward and
 * backward, the strategy told as backward produces gradients (data
 * parallelism submits buckets then), one wait, then the update. The loop
 * does not know how ranks cooperate (scaleout/strategy.h). Every phase is
 * timed so reports can say where the time goes. */
#include "scaleout/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/timer.h"

void so_train_defaults(so_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->epochs = 1;
    c->lr.kind = SO_LR_CONSTANT;
    c->lr.base_lr = 0.01f;
    c->lr.gamma = 0.1f;
    c->lr.warmup_start = 0.1f;
    c->bucket_bytes = 25u << 20;
    c->first_bucket_bytes = 1u << 20;
    c->overlap = 1;
    c->accumulate = 1;
    c->error_feedback = -1;
    c->throughput_skip = 10;
}

typedef struct {
    so_model *m;
    so_optim *opt;
    so_loader *train;
    const so_train_config *c;
    const so_dist *d;
    const so_strategy *strat; /* NULL: the plain local step */
    int grad_err;       /* the strategy's error from inside backward */
    so_train_result *r;
    long step;          /* global optimizer step */
    double img_time;    /* seconds of steps counted for throughput */
    double img_count;
    double all_time, all_count; /* every step: the fallback for runs shorter than the skip */
} trainer;

static void span(const trainer *t, so_span_kind kind, int id, double t0, double t1)
{
    const so_train_hooks *h = t->c->hooks;
    if (h && h->span)
        h->span(h->arg, kind, t->step, id, t0, t1);
}

/* Images per step are batch x K x this: the ranks whose batches differ. */
static int replicas(const trainer *t)
{
    if (t->strat && t->strat->replicas > 0)
        return t->strat->replicas;
    return t->d ? t->d->world : 1;
}

typedef struct {
    trainer *t;
    int k;              /* micro-batches handed out this step */
} batch_feed;

/* The loader's next batch, timed as the DATA span of micro-batch k. */
static int next_batch(void *arg, const float **x, const int32_t **y, int *n)
{
    batch_feed *f = arg;
    double t0 = so_now();
    int got = so_loader_next(f->t->train, x, y, n);
    double t1 = so_now();
    f->t->r->data_wait += t1 - t0;
    if (got > 0)
        span(f->t, SO_SPAN_DATA, f->k++, t0, t1);
    return got;
}

static void pass_span(void *arg, int backward, int k, double t0, double t1)
{
    batch_feed *f = arg;
    *(backward ? &f->t->r->backward : &f->t->r->forward) += t1 - t0;
    span(f->t, backward ? SO_SPAN_BACKWARD : SO_SPAN_FORWARD, k, t0, t1);
}

/* Forward and backward of the step's K micro-batches, one after the other. */
static int micro_batches(trainer *t, batch_feed *feed, double *loss_out)
{
    so_model *m = t->m;
    so_train_result *r = t->r;
    int K = t->c->accumulate;
    double loss = 0;
    for (int k = 0; k < K; k++) {
        const float *x;
        const int32_t *y;
        int n;
        int got = next_batch(feed, &x, &y, &n);
        if (got <= 0)
            return got;
        double t1 = so_now();
        m->accumulate_grads = k > 0;
        int rc = so_model_forward(m, x, y, n, 1);
        double t2 = so_now();
        r->forward += t2 - t1;
        span(t, SO_SPAN_FORWARD, k, t1, t2);
        if (t->strat && t->strat->ops->backward_begin)
            t->strat->ops->backward_begin(t->strat->self, k, K);
        if (!rc)
            rc = so_model_backward(m);
        double t3 = so_now();
        r->backward += t3 - t2;
        span(t, SO_SPAN_BACKWARD, k, t2, t3);
        if (rc || (rc = t->grad_err))
            return rc;
        loss += m->loss;
    }
    *loss_out = loss / K;
    return 1;
}

/* The gradient the update will use, times f: the strategy's (it may step a
 * shard held apart from m->grads) or the model's whole buffer. */
static int scale_grads(trainer *t, float f)
{
    if (t->strat && t->strat->ops->grad_scale)
        return t->strat->ops->grad_scale(t->strat->self, f);
    so_optim_scale(t->m->grads, t->m->nparams, f);
    return 0;
}

/* --clip-norm, as torch.nn.utils.clip_grad_norm_: the global L2 norm of the
 * step's gradient over every parameter of the model (a sharded strategy
 * sums its shards over the ranks, pipeline stages their slices), and when
 * clip / (norm + 1e-6) < 1 the gradient is multiplied by it. */
static int clip_grads(trainer *t)
{
    double sq = 0;
    int rc = 0;
    if (t->strat && t->strat->ops->grad_sqnorm) {
        rc = t->strat->ops->grad_sqnorm(t->strat->self, &sq);
    } else {
        sq = so_optim_sqnorm(t->m->grads, t->m->nparams);
        if (t->d && !(rc = t->d->sum(t->d->ctx, &sq, 1)))
            sq /= replicas(t); /* each replica holds the same gradient */
    }
    if (rc)
        return rc;
    double norm = sqrt(sq), coef = (double)t->c->clip_norm / (norm + 1e-6);
    t->r->grad_norm = norm;
    if (!(coef < 1.0))
        return 0;
    t->r->clipped_steps++;
    return scale_grads(t, (float)coef);
}

/* One optimizer step of K micro-batches. Returns 1 if a step ran, 0 at the
 * end of the epoch, negative on error. */
static int train_step(trainer *t, double *loss_out)
{
    so_model *m = t->m;
    so_train_result *r = t->r;
    int K = t->c->accumulate;
    batch_feed feed = {t, 0};
    so_step_io io = {next_batch, pass_span, &feed};
    int got = t->strat && t->strat->ops->run_step ? t->strat->ops->run_step(t->strat->self, K, &io, loss_out)
                                                  : micro_batches(t, &feed, loss_out);
    if (got <= 0)
        return got;
    if (t->strat) {
        double waited = 0, w0 = so_now();
        int rc = t->strat->ops->grads_done(t->strat->self, &waited);
        if (rc)
            return rc;
        r->comm_exposed += waited;
        span(t, SO_SPAN_COMM_WAIT, 0, w0, so_now());
    }
    double t3 = so_now();
    const so_train_hooks *h = t->c->hooks;
    int rc = h && h->before_update ? h->before_update(h->arg) : 0;
    if (rc)
        return rc;
    if (K > 1 && (rc = scale_grads(t, 1.0f / (float)K)))
        return rc;
    if (t->c->clip_norm > 0 && (rc = clip_grads(t)))
        return rc;
    float lr = so_lr_at(&t->c->lr, t->step);
    if (t->strat && t->strat->ops->update)
        rc = t->strat->ops->update(t->strat->self, t->opt, m->params, m->grads, lr);
    else
        so_optim_step(t->opt, m->params, m->grads, lr);
    so_model_params_changed(m);
    if (rc)
        return rc;
    double t4 = so_now();
    r->optimizer += t4 - t3;
    span(t, SO_SPAN_OPTIMIZER, 0, t3, t4);
    return 1;
}

/* The mean of v over the ranks that have one (NAN: a rank that computes no
 * loss, such as an early pipeline stage). */
static int reduce_mean(const so_dist *d, double *v)
{
    if (!d)
        return 0;
    double s[2] = {isnan(*v) ? 0 : *v, isnan(*v) ? 0 : 1};
    int rc = d->sum(d->ctx, s, 2);
    *v = s[1] > 0 ? s[0] / s[1] : NAN;
    return rc;
}

/* Evaluation through the strategy when it has its own (pipeline stages). */
static int evaluate(trainer *t, so_loader *test, double *accuracy, double *loss)
{
    if (!t->strat || !t->strat->ops->evaluate)
        return so_evaluate(t->m, test, t->d, accuracy, loss);
    double sums[3] = {0, 0, 0};
    int rc = so_loader_start_epoch(test, 0);
    if (!rc)
        rc = t->strat->ops->evaluate(t->strat->self, test, sums);
    if (!rc && t->d)
        rc = t->d->sum(t->d->ctx, sums, 3);
    *accuracy = sums[1] > 0 ? sums[0] / sums[1] : 0;
    *loss = sums[1] > 0 ? sums[2] / sums[1] : 0;
    return rc;
}

int so_evaluate_sums(so_model *m, so_loader *test, double sums[3])
{
    const float *x;
    const int32_t *y;
    int n, got, rc = 0;
    while (!rc && (got = so_loader_next(test, &x, &y, &n)) > 0) {
        rc = so_model_forward(m, x, y, n, 0);
        if (!rc)
            rc = so_model_add_scores(m, y, n, sums);
    }
    return rc ? rc : got < 0 ? got : 0;
}

int so_evaluate(so_model *m, so_loader *test, const so_dist *d, double *accuracy, double *loss)
{
    double sums[3] = {0, 0, 0}; /* correct, samples, loss x samples */
    int rc = so_loader_start_epoch(test, 0);
    if (!rc)
        rc = so_evaluate_sums(m, test, sums);
    if (!rc && d)
        rc = d->sum(d->ctx, sums, 3);
    *accuracy = sums[1] > 0 ? sums[0] / sums[1] : 0;
    *loss = sums[1] > 0 ? sums[2] / sums[1] : 0;
    return rc;
}

static int record_step(trainer *t, double seconds, double loss)
{
    so_train_result *r = t->r;
    if (r->nstep_seconds % 1024 == 0) {
        size_t n = (size_t)(r->nstep_seconds + 1024);
        double *grown = realloc(r->step_seconds, n * sizeof *grown);
        if (grown)
            r->step_seconds = grown;
        double *losses = grown ? realloc(r->step_loss, n * sizeof *losses) : NULL;
        if (!losses)
            return so_err(SO_ENOMEM, "out of memory recording step times");
        r->step_loss = losses;
    }
    r->step_loss[r->nstep_seconds] = loss;
    r->step_seconds[r->nstep_seconds++] = seconds;
    double images = (double)t->m->batch * t->c->accumulate * replicas(t);
    t->all_time += seconds;
    t->all_count += images;
    if (t->step - t->c->start_step >= t->c->throughput_skip) {
        t->img_time += seconds;
        t->img_count += images;
    }
    return 0;
}

/* ---- non-finite values -------------------------------------------------------------- */

/* Index of the first element of v[0..n) that is a NaN or an infinity, or n. */
static size_t first_nonfinite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return i;
    return n;
}

/* The first tensor of one buffer (0 weights, 1 gradients, 2 running statistics). */
static int find_in(const so_model *m, int which, char *what, size_t len)
{
    static const char *const kinds[3] = {"weights", "gradients", "running statistics"};
    const float *base = which == 0 ? m->params : which == 1 ? m->grads : m->bufs;
    for (int i = 0; base && i < so_graph_size(m->g); i++) {
        so_tensor_desc td[4];
        int nt = so_node_tensors(m->g, i, td);
        for (int k = 0; k < nt; k++) {
            if (td[k].is_buffer != (which == 2))
                continue;
            size_t at = first_nonfinite(base + td[k].off, td[k].count);
            if (at == td[k].count)
                continue;
            float v = base[td[k].off + at];
            snprintf(what, len, "%s of %s.%s (%s at element %zu)", kinds[which], so_graph_node(m->g, i)->name,
                     td[k].suffix, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", at);
            return 1;
        }
    }
    return 0;
}

int so_train_first_nonfinite(const so_model *m, unsigned buffers, char *what, size_t len)
{
    what[0] = '\0';
    for (int which = 0; which < 3; which++)
        if ((buffers & (1u << which)) && find_in(m, which, what, len))
            return 1;
    return 0;
}

/* When every value is finite the loss overflowed: the largest weight says how far. */
static void largest_weight(const so_model *m, char *what, size_t len)
{
    float big = 0;
    int node = 0;
    const char *suffix = "";
    for (int i = 0; i < so_graph_size(m->g); i++) {
        so_tensor_desc td[4];
        int nt = so_node_tensors(m->g, i, td);
        for (int k = 0; k < nt; k++)
            for (size_t e = 0; !td[k].is_buffer && e < td[k].count; e++)
                if (fabsf(m->params[td[k].off + e]) > big) {
                    big = fabsf(m->params[td[k].off + e]);
                    node = i;
                    suffix = td[k].suffix;
                }
    }
    snprintf(what, len, "none, every value is finite; the largest weight, %.3g in %s.%s, made the loss overflow",
             big, so_graph_node(m->g, node)->name, suffix);
}

/* A step whose loss is NaN or infinite (on a rank that computes one). */
static int check_loss(const trainer *t, double loss)
{
    int no_loss = t->strat && t->strat->no_loss;
    if (t->c->allow_nonfinite || isfinite(loss) || (no_loss && isnan(loss)))
        return 0;
    char what[256];
    if (!so_train_first_nonfinite(t->m, SO_NONFINITE_ALL, what, sizeof what))
        largest_weight(t->m, what, sizeof what);
    return so_err(SO_ENUMERIC, "step %ld: loss %s; first non-finite tensor: %s (--allow-nonfinite trains on)",
                  t->step + 1, isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf", what);
}

static int step_end(trainer *t, int epoch, long s, long spe, int epoch_end)
{
    const so_train_hooks *h = t->c->hooks;
    if (!h || !h->step_end)
        return 0;
    so_train_state st = {t->step, epoch_end ? epoch + 1 : epoch, epoch_end ? 0 : s, epoch_end, spe, t->m, t->opt};
    return h->step_end(h->arg, &st);
}

/* An evaluation inside the epoch, after the step p reports (eval_steps):
 * passed to progress as p->eval. Its time moves *start on, so the epoch's
 * seconds and images/s stay training alone, as with epoch evaluations. */
static int evaluate_within(trainer *t, so_loader *test, so_progress p, double *start, so_progress_fn progress,
                           void *arg)
{
    so_epoch_stats ev = {.epoch = p.epoch, .loss = p.loss, .seconds = p.elapsed, .images_per_sec = p.images_per_sec};
    double e0 = so_now();
    int rc = evaluate(t, test, &ev.test_accuracy, &ev.test_loss);
    double e1 = so_now();
    span(t, SO_SPAN_EVAL, 0, e0, e1);
    *start += e1 - e0;
    p.eval = &ev;
    if (progress && !rc)
        progress(arg, &p);
    return rc;
}

static int run_epoch(trainer *t, int epoch, int epochs, long max_steps, so_loader *test,
                     so_progress_fn progress, void *arg)
{
    so_epoch_stats *es = &t->r->epochs[t->r->nepochs];
    *es = (so_epoch_stats){.epoch = epoch, .test_accuracy = -1};
    long spe = so_loader_steps(t->train) / t->c->accumulate;
    long s = t->step - (long)epoch * spe; /* > 0 only when resuming mid-epoch */
    long s0 = s;
    /* A resume starts the epoch at its next batch: the loader's shuffle and
     * augmentation depend only on (seed, epoch, sample), so it is the batch an
     * uninterrupted run would see, and the ones before are never decoded. */
    int rc = so_loader_start_epoch_at(t->train, epoch, (int)(s * t->c->accumulate));
    double start = so_now(), loss_sum = 0;
    long loss_steps = 0; /* steps with a loss on this rank */
    int world = replicas(t);
    while (!rc && s < spe && t->step < max_steps) {
        double t0 = so_now(), loss = 0;
        int got = train_step(t, &loss);
        if (got <= 0) {
            rc = got;
            break;
        }
        /* the strategy's end of step (a model average, a gossip round) is part of the step's time */
        if (t->strat && t->strat->ops->step_done && (rc = t->strat->ops->step_done(t->strat->self, t->step + 1)))
            break;
        double t1 = so_now();
        if ((rc = check_loss(t, loss)))
            break;
        rc = record_step(t, t1 - t0, loss);
        if (!isnan(loss)) {
            loss_sum += loss;
            loss_steps++;
        }
        s++;
        t->step++;
        span(t, SO_SPAN_STEP, 0, t0, t1);
        double el = t1 - start;
        so_progress p = {epoch, epochs, s, spe, loss_steps ? loss_sum / loss_steps : NAN,
                         el > 0 ? (double)(s - s0) * t->m->batch * t->c->accumulate * world / el : 0, el, NULL, NULL};
        if (progress && !rc)
            progress(arg, &p);
        long every = t->c->eval_steps;
        if (!rc && test && every > 0 && s % every == 0 && s < spe && t->step < max_steps)
            rc = evaluate_within(t, test, p, &start, progress, arg);
        if (!rc && s < spe && t->step < max_steps)
            rc = step_end(t, epoch, s, spe, 0);
    }
    if (rc)
        return rc;
    long done = s - s0;
    es->seconds = so_now() - start;
    es->loss = loss_steps ? loss_sum / loss_steps : done ? NAN : 0;
    es->images_per_sec = es->seconds > 0 ? (double)done * t->m->batch * t->c->accumulate * world / es->seconds : 0;
    rc = reduce_mean(t->d, &es->loss);
    int last = t->step >= max_steps || epoch == epochs - 1;
    int ev = t->c->eval_every;
    if (!rc && test && ev >= 0 && (last || (ev > 0 && (epoch + 1) % ev == 0))) {
        double e0 = so_now();
        rc = evaluate(t, test, &es->test_accuracy, &es->test_loss);
        span(t, SO_SPAN_EVAL, 0, e0, so_now());
    }
    t->r->nepochs++;
    if (progress && !rc) {
        so_progress p = {epoch, epochs, s, spe, es->loss, es->images_per_sec, es->seconds, es, NULL};
        progress(arg, &p);
    }
    if (!rc && done > 0)
        rc = step_end(t, epoch, s, spe, s == spe);
    return rc;
}

static int bn_allsum(void *arg, double *v, int n)
{
    const so_dist *d = arg;
    return d->allsum(d->ctx, v, (size_t)n);
}

/* The model's gradients-ready hook, passed on to the strategy. */
static void on_grad_ready(void *arg, int node, size_t off, size_t n)
{
    trainer *t = arg;
    if (!t->grad_err && t->strat->ops->grads_ready)
        t->grad_err = t->strat->ops->grads_ready(t->strat->self, node, off, n);
}

static int trainer_setup(trainer *t)
{
    const so_train_config *c = t->c;
    if (c->sync_bn && t->d && !t->d->allsum)
        return so_err(SO_EUNSUP, "--sync-bn: this communication layer has no in-flight allreduce");
    if (c->sync_bn && t->d && t->d->world > 1) {
        t->m->bn_allsum = bn_allsum;
        t->m->bn_allsum_arg = (void *)t->d;
    }
    if (c->accumulate < 1)
        return so_err(SO_EINVAL, "--accumulate: %d must be >= 1", c->accumulate);
    if (!(c->clip_norm >= 0))
        return so_err(SO_EINVAL, "--clip-norm: %g must be >= 0", (double)c->clip_norm);
    long spe = so_loader_steps(t->train) / c->accumulate;
    if (spe < 1)
        return so_err(SO_EINVAL, "an epoch has %d batches per rank, fewer than --accumulate %d",
                      so_loader_steps(t->train), c->accumulate);
    t->r->first_bucket_bytes = c->first_bucket_bytes;
    t->r->bucket_bytes = c->bucket_bytes;
    if (!t->strat)
        return 0;
    so_model_set_grad_ready(t->m, on_grad_ready, t);
    if (t->d && t->strat->ops->use_dist)
        t->strat->ops->use_dist(t->strat->self, t->d);
    return t->strat->ops->start ? t->strat->ops->start(t->strat->self, t->m, c, t->r) : 0;
}

/* The strategy of the run: the caller's, or data parallelism over dist. */
static int pick_strategy(trainer *t, so_strategy **owned)
{
    *owned = NULL;
    t->strat = t->c->strategy;
    if (t->strat || !t->d)
        return 0;
    int rc = so_strategy_data_parallel(t->d, owned);
    t->strat = *owned;
    return rc;
}

/* step_loss as the mean over the ranks that compute a loss, step by step:
 * one sum of (loss, 1) pairs after the run rather than one per step. */
static int reduce_step_losses(trainer *t)
{
    so_train_result *r = t->r;
    if (!t->d || t->d->world < 2 || r->nstep_seconds < 1)
        return 0;
    size_t n = (size_t)r->nstep_seconds;
    double *s = malloc(2 * n * sizeof *s);
    if (!s)
        return so_err(SO_ENOMEM, "out of memory for %zu step losses", n);
    for (size_t k = 0; k < n; k++) {
        s[2 * k] = isnan(r->step_loss[k]) ? 0 : r->step_loss[k];
        s[2 * k + 1] = !isnan(r->step_loss[k]);
    }
    int rc = t->d->sum(t->d->ctx, s, (int)(2 * n));
    for (size_t k = 0; !rc && k < n; k++)
        r->step_loss[k] = s[2 * k + 1] > 0 ? s[2 * k] / s[2 * k + 1] : NAN;
    free(s);
    return rc;
}

int so_train(so_model *m, so_optim *opt, so_loader *train, so_loader *test, const so_train_config *c,
             const so_dist *dist, so_progress_fn progress, void *progress_arg, so_train_result *out)
{
    memset(out, 0, sizeof *out);
    out->test_accuracy = -1;
    trainer t = {.m = m, .opt = opt, .train = train, .c = c, .d = dist, .r = out, .step = c->start_step};
    so_strategy *owned;
    int rc = pick_strategy(&t, &owned);
    if (!rc)
        rc = trainer_setup(&t);
    long spe = so_loader_steps(train) / (c->accumulate > 0 ? c->accumulate : 1);
    long max_steps = c->steps > 0 ? c->steps : (long)c->epochs * spe;
    int epochs = spe > 0 ? (int)((max_steps + spe - 1) / spe) : 0;
    if (!rc && c->start_step < 0)
        rc = so_err(SO_EINVAL, "resume step %ld is negative", c->start_step);
    if (!rc && !(out->epochs = calloc((size_t)epochs + 1, sizeof *out->epochs)))
        rc = so_err(SO_ENOMEM, "out of memory for epoch statistics");
    double start = so_now();
    int first = spe > 0 ? (int)(c->start_step / spe) : 0;
    for (int e = first; !rc && e < epochs && t.step < max_steps; e++)
        rc = run_epoch(&t, e, epochs, max_steps, test, progress, progress_arg);
    if (rc == SO_STOP) {
        out->stopped = 1;
        rc = 0;
    }
    out->wall_seconds = so_now() - start;
    if (!rc)
        rc = reduce_step_losses(&t);
    out->steps = t.step - c->start_step;
    out->images_per_sec = t.img_time > 0 ? t.img_count / t.img_time
                          : t.all_time > 0 ? t.all_count / t.all_time : 0;
    if (out->nepochs) {
        out->final_loss = out->epochs[out->nepochs - 1].loss;
        for (int e = out->nepochs - 1; e >= 0 && out->test_accuracy < 0; e--)
            out->test_accuracy = out->epochs[e].test_accuracy;
    }
    out->comm_total = out->comm_exposed;
    so_model_set_grad_ready(m, NULL, NULL);
    m->bn_allsum = NULL;
    if (t.strat && t.strat->ops->finish)
        t.strat->ops->finish(t.strat->self);
    so_strategy_free(owned);
    return rc;
}

void so_train_result_free(so_train_result *r)
{
    free(r->epochs);
    free(r->step_seconds);
    free(r->step_loss);
    memset(r, 0, sizeof *r);
}
