/* Bucketed data parallelism as a strategy (scaleout/strategy.h): the first
 * implementation of the seam, moved out of the loop. Buckets are contiguous
 * slices of the flat gradient buffer (buckets.h), submitted to the so_dist
 * hooks as soon as backward closes them on the step's last micro-batch, so
 * communication overlaps the rest of backward. The optimizer then steps each
 * bucket as soon as its average is in, so the last bucket's allreduce (the
 * one backward's end exposes) runs under the update of the others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "grad_compress.h"
#include "scaleout/err.h"
#include "scaleout/train.h"

/* Steps timed before auto bucket planning (after one untimed warm-up step). */
enum { PLAN_FROM = 1, PLAN_STEPS = 2 };

typedef struct {
    const so_dist *d;
    so_model *m;
    const so_train_config *c;
    so_train_result *r;
    so_bucket_plan plan;
    int live;           /* submit from inside backward (overlap, last micro-batch) */
    long start_step;    /* the run's first step (resume) */
    double *t0;         /* auto_buckets, auto compress: per-node forward, backward times when measuring began,
                           then the optimizer's and the loader's seconds (the step's other time) */
    int auto_compress;  /* --compress auto: the compressor is chosen after measuring */
    so_compressor *cx;  /* --compress: buckets compressed over d->group (NULL: d->grad_submit) */
    so_rank_state rs;   /* cx's residuals and Q's, for checkpoints (made at create) */
    /* --compress auto: the method chosen, by this run or by the run whose
     * checkpoint it resumed (auto_state_set), and what its compressor is
     * made with. */
    int auto_picked, auto_resumed;
    so_compress_spec auto_pick;
    int auto_ef;
    uint64_t auto_seed;
    const so_model *auto_model;
    long step;          /* the step being computed (the compressor's draws) */
    int *order;         /* buckets in the order this step submitted them (plan.n + 1 entries) */
    int nsub;           /* how many of them */
    int step_buckets;   /* the update steps bucket by bucket as they arrive (step_buckets_ok) */
    int own_loop;       /* made by name for the trainer's loop, which calls update right after
                           grads_done (not an inner strategy of local SGD or a pipeline) */
    int deferred;       /* this step's grads_done left buckets in flight for the update */
} dp_state;

static int submit_bucket(dp_state *s, int b)
{
    so_bucket bk = s->plan.b[b];
    s->order[s->nsub++] = b;
    if (s->cx)
        return so_compressor_submit(s->cx, s->d->group, s->m->grads, bk.lo, bk.hi, b, s->step);
    return s->d->grad_submit(s->d->ctx, s->m->grads + bk.lo, bk.hi - bk.lo, b);
}

/* Stepping bucket by bucket gives the same bits as one whole step (the
 * update is element-wise), but only when nothing between the wait and the
 * update needs the whole gradient: no clipping (the global norm), no 1/K
 * scaling, no compressor (its own waits). The before_update observers run
 * with buckets in flight, so they communicate nothing there (the
 * checkpoint posts its partner exchange at step_end, train.h). Only the
 * trainer's own loop calls update right after grads_done, and the buckets
 * must tile the whole buffer. */
static int step_buckets_ok(const dp_state *s)
{
    const so_train_config *c = s->c;
    if (!s->own_loop || !s->d->grad_wait_bucket || s->cx || s->auto_compress || !c->overlap || c->accumulate != 1 ||
        c->clip_norm > 0)
        return 0;
    size_t covered = 0;
    for (int b = 0; b < s->plan.n; b++)
        covered += s->plan.b[b].hi - s->plan.b[b].lo;
    return covered == s->m->nparams;
}

static int dp_start(void *self, so_model *m, const so_train_config *c, so_train_result *r)
{
    dp_state *s = self;
    s->m = m;
    s->c = c;
    s->r = r;
    s->start_step = s->step = c->start_step;
    if (c->compress.method != SO_COMPRESS_NONE && !s->d->group)
        return so_err(SO_EINVAL, "--compress needs the collective vocabulary (so_dist.group)");
    s->auto_compress = c->compress.method == SO_COMPRESS_AUTO && !s->auto_picked; /* else resumed with its pick */
    if (s->auto_compress && (!s->d->cost || !s->d->max))
        return so_err(SO_EINVAL, "--compress auto needs the communication layer's cost model (so_dist.cost)");
    if (s->auto_resumed)
        so_compress_format(&s->auto_pick, r->compress_auto_resumed, sizeof r->compress_auto_resumed);
    int rc = s->cx || s->auto_compress || s->auto_picked
                 ? 0
                 : grad_compress_create(&c->compress, c->error_feedback, c->compress_seed, m, &s->cx);
    if (!rc)
        rc = so_bucket_plan_build(m->g, c->first_bucket_bytes, c->bucket_bytes, &s->plan);
    if (!rc && !(s->order = malloc(((size_t)so_graph_size(m->g) + 1) * sizeof *s->order)))
        rc = so_err(SO_ENOMEM, "out of memory for the bucket order");
    if (rc)
        return rc;
    s->step_buckets = r->step_buckets = step_buckets_ok(s);
    r->nbuckets = s->plan.n;
    r->first_bucket_bytes = c->first_bucket_bytes;
    r->bucket_bytes = c->bucket_bytes;
    if (c->no_initial_bcast)
        return 0;
    rc = s->d->bcast(s->d->ctx, m->params, m->nparams);
    if (!rc && m->nbufs)
        rc = s->d->bcast(s->d->ctx, m->bufs, m->nbufs);
    so_model_params_changed(m);
    return rc;
}

static void dp_backward_begin(void *self, int k, int K)
{
    dp_state *s = self;
    s->live = s->c->overlap && k == K - 1;
    if (k == K - 1)
        s->nsub = 0;
}

static int dp_grads_ready(void *self, int node, size_t off, size_t n)
{
    dp_state *s = self;
    (void)off, (void)n;
    int b = s->plan.closes[node];
    return s->live && b >= 0 ? submit_bucket(s, b) : 0;
}

static int dp_grads_done(void *self, double *exposed)
{
    dp_state *s = self;
    for (int b = 0; !s->c->overlap && b < s->plan.n; b++) {
        int rc = submit_bucket(s, b);
        if (rc)
            return rc;
    }
    if (s->cx)
        return so_compressor_wait(s->cx, s->d->group, exposed);
    s->deferred = s->step_buckets && s->nsub == s->plan.n;
    if (s->deferred) { /* dp_update waits, bucket by bucket */
        *exposed = 0;
        return 0;
    }
    return s->d->grad_wait(s->d->ctx, exposed);
}

/* The optimizer over each bucket once its average is in, in the order they
 * were submitted (the order they complete), so the last one is reduced
 * while the others are stepped. Every piece is the same optimizer step:
 * the step count (Adam's bias correction) is put back before each. The
 * seconds blocked are exposed communication, not optimizer time. */
static int dp_update(void *self, so_optim *opt, float *params, float *grads, float lr)
{
    dp_state *s = self;
    if (!s->deferred) {
        so_optim_step(opt, params, grads, lr);
        return 0;
    }
    s->deferred = 0;
    long steps = so_optim_steps(opt);
    double blocked = 0, w = 0;
    int rc = 0;
    for (int k = 0; k < s->nsub; k++) {
        int r = s->d->grad_wait_bucket(s->d->ctx, k, &w);
        blocked += w;
        rc = rc ? rc : r;
        if (rc) /* still wait for the rest: their buffers are the communication thread's */
            continue;
        so_bucket bk = s->plan.b[s->order[k]];
        so_optim_range piece = {params + bk.lo, grads + bk.lo, bk.lo, bk.lo, bk.hi - bk.lo};
        so_optim_set_steps(opt, steps);
        rc = so_optim_step_ranges(opt, &piece, 1, lr);
    }
    int r = s->d->grad_wait(s->d->ctx, &w); /* closes the round (at once: all done) */
    blocked += w;
    s->r->comm_exposed += blocked;
    s->r->optimizer -= blocked; /* the loop times the whole update as the optimizer's */
    return rc ? rc : r;
}

static double plan_cost(void *ctx, size_t bytes)
{
    const so_dist *d = ctx;
    return d->cost(d->ctx, bytes);
}

/* The step's time outside forward and backward so far: the optimizer's
 * (the update's wait for gradients is communication). Not the wait for
 * data: in the first steps it is the loader's warm-up (up to 6 ms a step
 * on the MLP, 0.2 ms once it runs ahead). */
static double other_seconds(const dp_state *s) { return s->r->optimizer; }

/* The per-node forward and backward times of the PLAN_STEPS steps just
 * measured, as the slowest rank's (every rank must build the same plan and
 * pick the same compressor): t0[0..n) forward, t0[n..2n) backward, t0[2n]
 * the rest of a step (the optimizer; so_predict_compute.t_other). */
static int measured(dp_state *s)
{
    so_model *m = s->m;
    int n = so_graph_size(m->g);
    m->timing--;
    for (int i = 0; i < n; i++) {
        s->t0[i] = (m->t_fwd[i] - s->t0[i]) / PLAN_STEPS;
        s->t0[n + i] = (m->t_bwd[i] - s->t0[n + i]) / PLAN_STEPS;
    }
    s->t0[2 * n] = (other_seconds(s) - s->t0[2 * n]) / PLAN_STEPS;
    return s->d->max(s->d->ctx, s->t0, 2 * n + 1);
}

/* auto_buckets: the plan from the measured backward times. */
static int replan(dp_state *s, long step)
{
    so_model *m = s->m;
    int n = so_graph_size(m->g);
    const double *t_bwd = s->t0 + n;
    double total = 0;
    for (int i = 0; i < n; i++)
        total += t_bwd[i];
    so_train_result *r = s->r;
    int rc = so_bucket_plan_auto(m->g, t_bwd, plan_cost, (void *)s->d, &s->plan, &r->first_bucket_bytes,
                                 &r->bucket_bytes, &r->predicted_comm_end);
    r->measured_backward = total;
    r->nbuckets = s->plan.n;
    r->bucket_plan_step = step;
    return rc;
}

/* --compress auto: each candidate timed on this step's gradient over the
 * real buckets, the step predicted with the link's cost model, and the
 * fastest one's compressor made for the following steps. */
static int choose_compressor(dp_state *s, long step)
{
    so_model *m = s->m;
    int n = so_graph_size(m->g), nb = s->plan.n;
    size_t *bounds = malloc(((size_t)nb + 1) * sizeof *bounds);
    if (!bounds)
        return so_err(SO_ENOMEM, "out of memory choosing a compressor");
    so_bucket_plan_lows(&s->plan, bounds);
    bounds[nb] = m->nparams;
    so_predict_compute pc = {.g = m->g, .t_fwd = s->t0, .t_bwd = s->t0 + n, .t_other = s->t0[2 * n], .batch = m->batch,
                             .first_bucket_bytes = s->r->first_bucket_bytes, .bucket_bytes = s->r->bucket_bytes};
    int rc = grad_compress_auto(s->c, m, s->d, &pc, bounds, nb, s->r, &s->auto_pick);
    free(bounds);
    s->r->compress_auto_step = step;
    if (!rc)
        rc = grad_compress_create(&s->auto_pick, s->c->error_feedback, s->c->compress_seed, m, &s->cx);
    s->auto_picked = !rc;
    return rc;
}

static int measuring(const dp_state *s)
{
    return (s->c->auto_buckets && s->d->cost) || s->auto_compress;
}

/* auto_buckets and --compress auto: times forward and backward per node
 * over PLAN_STEPS steps, then re-plans the buckets jointly with the cost
 * model's per-size algorithm choice, and picks the compressor. */
static int dp_step_done(void *self, long step)
{
    dp_state *s = self;
    long rel = step - s->start_step;
    s->step = step;
    if (!measuring(s) || rel > PLAN_FROM + PLAN_STEPS)
        return 0;
    int n = so_graph_size(s->m->g), rc;
    if (rel == PLAN_FROM) {
        if (!(s->t0 = malloc((2 * (size_t)n + 1) * sizeof *s->t0)))
            return so_err(SO_ENOMEM, "out of memory timing backward");
        memcpy(s->t0, s->m->t_fwd, (size_t)n * sizeof *s->t0);
        memcpy(s->t0 + n, s->m->t_bwd, (size_t)n * sizeof *s->t0);
        s->t0[2 * n] = other_seconds(s);
        s->m->timing++;
        return 0;
    }
    if (rel != PLAN_FROM + PLAN_STEPS || !s->t0)
        return 0;
    rc = measured(s);
    if (!rc && s->c->auto_buckets && s->d->cost)
        rc = replan(s, step);
    if (!rc && s->auto_compress)
        rc = choose_compressor(s, step);
    free(s->t0);
    s->t0 = NULL;
    return rc;
}

static void dp_finish(void *self)
{
    dp_state *s = self;
    if (s->t0) { /* stopped while measuring */
        s->m->timing--;
        free(s->t0);
        s->t0 = NULL;
    }
    if (s->deferred) { /* stopped between grads_done and the update (an observer failed) */
        s->d->grad_wait(s->d->ctx, NULL);
        s->deferred = 0;
    }
    so_bucket_plan_free(&s->plan);
    free(s->order);
    s->order = NULL;
    if (s->cx) {
        so_compressor_wait(s->cx, s->d->group, NULL); /* stopped with buckets in flight */
        grad_compress_report(s->cx, s->r);
    } else if (s->d && s->d->world > 1) { /* plain FP32: its bytes per step, as the methods count theirs */
        grad_compress_report_dense(s->m->nparams, s->r);
    }
    if (s->cx && !s->rs.ctx) { /* made by start (a caller of so_strategy_data_parallel): the run's own */
        so_compressor_destroy(s->cx);
        s->cx = NULL;
    }
}

/* After the average every rank holds the same whole gradient: its norm needs no communication. */
static int dp_grad_sqnorm(void *self, double *sq)
{
    dp_state *s = self;
    *sq = so_optim_sqnorm(s->m->grads, s->m->nparams);
    return 0;
}

static void dp_use_dist(void *self, const so_dist *d)
{
    ((dp_state *)self)->d = d;
}

static const so_rank_state *dp_rank_state(void *self)
{
    dp_state *s = self;
    return s->rs.bytes ? &s->rs : NULL; /* set at create: a named method's compressor with state, or auto */
}

static void dp_destroy(void *self)
{
    dp_state *s = self;
    so_compressor_destroy(s->cx);
    free(s);
}

static const so_strategy_ops dp_ops = {
    .name = "data-parallel",
    .start = dp_start,
    .backward_begin = dp_backward_begin,
    .grads_ready = dp_grads_ready,
    .grads_done = dp_grads_done,
    .update = dp_update,
    .step_done = dp_step_done,
    .finish = dp_finish,
    .grad_sqnorm = dp_grad_sqnorm,
    .use_dist = dp_use_dist,
    .rank_state = dp_rank_state,
    .destroy = dp_destroy,
};

int so_strategy_data_parallel(const so_dist *d, so_strategy **out)
{
    *out = NULL;
    if (!d)
        return so_err(SO_EINVAL, "data parallelism needs the so_dist hooks");
    so_strategy *st = calloc(1, sizeof *st);
    dp_state *s = calloc(1, sizeof *s);
    if (!st || !s) {
        free(st);
        free(s);
        return so_err(SO_ENOMEM, "out of memory");
    }
    s->d = d;
    *st = (so_strategy){.ops = &dp_ops, .self = s};
    *out = st;
    return 0;
}

/* One process: nothing to communicate; the loop's plain step. */
static int local_grads_done(void *self, double *exposed)
{
    (void)self;
    *exposed = 0;
    return 0;
}

static const so_strategy_ops local_ops = {.name = "local", .grads_done = local_grads_done};

/* --compress auto's checkpoint state (grad_compress_auto_state_bytes): the
 * chosen method's name, then its compressor's state; zeros before the
 * choice, which a resume then makes again. */
static void auto_state_get(void *ctx, void *dst)
{
    dp_state *s = ctx;
    memset(dst, 0, s->rs.bytes);
    if (!s->auto_picked)
        return;
    so_compress_format(&s->auto_pick, dst, GRAD_AUTO_NAME_BYTES);
    if (s->cx)
        so_compressor_state_get(s->cx, (char *)dst + GRAD_AUTO_NAME_BYTES);
}

/* A resume takes the checkpoint's choice and its compressor's state, so it
 * goes on as the run that chose (bitwise); a name it does not know (or no
 * memory) leaves the choice to be made again. */
static void auto_state_set(void *ctx, const void *src)
{
    dp_state *s = ctx;
    char name[GRAD_AUTO_NAME_BYTES];
    memcpy(name, src, sizeof name);
    name[sizeof name - 1] = '\0';
    so_compress_spec spec;
    so_compressor *x = NULL;
    if (!name[0] || grad_compress_auto_method(name, &spec) ||
        grad_compress_create(&spec, s->auto_ef, s->auto_seed, s->auto_model, &x))
        return;
    if (x && so_compressor_state_bytes(x) > s->rs.bytes - GRAD_AUTO_NAME_BYTES) {
        so_compressor_destroy(x);
        return;
    }
    if (x)
        so_compressor_state_set(x, (const char *)src + GRAD_AUTO_NAME_BYTES);
    so_compressor_destroy(s->cx);
    s->cx = x;
    s->auto_pick = spec;
    s->auto_picked = s->auto_resumed = 1;
}

/* auto's state is sized for every candidate and tagged as auto: a resume
 * under auto with the same error-feedback setting and ranks takes it. */
static int auto_rank_state(const so_strategy_config *c, const so_model *m, dp_state *s)
{
    s->auto_ef = c->error_feedback;
    s->auto_seed = c->compress_seed;
    s->auto_model = m;
    s->rs = (so_rank_state){.get = auto_state_get, .set = auto_state_set, .ctx = s};
    snprintf(s->rs.tag, sizeof s->rs.tag, "compress=auto,error_feedback=%s",
             c->error_feedback < 0 ? "default" : c->error_feedback ? "on" : "off");
    return grad_compress_auto_state_bytes(c->error_feedback, c->compress_seed, m, &s->rs.bytes);
}

/* --compress's compressor, made before the first step so a resume can put
 * its checkpointed residuals and Q's back (dp_rank_state). */
static int dp_compressor(const so_strategy_config *c, so_model *m, dp_state *s)
{
    if (c->compress.method == SO_COMPRESS_AUTO) /* chosen after a few steps (choose_compressor) */
        return auto_rank_state(c, m, s);
    int rc = grad_compress_create(&c->compress, c->error_feedback, c->compress_seed, m, &s->cx);
    if (!rc && s->cx)
        grad_compress_rank_state(s->cx, &c->compress, &s->rs);
    return rc;
}

/* "dp" by name: data parallelism over c->dist, or the local step without
 * one; either way with the whole model's optimizer. */
static int dp_create(const so_strategy_config *c, so_model *m, so_strategy **out)
{
    so_optim *opt = NULL;
    int rc = so_optim_create(&c->optim, m->nparams, &opt);
    if (!rc && c->dist && !(rc = so_strategy_data_parallel(c->dist, out))) {
        ((dp_state *)(*out)->self)->own_loop = 1;
        rc = dp_compressor(c, m, (*out)->self);
    }
    else if (!rc && !(*out = calloc(1, sizeof **out)))
        rc = so_err(SO_ENOMEM, "out of memory");
    else if (!rc)
        **out = (so_strategy){.ops = &local_ops};
    if (rc) {
        so_optim_destroy(opt);
        so_strategy_free(*out);
        *out = NULL;
        return rc;
    }
    (*out)->opt = opt;
    return 0;
}

const so_strategy_kind so_strategy_kind_dp = {"dp", "data parallelism: every rank holds the whole model, gradients "
                                                    "averaged in buckets during backward", 0, NULL, dp_create};
