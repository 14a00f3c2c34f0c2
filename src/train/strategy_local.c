/* Local SGD and DiLoCo (--sync local:H, diloco:H; docs/COMPRESSION.md,
 * "Relaxed consistency"): each rank steps its own optimizer on its own
 * gradient, and every H steps the ranks agree on one model with a single
 * allreduce of the parameters and batchnorm statistics.
 *   local:  the model becomes the ranks' average (Lin et al., PyTorch's
 *           PeriodicModelAverager); with --local-after S the first S steps
 *           are synchronous data parallelism (post-local SGD), run by the dp
 *           strategy itself, bit for bit.
 *   diloco: the average is the inner result; the outer step is Nesterov SGD
 *           on the anchor (the model at the last outer step) with the
 *           pseudo-gradient delta = anchor - average:
 *               u = mu u + delta;  anchor -= outer_lr (delta + mu u)
 *           and every rank starts the next round from the new anchor.
 * Optimizer state stays per rank (as PyTorch's post-local SGD and DiLoCo's
 * inner AdamW). Checkpoints save each rank's own model, optimizer state
 * and DiLoCo's anchor and outer momentum (sync_ckpt, sync_avg.h); the step
 * phase is the step itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/train.h"
#include "strategy_internal.h"
#include "sync_avg.h"

typedef struct {
    so_strategy *dp;        /* the synchronous steps before local_after, and the initial broadcast */
    so_group *g;
    so_model *m;
    so_train_result *r;
    int diloco;
    int period;             /* H: local steps between averages */
    long after;             /* steps of synchronous data parallelism first */
    float outer_lr, outer_momentum;
    float *anchor;          /* diloco: the model at the last outer step (nparams) */
    float *outer_velocity;  /* diloco: u, the outer step's momentum buffer (nparams) */
    float *scratch;         /* evaluation on the averaged model: this rank's own parameters and statistics */
    long done;              /* optimizer steps done */
    int same;               /* every rank holds the same model now */
    double bytes;           /* payload sent: gradients in the synchronous steps, models at averages */
    long rounds;            /* averages (outer steps) done */
    char spec[32];          /* the --sync text */
    sync_ckpt ckpt;         /* this rank's own model, optimizer and DiLoCo's buffers in checkpoints */
} local_state;

/* The step being computed is synchronous data parallelism. */
static int in_dp(const local_state *s) { return s->done < s->after; }

static int local_start(void *self, so_model *m, const so_train_config *c, so_train_result *r)
{
    local_state *s = self;
    s->m = m;
    s->r = r;
    s->done = c->start_step;
    int rc = sync_ckpt_check_resume(&s->ckpt, c->start_step, s->spec);
    if (rc)
        return rc;
    if (!(s->scratch = malloc((m->nparams + m->nbufs + 1) * sizeof *s->scratch)))
        return so_err(SO_ENOMEM, "out of memory for the averaged model");
    rc = s->dp->ops->start(s->dp->self, m, c, r); /* plans buckets, broadcasts rank 0's model unless resumed */
    if (s->ckpt.restored) /* each rank's own model, anchor and phase came back */
        return rc;
    if (s->anchor)
        memcpy(s->anchor, m->params, m->nparams * sizeof *s->anchor);
    s->same = 1;
    return rc;
}

static void local_backward_begin(void *self, int k, int K)
{
    local_state *s = self;
    if (in_dp(s))
        s->dp->ops->backward_begin(s->dp->self, k, K);
}

static int local_grads_ready(void *self, int node, size_t off, size_t n)
{
    local_state *s = self;
    return in_dp(s) ? s->dp->ops->grads_ready(s->dp->self, node, off, n) : 0;
}

static int local_grads_done(void *self, double *exposed)
{
    local_state *s = self;
    *exposed = 0;
    if (!in_dp(s))
        return 0;
    s->bytes += (double)s->m->nparams * sizeof(float);
    return s->dp->ops->grads_done(s->dp->self, exposed);
}

/* Each rank clips its own gradient: no communication (the dp phase's is the
 * average, the same on every rank). */
static int local_grad_sqnorm(void *self, double *sq)
{
    local_state *s = self;
    *sq = so_optim_sqnorm(s->m->grads, s->m->nparams);
    return 0;
}

/* The parameters and batchnorm statistics averaged over the ranks. */
static int average_models(local_state *s, double *bytes)
{
    sync_avg_set set = {0};
    sync_avg_add(&set, s->m->params, s->m->nparams);
    sync_avg_add(&set, s->m->bufs, s->m->nbufs);
    int rc = sync_avg_run(s->g, &set, SO_STRATEGY_TAG, bytes);
    so_model_params_changed(s->m);
    s->same = 1;
    return rc;
}

/* DiLoCo's outer step on the average now in m->params (the formula above). */
static void outer_step(local_state *s)
{
    float *p = s->m->params, *a = s->anchor, *u = s->outer_velocity;
    float lr = s->outer_lr, mu = s->outer_momentum;
    for (size_t i = 0; i < s->m->nparams; i++) {
        float delta = a[i] - p[i];
        u[i] = mu * u[i] + delta;
        a[i] -= lr * (delta + mu * u[i]);
        p[i] = a[i];
    }
    so_model_params_changed(s->m);
}

static int local_step_done(void *self, long step)
{
    local_state *s = self;
    int was_dp = in_dp(s), rc = 0;
    s->done = step;
    if (was_dp) {
        rc = s->dp->ops->step_done(s->dp->self, step);
        if (s->anchor && step == s->after) /* the rounds begin from the synchronous model */
            memcpy(s->anchor, s->m->params, s->m->nparams * sizeof *s->anchor);
        return rc;
    }
    s->same = 0;
    if ((step - s->after) % s->period)
        return 0;
    if ((rc = average_models(s, &s->bytes)))
        return rc;
    if (s->diloco)
        outer_step(s);
    s->rounds++;
    return 0;
}

static void local_finish(void *self)
{
    local_state *s = self;
    s->dp->ops->finish(s->dp->self);
    sync_report(s->r, s->bytes, s->rounds, s->period);
}

static int local_evaluate(void *self, so_loader *test, double sums[3])
{
    local_state *s = self;
    return sync_eval_averaged(s->g, s->m, s->scratch, test, sums, !s->same);
}

/* A caller reading the whole model (--dump-params, export) gets the
 * ranks' average when they differ. */
static int local_params_whole(void *self)
{
    local_state *s = self;
    return s->same ? 0 : average_models(s, NULL);
}

static const so_state_layout *local_state_layout(void *self) { return &((local_state *)self)->ckpt.layout; }
static const so_rank_state *local_rank_state(void *self) { return &((local_state *)self)->ckpt.rs; }

static void local_use_dist(void *self, const so_dist *d)
{
    local_state *s = self;
    s->dp->ops->use_dist(s->dp->self, d);
}

static void local_destroy(void *self)
{
    local_state *s = self;
    if (!s)
        return;
    so_strategy_free(s->dp);
    sync_ckpt_deinit(&s->ckpt);
    free(s->anchor);
    free(s->outer_velocity);
    free(s->scratch);
    free(s);
}

static const so_strategy_ops local_ops = {
    .name = "local-sgd",
    .start = local_start,
    .backward_begin = local_backward_begin,
    .grads_ready = local_grads_ready,
    .grads_done = local_grads_done,
    .step_done = local_step_done,
    .finish = local_finish,
    .evaluate = local_evaluate,
    .destroy = local_destroy,
    .grad_sqnorm = local_grad_sqnorm,
    .use_dist = local_use_dist,
    .params_whole = local_params_whole,
    .state = local_state_layout,
    .rank_state = local_rank_state,
};

static int create(const so_strategy_config *c, so_model *m, int diloco, so_strategy **out)
{
    char what[32];
    so_sync_format(&c->sync, what, sizeof what);
    int rc = sync_strategy_check(c, what);
    if (rc)
        return rc;
    if (c->local_after < 0)
        return so_err(SO_EINVAL, "--local-after %ld must be >= 0", c->local_after);
    so_strategy *st = calloc(1, sizeof *st);
    local_state *s = calloc(1, sizeof *s);
    if (!st || !s) {
        free(st);
        free(s);
        return so_err(SO_ENOMEM, "out of memory");
    }
    *s = (local_state){.g = c->group, .diloco = diloco, .period = c->sync.period, .after = c->local_after,
                       .outer_lr = c->outer_lr, .outer_momentum = c->outer_momentum, .same = 1};
    *st = (so_strategy){.ops = &local_ops, .self = s};
    snprintf(s->spec, sizeof s->spec, "%s", what);
    rc = so_strategy_data_parallel(c->dist, &s->dp);
    if (!rc)
        rc = so_optim_create(&c->optim, m->nparams, &st->opt);
    if (!rc && diloco && (!(s->anchor = malloc((m->nparams + 1) * sizeof *s->anchor)) ||
                          !(s->outer_velocity = calloc(m->nparams + 1, sizeof *s->outer_velocity))))
        rc = so_err(SO_ENOMEM, "out of memory for DiLoCo's anchor and outer momentum");
    if (!rc) {
        s->ckpt.extra[0] = s->anchor;
        s->ckpt.extra[1] = s->outer_velocity;
        s->ckpt.nextra = diloco ? 2 : 0;
        rc = sync_ckpt_init(&s->ckpt, c->group, m, st->opt, &s->same, what);
    }
    if (rc) {
        so_strategy_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

static int local_create(const so_strategy_config *c, so_model *m, so_strategy **out)
{
    return create(c, m, 0, out);
}

static int diloco_create(const so_strategy_config *c, so_model *m, so_strategy **out)
{
    return create(c, m, 1, out);
}

const so_strategy_kind so_strategy_kind_local = {"local", "local SGD: each rank steps alone, the models averaged "
                                                          "every H steps (--sync local:H)", 0, NULL, local_create};
const so_strategy_kind so_strategy_kind_diloco = {"diloco", "DiLoCo: H inner steps per rank, then an outer Nesterov "
                                                            "step on the averaged delta (--sync diloco:H)", 0, NULL,
                                                  diloco_create};
