/* Decentralised gossip, D-PSGD (--sync gossip:ring|torus; Lian et al. 2017;
 * docs/COMPRESSION.md, "Relaxed consistency"): each rank steps its own
 * optimizer on its own gradient, then averages its model (parameters and
 * batchnorm statistics) with its neighbours' with uniform weights:
 *     x_i <- (x_i + sum_{j in N(i)} x_j) / (|N(i)| + 1)
 * by point-to-point messages on the collective vocabulary (so_group isend /
 * irecv), no collective. Neighbours:
 *   ring:  i-1 and i+1 modulo the world (one neighbour with 2 ranks; with 3
 *          the graph is complete and a round is the exact average);
 *   torus: the ranks as a rows x cols grid, rows the largest divisor of the
 *          world with 3 <= rows <= cols: up, down, left and right with
 *          wrap-around, 4 distinct neighbours; other worlds are refused.
 * The ranks' models differ at every step: evaluation and --dump-params see
 * their average (one allreduce, not counted as the step's bytes), and
 * checkpoints save each rank's own model and optimizer state (sync_ckpt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/train.h"
#include "strategy_internal.h"
#include "sync_avg.h"

enum { MAX_NEIGHBOURS = 4, TAG_PARAMS = 0x5350, TAG_BUFS = 0x5351 };

typedef struct {
    so_group *g;
    so_model *m;
    so_train_result *r;
    int nbr[MAX_NEIGHBOURS], nnbr; /* distinct neighbours' group ranks */
    float *inbox;                  /* nnbr x (nparams + nbufs): the neighbours' models */
    float *scratch;                /* evaluation on the average: this rank's own model */
    int same;                      /* every rank holds the same model (after the broadcast, before a step) */
    double bytes;                  /* payload of the messages this rank sent */
    long rounds;
    char spec[32];                 /* the --sync text */
    sync_ckpt ckpt;                /* this rank's own model and optimizer state in checkpoints */
} gossip_state;

static void add_neighbour(gossip_state *s, int rank, int self)
{
    if (rank == self)
        return;
    for (int k = 0; k < s->nnbr; k++)
        if (s->nbr[k] == rank)
            return;
    s->nbr[s->nnbr++] = rank;
}

/* rows x cols = world with 3 <= rows <= cols, rows as large as possible; 0 if none. */
static int torus_rows(int world)
{
    int best = 0;
    for (int r = 3; r * r <= world; r++)
        if (world % r == 0)
            best = r;
    return best;
}

static int neighbours(gossip_state *s, so_gossip_topology t, int rank, int world)
{
    if (t == SO_GOSSIP_RING) {
        add_neighbour(s, (rank + world - 1) % world, rank);
        add_neighbour(s, (rank + 1) % world, rank);
        return 0;
    }
    int rows = torus_rows(world);
    if (!rows)
        return so_err(SO_EINVAL, "--sync gossip:torus needs the ranks as a rows x cols grid with rows, cols >= 3 "
                      "(9, 12, 15, 16, ... ranks), not %d: use gossip:ring", world);
    int cols = world / rows, row = rank / cols, col = rank % cols;
    add_neighbour(s, ((row + rows - 1) % rows) * cols + col, rank);
    add_neighbour(s, ((row + 1) % rows) * cols + col, rank);
    add_neighbour(s, row * cols + (col + cols - 1) % cols, rank);
    add_neighbour(s, row * cols + (col + 1) % cols, rank);
    return 0;
}

static int gossip_start(void *self, so_model *m, const so_train_config *c, so_train_result *r)
{
    gossip_state *s = self;
    s->m = m;
    s->r = r;
    int rc = sync_ckpt_check_resume(&s->ckpt, c->start_step, s->spec);
    if (rc)
        return rc;
    size_t n = m->nparams + m->nbufs;
    s->inbox = malloc(((size_t)s->nnbr * n + 1) * sizeof *s->inbox);
    s->scratch = malloc((n + 1) * sizeof *s->scratch);
    if (!s->inbox || !s->scratch)
        return so_err(SO_ENOMEM, "out of memory for the gossip neighbours' models");
    if (c->no_initial_bcast)
        return 0;
    so_handle *h[2];
    rc = so_group_ibcast(s->g, m->params, m->nparams, SO_DTYPE_F32, 0, NULL, &h[0]);
    if (!rc)
        rc = so_group_wait(s->g, h[0]);
    if (!rc && m->nbufs && !(rc = so_group_ibcast(s->g, m->bufs, m->nbufs, SO_DTYPE_F32, 0, NULL, &h[1])))
        rc = so_group_wait(s->g, h[1]);
    so_model_params_changed(m);
    return rc;
}

/* Own gradients only: nothing to wait for. */
static int gossip_grads_done(void *self, double *exposed)
{
    (void)self;
    *exposed = 0;
    return 0;
}

static int gossip_grad_sqnorm(void *self, double *sq)
{
    gossip_state *s = self;
    *sq = so_optim_sqnorm(s->m->grads, s->m->nparams);
    return 0;
}

/* Posts this rank's messages: receives of each neighbour's parameters and
 * statistics into the inbox, sends of its own. h gets 4 handles per neighbour. */
static int post_round(gossip_state *s, so_handle **h, int *posted)
{
    so_model *m = s->m;
    size_t n = m->nparams + m->nbufs;
    int rc = 0;
    for (int k = 0; !rc && k < s->nnbr; k++) {
        float *in = s->inbox + (size_t)k * n;
        int peer = s->nbr[k];
        if (!(rc = so_group_irecv(s->g, in, m->nparams, SO_DTYPE_F32, peer, TAG_PARAMS, &h[*posted])))
            ++*posted;
        if (!rc && m->nbufs && !(rc = so_group_irecv(s->g, in + m->nparams, m->nbufs, SO_DTYPE_F32, peer, TAG_BUFS,
                                                      &h[*posted])))
            ++*posted;
        if (!rc && !(rc = so_group_isend(s->g, m->params, m->nparams, SO_DTYPE_F32, peer, TAG_PARAMS, &h[*posted])))
            ++*posted;
        if (!rc && m->nbufs && !(rc = so_group_isend(s->g, m->bufs, m->nbufs, SO_DTYPE_F32, peer, TAG_BUFS,
                                                      &h[*posted])))
            ++*posted;
        if (!rc)
            s->bytes += (double)n * sizeof(float);
    }
    return rc;
}

/* x <- (x + sum of the neighbours' x) / (nnbr + 1), over one buffer of the model. */
static void mix(gossip_state *s, float *x, size_t count, size_t at)
{
    size_t n = s->m->nparams + s->m->nbufs;
    float w = 1.0f / (float)(s->nnbr + 1);
    for (size_t i = 0; i < count; i++) {
        float sum = x[i];
        for (int k = 0; k < s->nnbr; k++)
            sum += s->inbox[(size_t)k * n + at + i];
        x[i] = sum * w;
    }
}

/* One gossip round after every step. */
static int gossip_step_done(void *self, long step)
{
    gossip_state *s = self;
    (void)step;
    so_handle *h[4 * MAX_NEIGHBOURS];
    int posted = 0, rc = post_round(s, h, &posted);
    for (int i = 0; i < posted; i++) { /* every handle back, even after a failure */
        int w = so_group_wait(s->g, h[i]);
        rc = rc ? rc : w;
    }
    if (rc)
        return rc;
    mix(s, s->m->params, s->m->nparams, 0);
    if (s->m->nbufs)
        mix(s, s->m->bufs, s->m->nbufs, s->m->nparams);
    so_model_params_changed(s->m);
    s->same = 0;
    s->rounds++;
    return 0;
}

static void gossip_finish(void *self)
{
    gossip_state *s = self;
    sync_report(s->r, s->bytes, s->rounds, 1);
}

static int gossip_evaluate(void *self, so_loader *test, double sums[3])
{
    gossip_state *s = self;
    return sync_eval_averaged(s->g, s->m, s->scratch, test, sums, !s->same);
}

static int gossip_params_whole(void *self)
{
    gossip_state *s = self;
    if (s->same)
        return 0;
    sync_avg_set set = {0};
    sync_avg_add(&set, s->m->params, s->m->nparams);
    sync_avg_add(&set, s->m->bufs, s->m->nbufs);
    int rc = sync_avg_run(s->g, &set, SO_STRATEGY_TAG, NULL);
    so_model_params_changed(s->m);
    s->same = 1;
    return rc;
}

static const so_state_layout *gossip_state_layout(void *self) { return &((gossip_state *)self)->ckpt.layout; }
static const so_rank_state *gossip_rank_state(void *self) { return &((gossip_state *)self)->ckpt.rs; }

static void gossip_destroy(void *self)
{
    gossip_state *s = self;
    if (!s)
        return;
    sync_ckpt_deinit(&s->ckpt);
    free(s->inbox);
    free(s->scratch);
    free(s);
}

static const so_strategy_ops gossip_ops = {
    .name = "gossip",
    .start = gossip_start,
    .grads_done = gossip_grads_done,
    .step_done = gossip_step_done,
    .finish = gossip_finish,
    .evaluate = gossip_evaluate,
    .destroy = gossip_destroy,
    .grad_sqnorm = gossip_grad_sqnorm,
    .params_whole = gossip_params_whole,
    .state = gossip_state_layout,
    .rank_state = gossip_rank_state,
};

static int gossip_create(const so_strategy_config *c, so_model *m, so_strategy **out)
{
    char what[32];
    so_sync_format(&c->sync, what, sizeof what);
    int rc = sync_strategy_check(c, what);
    if (rc)
        return rc;
    so_strategy *st = calloc(1, sizeof *st);
    gossip_state *s = calloc(1, sizeof *s);
    if (!st || !s) {
        free(st);
        free(s);
        return so_err(SO_ENOMEM, "out of memory");
    }
    *s = (gossip_state){.g = c->group, .same = 1};
    *st = (so_strategy){.ops = &gossip_ops, .self = s};
    snprintf(s->spec, sizeof s->spec, "%s", what);
    rc = neighbours(s, c->sync.topology, c->group->rank, c->group->size);
    if (!rc)
        rc = so_optim_create(&c->optim, m->nparams, &st->opt);
    if (!rc)
        rc = sync_ckpt_init(&s->ckpt, c->group, m, st->opt, &s->same, what);
    if (rc) {
        so_strategy_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

const so_strategy_kind so_strategy_kind_gossip = {"gossip", "D-PSGD: after each local step, average the model with "
                                                            "the ring's or torus's neighbours (--sync gossip:T)", 0,
                                                  NULL, gossip_create};
