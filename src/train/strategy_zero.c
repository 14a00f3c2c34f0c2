/* Sharded data parallelism (ZeRO stages 1-3, FSDP's FULL_SHARD and
 * HYBRID_SHARD) as strategies (scaleout/strategy.h, docs/PARALLELISM.md).
 *
 * The flat buffers are cut into units of consecutive layers (shard.h); rank
 * k of the shard group keeps block k of every unit: the optimizer state of
 * those elements (all stages), their gradients (zero2, zero3) and their
 * parameters (zero3). Per step, in the order every rank follows:
 *   backward     as backward closes unit u, its gradients are reduce-scattered
 *                over the shard group (with HYBRID_SHARD the block is then
 *                averaged over the replicas of the other nodes, a continuation
 *                run by the communication thread); zero2/3 keep only their
 *                block and give the unit's pages back;
 *   update       the optimizer over this rank's blocks (so_optim_step_ranges);
 *   next forward zero1/2: every unit's parameters are allgathered, unit u
 *                waited for just before its first layer runs; zero3: unit u is
 *                gathered before its forward and again before its backward,
 *                the next units prefetched, at most `prefetch` gathered at
 *                once, and freed after use.
 * Nothing is outstanding between steps, so the blocking reductions of the
 * loop and of the observers (checkpoints) never meet a collective of ours. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "scaleout/group.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"
#include "scaleout/train.h"
#include "shard.h"
#include "strategy_internal.h"

typedef struct zero_state zero_state;

/* The reduce-scatter of one unit and what follows it (its continuations'
 * argument: the unit stays the same while its handle is outstanding). */
typedef struct {
    zero_state *s;
    int u;
} unit_job;

struct zero_state {
    int stage;                   /* 1, 2 or 3 */
    so_model *m;
    const so_train_config *c;
    so_train_result *r;
    const so_dist *d;            /* bcast of the initial state */
    so_group *group, *shard_grp, *cross; /* every rank; the shard group (it or the node); replicas (HYBRID) */
    shard_layout L;
    so_optim *opt;
    float *pshard, *gshard;      /* zero3's parameter blocks, zero2/3's gradient blocks (compact) */
    unit_job *jobs;              /* per unit */
    so_handle **rs, **ag;        /* per unit: reduce-scatter chain, allgather in flight */
    char *resident;              /* zero3: the unit's parameters are mapped (gathered or being gathered) */
    char *fresh;                 /* the unit was gathered: its layers must re-read their weights */
    char *want;                  /* zero3_window's scratch: the units of the window */
    int *flight;                 /* zero2/3: units whose reduce-scatter is in flight, oldest first */
    int nflight;
    int live;                    /* reduce-scatter from inside this backward */
    int micro;                   /* micro-batch of the current backward */
    int stale;                   /* zero1/2: the update changed this rank's blocks only: gather before forward */
    int cur_pos, cur_dir;        /* the place in the read order (L.seq) the last hook saw, its direction (0 fwd, 1 bwd) */
    int prefetch;                /* zero3: units gathered at once, at most */
    int accumulate;              /* micro-batches per step (memory: see zero_backward_begin) */
    shard_units units;           /* how the units were made */
    int auto_units;              /* --bucket-mb auto: from measured backward times */
    double measured, predicted;  /* its backward seconds and the plan's simulated end */
    int err;                     /* a continuation's error, reported at the next wait */
    int in_pass;                 /* inside a node hook of a forward (1) or backward (2) */
    double fwd_waited;           /* seconds the current forward pass waited for gathers */
    float *slots[2];             /* zero2/3: the two buffers backward writes the placed units' gradients in */
    int slots_shared;            /* ... in memory the node's peers read in place (shared_alloc) */
    signed char *slot_of;        /* per unit: its slot (0, 1), or SHARD_SLOT_TIED: in m->grads (shard_slots) */
    float *pslot[SHARD_MAX_PSLOTS]; /* zero3: the gathered units' parameter slots (shard_param_slots) */
    size_t pslot_len[SHARD_MAX_PSLOTS];
    int pslot_unit[SHARD_MAX_PSLOTS]; /* the unit in the slot, -1: free */
    int npslots;
    int tied_slot;               /* the slot kept for tied tables (the largest), -1: none */
    int *pslot_of;               /* zero3, per unit: the slot its gathered parameters are in, -1: the whole buffer */
    int gather_whole;            /* gather into the whole buffer (zero_params_whole: dumps and exports read it) */
    int whole_unrounded;         /* --shard-gather bf16|fp16: units left gathered in FP32 by zero_params_whole */
    so_state_layout state;
    so_dtype grad_wire;          /* --compress fp16|bf16: the gradients' reduce-scatter on that 16-bit wire; else F32 */
    so_dtype param_wire;         /* zero3, --shard-gather bf16|fp16: the parameters' allgathers on that wire; else F32 */
    double grad_bytes_sent;      /* this rank's bytes put into its gradient reduce-scatters (and HYBRID's allreduces) */
    double grad_bytes_dense;     /* the same on the FP32 wire */
    double gather_bytes;         /* the parameters' allgathers: the units' bytes on their wire (zero_params_whole's not) */
};

/* ---- the communication of a unit -------------------------------------------------- */

/* Waits for a handle. Inside a backward (a node hook) the wait is exposed
 * communication: it moves from backward's time to comm_exposed. Inside a
 * forward it is tallied, and moved so once backward_begin says the forward
 * was a training step's (an evaluation's forward is no step's). */
static int wait_handle(zero_state *s, so_handle **h)
{
    if (!*h)
        return 0;
    double t0 = s->in_pass && s->r ? so_now() : 0;
    int rc = so_group_wait(s->group, *h);
    *h = NULL;
    if (t0 > 0 && s->in_pass == 1) {
        s->fwd_waited += so_now() - t0;
    } else if (t0 > 0) {
        double w = so_now() - t0;
        s->r->backward -= w;
        s->r->comm_exposed += w;
    }
    return rc ? rc : s->err;
}

/* Where backward wrote unit u's gradients: its slot, or the whole buffer
 * (the model's placement, set between steps only). */
static float *unit_grads(zero_state *s, int u) { return so_model_grads_at(s->m, s->L.lo[u]); }

/* This rank's block of unit u's gradients, where backward wrote them. */
static float *unit_block(zero_state *s, int u) { return unit_grads(s, u) + (s->L.mine_off[u] - s->L.lo[u]); }

/* n gradient elements put into a collective (the --json compress_bytes_*). */
static void count_grad_bytes(zero_state *s, size_t n)
{
    s->grad_bytes_sent += (double)n * (double)so_dtype_size(s->grad_wire);
    s->grad_bytes_dense += (double)n * sizeof(float);
}

/* HYBRID_SHARD: the node's sum of this block, summed over the nodes. */
static int cross_sum(void *arg, int status, so_handle **follow)
{
    unit_job *j = arg;
    zero_state *s = j->s;
    size_t n = s->L.mine_len[j->u];
    float *g = unit_block(s, j->u);
    if (status)
        return status;
    so_group_opts o = {s->grad_wire, SO_STRATEGY_TAG + j->u};
    return so_group_iallreduce(s->cross, g, g, n, SO_DTYPE_F32, SO_REDUCE_SUM, &o, follow);
}

/* On the communication thread once the block is reduced: HYBRID_SHARD's sum
 * over every rank becomes the average (times 1/world, as an AVG collective
 * scales: node sums first, then across nodes, is the order hier's allreduce
 * adds in); zero2/3 keep the block in the shard and give the unit's pages back. */
static int finish_block(void *arg, int status, so_handle **follow)
{
    unit_job *j = arg;
    zero_state *s = j->s;
    const shard_layout *L = &s->L;
    (void)follow;
    if (status)
        return s->err = status;
    float *g = unit_block(s, j->u);
    if (s->cross)
        so_optim_scale(g, L->mine_len[j->u], 1.0f / (float)(L->shards * s->cross->size));
    if (s->stage > 1) {
        memcpy(s->gshard + L->cbase[j->u], g, L->mine_len[j->u] * sizeof(float));
        if (!s->slot_of)
            shard_release(s->m->grads, L->lo[j->u], L->lo[j->u + 1]);
    }
    return 0;
}

/* Starts the reduce-scatter of unit u's gradients (in place: this rank's
 * block lands at its own offset) and its continuations. Without a group
 * (one process) the block is already the average. */
static int reduce_unit(zero_state *s, int u)
{
    const shard_layout *L = &s->L;
    unit_job *j = &s->jobs[u];
    *j = (unit_job){s, u};
    if (!s->shard_grp && !s->cross)
        return s->stage > 1 ? finish_block(j, 0, NULL) : 0;
    float *g = unit_grads(s, u);
    so_handle *h = NULL;
    so_group_opts o = {s->grad_wire, SO_STRATEGY_TAG + u};
    int rc = 0;
    if (s->shard_grp) /* counted here, on the training thread: cross_sum may run on the communication thread */
        count_grad_bytes(s, L->lo[u + 1] - L->lo[u]);
    if (s->cross)
        count_grad_bytes(s, L->mine_len[u]);
    if (s->shard_grp)
        rc = so_group_ireduce_scatter(s->shard_grp, g, unit_block(s, u), L->lo[u + 1] - L->lo[u],
                                      L->counts + (size_t)u * L->shards, SO_DTYPE_F32,
                                      s->cross ? SO_REDUCE_SUM : SO_REDUCE_AVG, &o, &h);
    else /* one rank per node: the whole unit is the block */
        rc = cross_sum(j, 0, &h);
    if (!rc && s->cross && s->shard_grp)
        rc = so_group_then(s->group, h, cross_sum, j, &h);
    if (!rc && (s->cross || s->stage > 1))
        rc = so_group_then(s->group, h, finish_block, j, &h);
    s->rs[u] = h;
    if (!rc && s->stage > 1)
        s->flight[s->nflight++] = u;
    return rc;
}

/* zero2/3: the oldest reduce-scatters in flight until at most `keep` remain
 * (units already waited for leave the list first). */
static int drain(zero_state *s, int keep)
{
    int rc = 0, n = 0;
    for (int i = 0; i < s->nflight; i++)
        if (s->rs[s->flight[i]])
            s->flight[n++] = s->flight[i];
    s->nflight = n;
    while (!rc && s->nflight > keep) {
        rc = wait_handle(s, &s->rs[s->flight[0]]);
        memmove(s->flight, s->flight + 1, (size_t)--s->nflight * sizeof *s->flight);
    }
    return rc;
}

/* zero3: where unit u's gathered parameters go: the smallest free slot
 * that holds it, placed for the model (a tied table: the slot of its own,
 * which its three gathers a step reuse); else (no free slot, or
 * gather_whole) its pages of the whole buffer, mapped. */
static int place_gathered(zero_state *s, int u)
{
    const shard_layout *L = &s->L;
    size_t n = L->lo[u + 1] - L->lo[u];
    int best = -1;
    int whole = s->gather_whole, tied = shard_unit_tied(L, u);
    for (int k = 0; !whole && k < s->npslots; k++)
        if ((k == s->tied_slot) == tied && s->pslot_unit[k] < 0 && s->pslot_len[k] >= n &&
            (best < 0 || s->pslot_len[k] < s->pslot_len[best]))
            best = k;
    if (best < 0) {
        shard_commit(s->m->params, L->lo[u], L->lo[u + 1]);
        return 0;
    }
    int rc = so_model_place_params(s->m, L->lo[u], L->lo[u + 1], s->pslot[best]);
    if (!rc) {
        s->pslot_unit[best] = u;
        s->pslot_of[u] = best;
    }
    return rc;
}

/* Starts gathering unit u's parameters: from the whole buffer's own blocks
 * into the buffer (zero1/2, in place) or from the compact shard (zero3) into
 * a slot or the unit's pages of the buffer (place_gathered). */
static int gather_unit(zero_state *s, int u)
{
    const shard_layout *L = &s->L;
    float *p = s->m->params;
    const float *mine = s->stage == 3 ? s->pshard + L->cbase[u] : p + L->mine_off[u];
    if (s->stage == 3) {
        int rc = place_gathered(s, u);
        if (rc)
            return rc;
        s->resident[u] = 1;
    }
    float *dst = so_model_params_at(s->m, L->lo[u]);
    /* forward and backward compute with --shard-gather's rounding; dumps and exports read the FP32 shard */
    so_dtype wire = s->stage == 3 && !s->gather_whole ? s->param_wire : SO_DTYPE_F32;
    s->fresh[u] = 1;
    if (!s->shard_grp) {
        if (s->stage == 3) { /* what a gather on the wire would deliver */
            memcpy(dst, mine, L->mine_len[u] * sizeof *p);
            so_round_to(wire, dst, L->mine_len[u]);
        }
        return 0;
    }
    so_group_opts o = {wire, SO_STRATEGY_TAG + u};
    if (!s->gather_whole)
        s->gather_bytes += (double)(L->lo[u + 1] - L->lo[u]) * (double)so_dtype_size(wire);
    return so_group_iallgather(s->shard_grp, mine, dst, L->lo[u + 1] - L->lo[u], L->counts + (size_t)u * L->shards,
                               SO_DTYPE_F32, &o, &s->ag[u]);
}

/* Waits for unit u's gather; after a gather its layers re-read their
 * weights, and so do the layers elsewhere that tie theirs to its tables. */
static int gathered(zero_state *s, int u)
{
    int rc = wait_handle(s, &s->ag[u]);
    if (!s->fresh[u])
        return rc;
    so_model_params_changed_nodes(s->m, s->L.node_lo[u], s->L.node_hi[u]);
    for (int i = 1; i < so_graph_size(s->m->g); i++)
        if (s->L.unit_of[i] != u && s->L.use_lo[i] >= 0 && s->L.seq[s->L.use_lo[i]] == u)
            so_model_params_changed_nodes(s->m, i, i + 1);
    s->fresh[u] = 0;
    return rc;
}

/* zero3: unit u's parameters are no longer needed here. */
static int free_unit(zero_state *s, int u)
{
    int rc = wait_handle(s, &s->ag[u]), k = s->pslot_of ? s->pslot_of[u] : -1;
    if (k >= 0) { /* the slot is free; the whole buffer's pages were never mapped */
        so_model_place_params(s->m, s->L.lo[u], s->L.lo[u + 1], NULL);
        s->pslot_unit[k] = -1;
        s->pslot_of[u] = -1;
    } else {
        shard_release(s->m->params, s->L.lo[u], s->L.lo[u + 1]);
    }
    s->resident[u] = 0;
    return rc;
}

/* ---- the model's per-node hooks ----------------------------------------------------- */

/* zero3: a layer reading the units at places [a, b] of the read order
 * (L.seq; one place, or two for a tied layer with its own bias) is about to
 * run in direction dir (0 forward, 1 backward). The pass reads next the
 * places [a, a + K) forward, (b - K, b] backward (K = prefetch, widened to
 * [a, b]): every resident unit outside them is freed first, so at most
 * max(K, b - a + 1) units are ever mapped; then the layer's units are
 * waited for and the rest of the window prefetched in the pass's order. A
 * tied table's unit is read at two places, so it is gathered for each use
 * (GPT-2's token table: by the embedding, again by the LM head at the end
 * of forward, kept for the LM head's backward if still in the window). */
static int zero3_window(zero_state *s, int a, int b, int dir)
{
    const shard_layout *L = &s->L;
    int K = s->prefetch, rc = 0;
    int lo = dir ? (b - K + 1 < a ? b - K + 1 : a) : a, hi = dir ? b : (a + K - 1 > b ? a + K - 1 : b);
    lo = lo < 0 ? 0 : lo;
    hi = hi >= L->nseq ? L->nseq - 1 : hi;
    memset(s->want, 0, (size_t)L->nunits);
    for (int p = lo; p <= hi; p++)
        s->want[L->seq[p]] = 1;
    for (int v = 0; !rc && v < L->nunits; v++)
        if (s->resident[v] && !s->want[v])
            rc = free_unit(s, v);
    for (int p = a; !rc && p <= b; p++)
        if (!s->resident[L->seq[p]])
            rc = gather_unit(s, L->seq[p]);
    for (int p = a; !rc && p <= b; p++)
        rc = gathered(s, L->seq[p]);
    for (int p = dir ? a - 1 : b + 1; !rc && p >= lo && p <= hi; p += dir ? -1 : 1)
        if (!s->resident[L->seq[p]])
            rc = gather_unit(s, L->seq[p]);
    return rc;
}

static int forward_places(zero_state *s, int a, int b);

static int forward_begin(void *arg, int node)
{
    zero_state *s = arg;
    int a = s->L.use_lo[node];
    if (a < 0)
        return 0;
    if (node == s->L.node_lo[0]) /* a pass begins */
        s->fwd_waited = 0;
    for (int u = 0; s->whole_unrounded && u < s->L.nunits; u++) { /* compute on the gather's rounding only */
        int rc = s->resident[u] ? free_unit(s, u) : 0;
        if (rc)
            return rc;
    }
    s->whole_unrounded = 0;
    if (s->L.chunks[node] > 1) /* chunk by chunk: chunk_begin */
        return 0;
    s->in_pass = 1;
    int rc = forward_places(s, a, s->L.use_hi[node]);
    s->in_pass = 0;
    return rc;
}

/* Before a layer reading the units at places [a, b] of the read order runs forward. */
static int forward_places(zero_state *s, int a, int b)
{
    if (s->stage == 3) {
        if (a == s->cur_pos && s->cur_dir == 0)
            return 0;
        s->cur_pos = a;
        s->cur_dir = 0;
        return zero3_window(s, a, b, 0);
    }
    int rc = 0;
    if (s->stale) { /* every unit's gather, in the same order on every rank */
        s->stale = 0;
        for (int v = 0; !rc && v < s->L.nunits; v++)
            rc = gather_unit(s, v);
    }
    for (int p = a; !rc && p <= b; p++)
        rc = gathered(s, s->L.seq[p]);
    return rc;
}

/* Before a layer's backward writes the gradients of the units it reads
 * (its own; a tied layer's also go into the table's unit, whose gradient
 * then sums both uses in place and is reduced once, after the owner's
 * backward): their previous reduce-scatter (an earlier micro-batch) must be
 * done, and zero2/3 keep at most one other unit's gradients in flight
 * (double buffering); zero3 gathers the units. */
static int backward_places(zero_state *s, int a, int b);

static int backward_begin(void *arg, int node)
{
    zero_state *s = arg;
    int a = s->L.use_lo[node];
    return a < 0 || s->L.chunks[node] > 1 ? 0 : backward_places(s, a, s->L.use_hi[node]);
}

/* A layer computed in row chunks reads one chunk's unit at a time: the
 * places of the read order its chunks take, in the pass's direction. */
static int chunk_begin(void *arg, int node, int k, int backward)
{
    zero_state *s = arg;
    int a = s->L.use_lo[node] + k, rc;
    if (backward)
        return backward_places(s, a, a);
    s->in_pass = 1;
    rc = forward_places(s, a, a);
    s->in_pass = 0;
    return rc;
}

/* Before a layer's backward writes the units at places [a, b] (above). */
static int backward_places(zero_state *s, int a, int b)
{
    int rc = 0;
    if (b == s->cur_pos && s->cur_dir == 1)
        return 0;
    s->cur_pos = b;
    s->cur_dir = 1;
    s->in_pass = 2;
    for (int p = a; !rc && p <= b; p++) {
        int u = s->L.seq[p];
        rc = wait_handle(s, &s->rs[u]);
        if (!rc && s->stage > 1 && s->live)
            rc = drain(s, 1);
        if (!rc && s->stage > 1 && s->micro == 0 && (!s->slot_of || s->slot_of[u] < 0))
            shard_commit(s->m->grads, s->L.lo[u], s->L.lo[u + 1]);
    }
    if (!rc && s->stage == 3)
        rc = zero3_window(s, a, b, 1);
    s->in_pass = 0;
    return rc;
}

/* ---- zero3's initial values ----------------------------------------------------------------- */

/* zero3 never holds the whole model: create copies this rank's blocks of
 * the initial values into the shard and gives the whole buffer's pages
 * back before the optimizer state is allocated (with both, a rank's peak
 * was the whole model above its accounting: VGG-16, 553 MB). The values
 * are whatever the buffer held at create: the model's init, or the weights
 * the caller loaded before making the strategy (--init-from, parts.c);
 * writes into the buffer after create do not reach the shard. */
static void zero3_take_initial(zero_state *s)
{
    const shard_layout *L = &s->L;
    for (int u = 0; u < L->nunits; u++)
        memcpy(s->pshard + L->cbase[u], s->m->params + L->mine_off[u], L->mine_len[u] * sizeof(float));
    shard_release(s->m->params, 0, s->m->nparams);
}

/* At start (not a resume), with HYBRID_SHARD: the replicas across nodes
 * take the first one's blocks. Within the shard group every element has
 * one owner, so no broadcast of the whole model is needed for the ranks to
 * agree. */
static int zero3_initial(zero_state *s)
{
    if (!s->cross || !s->L.nmine)
        return 0;
    so_handle *h = NULL;
    so_group_opts o = {SO_DTYPE_F32, SO_STRATEGY_TAG};
    int rc = so_group_ibcast(s->cross, s->pshard, s->L.nmine, SO_DTYPE_F32, 0, &o, &h);
    return rc ? rc : wait_handle(s, &h);
}

/* ---- the gradient slots of zero2/3 ---------------------------------------------------- */

/* Memory the peers of this node read in place (so_dist.buf_alloc): the
 * send buffers of zero2/3's reduce-scatters (the gradient slots) and of
 * zero3's allgathers (the parameter shard), so hier's reduce-scatter and
 * allgather on one node take no copies through its window (VGG-16 at np 2:
 * fc6's chunks gathered and reduced through the window were most of
 * zero3's exposed communication). Collective: every rank allocates and
 * frees these in the same order, with nothing in flight. Plain memory
 * without a dist (a fake, one process): the same layout, the copy path. */
static void *shared_alloc(zero_state *s, size_t bytes)
{
    return s->d && s->d->buf_alloc ? s->d->buf_alloc(s->d->ctx, bytes) : so_alloc(bytes);
}

static void shared_free(zero_state *s, void *p)
{
    if (s->d && s->d->buf_alloc && s->d->buf_free)
        s->d->buf_free(s->d->ctx, p);
    else
        so_free(p);
}

/* The two slots, once: in shared memory at the start of training (nothing
 * in flight yet; their lengths are the same on every rank), else in plain
 * memory when backward first places them. */
static int alloc_slots(zero_state *s, int shared)
{
    if (s->slots[0] || s->slots[1])
        return 0;
    size_t len[2];
    signed char *slot_of = malloc((size_t)s->L.nunits);
    if (!slot_of)
        return so_err(SO_ENOMEM, "out of memory for the gradient slots");
    shard_slots(&s->L, slot_of, len);
    free(slot_of);
    s->slots_shared = shared;
    for (int i = 0; i < 2; i++)
        if (len[i] && !(s->slots[i] = shared ? shared_alloc(s, len[i] * sizeof(float)) : so_alloc(len[i] * sizeof(float))))
            return so_err(SO_ENOMEM, "out of memory for a gradient slot of %zu floats", len[i]);
    return 0;
}

static void free_slots(zero_state *s)
{
    for (int i = 0; i < 2; i++) {
        if (s->slots_shared)
            shared_free(s, s->slots[i]);
        else
            so_free(s->slots[i]);
        s->slots[i] = NULL;
    }
}

static void unplace_slots(zero_state *s);

/* zero2/3 with overlap and one micro-batch a step: the units backward
 * writes once alternate between two slots (shard_slots), in the order their
 * reduce-scatters start.
 * Before a unit's backward writes, every reduce-scatter but the latest is
 * done (backward_places' drain), so the unit two before it has left its
 * slot. The slots are mapped once: a unit's pages are not given back and
 * faulted in again every step, which costs a page fault per 4 KiB, and
 * where the kernel runs under a hypervisor that shadows page tables, the
 * next reads of other memory slow down as well (docs/PARALLELISM.md). */
static int place_slots(zero_state *s)
{
    const shard_layout *L = &s->L;
    size_t len[2];
    if (!(s->slot_of = malloc((size_t)L->nunits)))
        return so_err(SO_ENOMEM, "out of memory for the gradient slots");
    shard_slots(L, s->slot_of, len);
    int rc = alloc_slots(s, 0); /* done at the start of training, unless it began without slots */
    for (int u = 0; !rc && u < L->nunits; u++)
        if (s->slot_of[u] >= 0)
            rc = so_model_place_grads(s->m, L->lo[u], L->lo[u + 1], s->slots[s->slot_of[u]]);
    if (rc)
        unplace_slots(s); /* every unit back in the whole buffer, as before */
    return rc;
}

/* The model writes every gradient into m->grads again. */
static void unplace_slots(zero_state *s)
{
    for (int u = 0; s->slot_of && u < s->L.nunits; u++)
        if (s->slot_of[u] >= 0)
            so_model_place_grads(s->m, s->L.lo[u], s->L.lo[u + 1], NULL);
    free(s->slot_of);
    s->slot_of = NULL;
}

/* ---- the strategy ------------------------------------------------------------------------ */

static int zero_start(void *self, so_model *m, const so_train_config *c, so_train_result *r)
{
    zero_state *s = self;
    s->c = c;
    s->r = r;
    r->nbuckets = s->L.nunits;
    if (s->units.kind == SHARD_UNIT_BUCKETS) {
        r->first_bucket_bytes = s->units.first_bytes;
        r->bucket_bytes = s->units.bytes;
    }
    r->measured_backward = s->measured;
    r->predicted_comm_end = s->predicted;
    so_node_hooks h = {forward_begin, backward_begin, s, chunk_begin};
    so_model_set_node_hooks(m, &h);
    s->cur_pos = -1;
    int rc = 0;
    if (!c->no_initial_bcast && s->stage == 3)
        rc = zero3_initial(s);
    else if (!c->no_initial_bcast && s->d) /* rank 0's initial state, as data parallelism starts */
        rc = s->d->bcast(s->d->ctx, m->params, m->nparams);
    if (!rc && !c->no_initial_bcast && s->d && m->nbufs)
        rc = s->d->bcast(s->d->ctx, m->bufs, m->nbufs);
    if (s->stage == 3) /* the parameters live in the shard from here */
        shard_release(m->params, 0, m->nparams);
    so_model_params_changed(m);
    if (!rc && s->stage > 1 && c->overlap && s->accumulate == 1) /* zero_backward_begin places them */
        rc = alloc_slots(s, 1);
    return rc;
}

/* Micro-batches are summed where backward writes them, as data parallelism
 * sums them, and only the last one's backward reduces: the same additions in
 * the same order, so the sharded strategies train like dp to the last bits
 * the collectives allow. (Reducing every micro-batch would keep zero2/3's
 * gradients at two units during accumulation too, but sum in another order.) */
static void zero_backward_begin(void *self, int k, int K)
{
    zero_state *s = self;
    if (s->r) { /* the forward just ended was this step's: its waits were communication */
        s->r->forward -= s->fwd_waited;
        s->r->comm_exposed += s->fwd_waited;
    }
    s->fwd_waited = 0;
    s->micro = k;
    s->live = s->c->overlap && k == K - 1;
    /* Slots need each unit reduced as backward leaves it: one micro-batch
     * (more are summed in place, in the whole buffer) and overlap on. */
    int slots = s->stage > 1 && K == 1 && s->live;
    if (k == 0 && slots && !s->slot_of && !s->err)
        s->err = place_slots(s);
    else if (k == 0 && !slots && s->slot_of)
        unplace_slots(s);
    s->cur_pos = -1;
}

static int zero_grads_ready(void *self, int node, size_t off, size_t n)
{
    zero_state *s = self;
    (void)n;
    int u = s->L.unit_of[node];
    while (u >= 0 && s->L.chunks[node] > 1 && s->L.lo[u] < off) /* a chunk's unit */
        u++;
    return s->live && u >= 0 && node == s->L.node_lo[u] ? reduce_unit(s, u) : 0;
}

static int zero_grads_done(void *self, double *exposed)
{
    zero_state *s = self;
    double t0 = so_now();
    int rc = 0;
    for (int u = s->L.nunits - 1; !s->live && !rc && u >= 0; u--) /* --no-overlap (zero1) */
        rc = reduce_unit(s, u);
    for (int u = 0; !rc && u < s->L.nunits; u++)
        rc = wait_handle(s, &s->rs[u]);
    s->nflight = 0;
    *exposed = so_now() - t0;
    return rc;
}

/* The gradient this rank steps with: its blocks (zero1: inside the whole
 * buffer; zero2/3: the compact shard). */
static float *grad_block(zero_state *s, int u)
{
    return s->stage == 1 ? s->m->grads + s->L.mine_off[u] : s->gshard + s->L.cbase[u];
}

static int zero_grad_sqnorm(void *self, double *sq)
{
    zero_state *s = self;
    *sq = 0;
    for (int u = 0; u < s->L.nunits; u++)
        *sq += so_optim_sqnorm(grad_block(s, u), s->L.mine_len[u]);
    return s->shard_grp ? so_group_allreduce(s->shard_grp, sq, 1, SO_DTYPE_F64, SO_REDUCE_SUM) : 0;
}

static int zero_grad_scale(void *self, float f)
{
    zero_state *s = self;
    for (int u = 0; u < s->L.nunits; u++)
        so_optim_scale(grad_block(s, u), s->L.mine_len[u], f);
    return 0;
}

static int zero_update(void *self, so_optim *opt, float *params, float *grads, float lr)
{
    zero_state *s = self;
    const shard_layout *L = &s->L;
    (void)grads;
    so_optim_range *r = malloc((size_t)L->nunits * sizeof *r);
    if (!r)
        return so_err(SO_ENOMEM, "out of memory for the optimizer's ranges");
    for (int u = 0; u < L->nunits; u++)
        r[u] = (so_optim_range){s->stage == 3 ? s->pshard + L->cbase[u] : params + L->mine_off[u], grad_block(s, u),
                                L->mine_off[u], L->cbase[u], L->mine_len[u]};
    int rc = so_optim_step_ranges(opt, r, L->nunits, lr);
    free(r);
    for (int u = 0; !rc && s->stage == 3 && u < L->nunits; u++)
        if (s->resident[u])
            rc = free_unit(s, u);
    s->stale = s->stage < 3;
    s->cur_pos = -1;
    return rc;
}

/* Every unit's parameters in the model's buffer (dumps, exports). */
static int zero_params_whole(void *self)
{
    zero_state *s = self;
    int rc = 0;
    if (s->stage < 3) {
        for (int u = 0; !rc && s->stale && u < s->L.nunits; u++)
            rc = gather_unit(s, u);
        s->stale = 0;
    } else { /* callers read the whole buffer: units in slots move there, rounded ones are gathered again */
        for (int u = 0; !rc && u < s->L.nunits; u++)
            if (s->resident[u] && ((s->pslot_of && s->pslot_of[u] >= 0) || s->param_wire != SO_DTYPE_F32))
                rc = free_unit(s, u);
        s->gather_whole = 1;
        for (int u = 0; !rc && u < s->L.nunits; u++)
            if (!s->resident[u])
                rc = gather_unit(s, u);
        s->gather_whole = 0;
        s->whole_unrounded = s->param_wire != SO_DTYPE_F32;
    }
    for (int u = 0; !rc && u < s->L.nunits; u++)
        rc = gathered(s, u);
    s->cur_pos = -1;
    return rc;
}

static void zero_finish(void *self)
{
    zero_state *s = self;
    for (int u = 0; u < s->L.nunits; u++) {
        wait_handle(s, &s->rs[u]);
        wait_handle(s, &s->ag[u]);
    }
    s->nflight = 0;
    s->cur_pos = -1;
    unplace_slots(s);
    so_model_set_node_hooks(s->m, NULL);
    if (s->r) {
        s->r->shard_grad_bytes = s->grad_bytes_sent;
        s->r->shard_gather_bytes = s->gather_bytes;
    }
    if (s->r && s->grad_wire != SO_DTYPE_F32) { /* as dp's compressor reports its bytes */
        s->r->compress_bytes_sent = s->grad_bytes_sent;
        s->r->compress_bytes_dense = s->grad_bytes_dense;
        s->r->compress_encode_s = s->r->compress_decode_s = 0; /* the conversions run inside the collective */
        s->r->compress_error_feedback = 0;
    }
}

static void zero_memory(void *self, so_strategy_memory *out)
{
    zero_state *s = self;
    shard_memory(s->stage, &s->L, s->m->nparams, so_optim_nslots(s->opt), s->prefetch, s->accumulate, out);
    /* a 16-bit wire converts through the communication thread's scratch, grown to the largest unit */
    so_dtype wire = s->grad_wire != SO_DTYPE_F32 ? s->grad_wire : s->stage == 3 ? s->param_wire : SO_DTYPE_F32;
    if (s->shard_grp)
        out->messages += shard_wire_scratch(&s->L, wire);
}

static void zero_use_dist(void *self, const so_dist *d) { ((zero_state *)self)->d = d; }

/* ---- the checkpoint's view: this rank's blocks ------------------------------------- */

/* Where elements [lo, lo + n) of segment seg meet this rank's blocks: calls
 * fn(base of this rank's copy of the overlap, offset into the caller's data,
 * length) for each overlap. Segment 0 of zero1/2 is the whole buffer. */
static void overlaps(zero_state *s, int seg, size_t lo, size_t n, int into, float *data)
{
    const shard_layout *L = &s->L;
    if (seg == 0 && s->stage < 3) {
        if (into)
            memcpy(s->m->params + lo, data, n * sizeof *data);
        else
            memcpy(data, s->m->params + lo, n * sizeof *data);
        return;
    }
    float *compact = seg == 0 ? s->pshard : so_optim_slot(s->opt, seg - 1);
    for (int u = 0; compact && u < L->nunits; u++) {
        size_t a = L->mine_off[u] > lo ? L->mine_off[u] : lo;
        size_t b = L->mine_off[u] + L->mine_len[u] < lo + n ? L->mine_off[u] + L->mine_len[u] : lo + n;
        if (a >= b)
            continue;
        float *mine = compact + L->cbase[u] + (a - L->mine_off[u]);
        if (into)
            memcpy(mine, data + (a - lo), (b - a) * sizeof *data);
        else
            memcpy(data + (a - lo), mine, (b - a) * sizeof *data);
    }
}

static void state_get(void *ctx, int seg, size_t lo, size_t n, float *dst) { overlaps(ctx, seg, lo, n, 0, dst); }
static void state_set(void *ctx, int seg, size_t lo, size_t n, const float *src)
{
    overlaps(ctx, seg, lo, n, 1, (float *)src);
}

static const so_state_layout *zero_state_layout(void *self) { return &((zero_state *)self)->state; }

static void zero_destroy(void *self)
{
    zero_state *s = self;
    shard_layout_free(&s->L);
    shared_free(s, s->pshard);
    unplace_slots(s); /* the strategy goes before the model (parts_free) */
    for (int u = 0; s->pslot_of && u < s->L.nunits; u++)
        if (s->pslot_of[u] >= 0)
            so_model_place_params(s->m, s->L.lo[u], s->L.lo[u + 1], NULL);
    for (int k = 0; k < s->npslots; k++)
        so_free(s->pslot[k]);
    free(s->pslot_of);
    free_slots(s);
    shard_unreserve(NULL, s->gshard);
    free(s->jobs);
    free(s->rs);
    free(s->ag);
    free(s->resident);
    free(s->fresh);
    free(s->want);
    free(s->flight);
    free(s);
}

static const so_strategy_ops zero_ops = {
    .name = "sharded",
    .start = zero_start,
    .backward_begin = zero_backward_begin,
    .grads_ready = zero_grads_ready,
    .grads_done = zero_grads_done,
    .update = zero_update,
    .finish = zero_finish,
    .destroy = zero_destroy,
    .grad_sqnorm = zero_grad_sqnorm,
    .grad_scale = zero_grad_scale,
    .use_dist = zero_use_dist,
    .memory = zero_memory,
    .state = zero_state_layout,
    .params_whole = zero_params_whole,
};

/* ---- --bucket-mb auto: units from measured backward times ------------------------------- */

/* A reduce-scatter moves half an allreduce's bytes. */
static double rs_cost(void *ctx, size_t bytes)
{
    const so_dist *d = ctx;
    return d->cost(d->ctx, bytes / 2);
}

/* Per-node backward seconds of two passes over a batch of noise after one
 * untimed, the slowest rank's (every rank must choose the same units); the
 * model's running statistics, dropout stream and gradients are as before. */
static int time_backward(so_model *m, const so_dist *d, double *t_bwd)
{
    so_shape sh = so_graph_input_shape(m->g);
    size_t len = (size_t)sh.c * sh.h * sh.w * (size_t)m->batch;
    int n = so_graph_size(m->g), rc = 0;
    size_t ny = (size_t)m->batch * (size_t)so_graph_targets(m->g); /* a token loss: T targets a sample */
    int k = so_graph_classes(m->g), tokens = so_graph_takes_tokens(m->g);
    float *x = calloc(len, sizeof *x), *bufs = malloc((m->nbufs + 1) * sizeof *bufs);
    int32_t *y = calloc(ny, sizeof *y);
    so_rng rng = m->rng;
    if (!x || !y || !bufs)
        rc = so_err(SO_ENOMEM, "out of memory timing backward");
    for (size_t i = 0; !rc && i < len; i++) /* noise, or token ids */
        x[i] = tokens ? (float)((i * 2654435761u) % (unsigned)k) : (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; !rc && i < ny; i++)
        y[i] = (int32_t)(i % (size_t)k);
    if (!rc)
        memcpy(bufs, m->bufs, m->nbufs * sizeof *bufs);
    for (int pass = 0; !rc && pass < 3; pass++) {
        if (pass == 1) {
            memcpy(t_bwd, m->t_bwd, (size_t)n * sizeof *t_bwd);
            m->timing++;
        }
        m->accumulate_grads = 0;
        if (!(rc = so_model_forward(m, x, y, m->batch, 1)))
            rc = so_model_backward(m);
    }
    if (!rc) {
        m->timing--;
        for (int i = 0; i < n; i++)
            t_bwd[i] = (m->t_bwd[i] - t_bwd[i]) / 2;
        memcpy(m->bufs, bufs, m->nbufs * sizeof *bufs);
        m->rng = rng;
        rc = d->max(d->ctx, t_bwd, n);
    }
    free(x);
    free(y);
    free(bufs);
    return rc;
}

/* The units of the bucket plan whose last reduce-scatter ends first. */
static int auto_units(zero_state *s, const so_strategy_config *c, shard_units *u)
{
    so_model *m = s->m;
    double *t = calloc((size_t)so_graph_size(m->g), sizeof *t);
    so_bucket_plan p = {0};
    int rc = t ? time_backward(m, c->dist, t) : so_err(SO_ENOMEM, "out of memory");
    if (!rc)
        rc = so_bucket_plan_auto(m->g, t, rs_cost, (void *)c->dist, &p, &u->first_bytes, &u->bytes, &s->predicted);
    for (int i = 1; !rc && i < so_graph_size(m->g); i++)
        s->measured += t[i];
    so_bucket_plan_free(&p);
    free(t);
    if (m->grads_free == shard_unreserve) /* the timing mapped every gradient page of a unit-mapped buffer */
        shard_release(m->grads, 0, m->nparams);
    u->kind = SHARD_UNIT_BUCKETS;
    return rc;
}

/* ---- creation --------------------------------------------------------------------------- */

/* The shard group: every rank, or (HYBRID_SHARD) the node, whose size must
 * be the same on every node; then the replicas across nodes. */
static int groups(zero_state *s, const so_strategy_config *c)
{
    s->group = c->group;
    s->shard_grp = s->group && s->group->size > 1 ? s->group : NULL;
    if (!c->shard_node || !s->shard_grp)
        return 0;
    so_group *node = NULL, *cross = NULL;
    int rc = so_group_sub(s->group, SO_GROUP_NODE, &node);
    if (!rc)
        rc = so_group_sub(s->group, SO_GROUP_CROSS, &cross);
    double v[2] = {node ? node->size : 0, node ? -node->size : 0};
    if (!rc)
        rc = so_group_allreduce(s->group, v, 2, SO_DTYPE_F64, SO_REDUCE_MAX);
    if (rc)
        return rc;
    if (v[0] != -v[1] || s->group->size % (int)v[0])
        return so_err(SO_EINVAL, "--shard-group node: nodes of %g to %g ranks do not divide the %d ranks evenly",
                      -v[1], v[0], s->group->size);
    s->shard_grp = node->size > 1 ? node : NULL;
    s->cross = cross && cross->size > 1 ? cross : NULL;
    return 0;
}

static int allocate(zero_state *s)
{
    int U = s->L.nunits;
    size_t n = s->L.nmine ? s->L.nmine : 1;
    s->jobs = calloc((size_t)U, sizeof *s->jobs);
    s->rs = calloc((size_t)U, sizeof *s->rs);
    s->ag = calloc((size_t)U, sizeof *s->ag);
    s->resident = calloc((size_t)U, 1);
    s->fresh = calloc((size_t)U, 1);
    s->want = calloc((size_t)U, 1);
    s->flight = calloc((size_t)U + 1, sizeof *s->flight);
    if (s->stage > 1) /* mapped as the first reductions write it, not beside the whole model at create */
        s->gshard = shard_reserve(NULL, n * sizeof(float));
    if (s->stage == 3)
        s->pshard = shared_alloc(s, n * sizeof(float));
    if (s->stage == 3 && s->prefetch <= SHARD_MAX_PSLOTS) {
        s->npslots = shard_param_slots(&s->L, s->prefetch, s->pslot_len, SHARD_MAX_PSLOTS);
        s->pslot_of = malloc((size_t)U * sizeof *s->pslot_of);
        for (int u = 0; s->pslot_of && u < U; u++)
            s->pslot_of[u] = -1;
        size_t tied = shard_largest_tied(&s->L); /* a slot of its own (accounted apart: shard_memory) */
        s->tied_slot = tied && s->npslots < SHARD_MAX_PSLOTS ? s->npslots++ : -1;
        if (s->tied_slot >= 0)
            s->pslot_len[s->tied_slot] = tied;
        for (int k = 0; k < s->npslots; k++) {
            s->pslot_unit[k] = -1;
            if (s->pslot_len[k] && !(s->pslot[k] = so_alloc(s->pslot_len[k] * sizeof(float))))
                return so_err(SO_ENOMEM, "out of memory for zero3's parameter slots");
        }
        if (!s->pslot_of)
            return so_err(SO_ENOMEM, "out of memory for zero3's parameter slots");
    }
    if (!s->jobs || !s->rs || !s->ag || !s->resident || !s->fresh || !s->want || !s->flight || (s->stage > 1 && !s->gshard) ||
        (s->stage == 3 && !s->pshard))
        return so_err(SO_ENOMEM, "out of memory for the shard of %zu parameters", s->L.nmine);
    return 0;
}

static void state_view(zero_state *s)
{
    int S = s->shard_grp ? s->shard_grp->size : 1, R = s->cross ? s->cross->size : 1;
    s->state = (so_state_layout){.nunits = s->L.nunits, .units = s->L.lo, .shards = S, .replicas = R,
                                 .shard = s->shard_grp ? s->shard_grp->rank : 0,
                                 .replica = s->cross ? s->cross->rank : 0, .get = state_get, .set = state_set,
                                 .ctx = s};
}

/* --compress under a sharded strategy: fp16 or bf16 put the gradients'
 * reduce-scatter on that 16-bit wire (rounded once on the way in, reduced
 * in FP32, the same bits on every rank); sparse, quantised and low-rank
 * methods need dp's buckets. */
int so_strategy_zero_wire(const so_compress_spec *cs, int error_feedback, const char *strategy, so_dtype *wire)
{
    char name[64];
    *wire = SO_DTYPE_F32;
    switch (cs->method) {
    case SO_COMPRESS_NONE: return 0;
    case SO_COMPRESS_FP16: *wire = SO_DTYPE_F16; break;
    case SO_COMPRESS_BF16: *wire = SO_DTYPE_BF16; break;
    default:
        so_compress_format(cs, name, sizeof name);
        return so_err(SO_EINVAL, "--compress %s runs under --strategy dp only: %s reduce-scatters its gradients "
                      "into shards, which carry fp16 or bf16 but no sparse, quantised or low-rank method",
                      name, strategy);
    }
    if (error_feedback > 0)
        return so_err(SO_EINVAL, "--error-feedback on with --strategy %s: the residual would be the whole gradient "
                      "on every rank; %s's 16-bit wire runs without it", strategy, strategy);
    return 0;
}

static int zero_create(int stage, const so_strategy_config *c, so_model *m, so_strategy **out)
{
    if (c->dist && c->dist->world > 1 && !c->group)
        return so_err(SO_EUNSUP, "--strategy zero%d: this build's communication layer has no collective "
                      "vocabulary (reduce-scatter and allgather with handles) yet", stage);
    if (stage < 3 && c->shard_gather != SO_DTYPE_F32)
        return so_err(SO_EINVAL, "--shard-gather with --strategy zero%d: only zero3 gathers parameters into "
                      "buffers of their own", stage);
    shard_units units;
    int rc = shard_units_for(c, stage, &units);
    zero_state *s = calloc(1, sizeof *s);
    so_strategy *st = calloc(1, sizeof *st);
    if (!rc && (!s || !st))
        rc = so_err(SO_ENOMEM, "out of memory");
    if (rc) {
        free(s);
        free(st);
        return rc;
    }
    *s = (zero_state){.stage = stage, .m = m, .d = c->dist, .prefetch = c->shard_prefetch > 0 ? c->shard_prefetch : 2,
                      .param_wire = stage == 3 ? c->shard_gather : SO_DTYPE_F32,
                      .accumulate = c->accumulate > 1 ? c->accumulate : 1, .cur_pos = -1, .tied_slot = -1};
    *st = (so_strategy){.ops = &zero_ops, .self = s};
    char name[8];
    snprintf(name, sizeof name, "zero%d", stage);
    rc = so_strategy_zero_wire(&c->compress, c->error_feedback, name, &s->grad_wire);
    if (!rc)
        rc = groups(s, c);
    s->auto_units = c->auto_buckets && !c->shard_unit && c->dist && c->dist->cost;
    if (!rc && s->auto_units)
        rc = auto_units(s, c, &units);
    if (!m->chunks) /* a model built without this strategy's model_opts runs every layer whole */
        units.chunk_bytes = 0;
    s->units = units;
    if (!rc)
        rc = shard_layout_build(m->g, &units, s->shard_grp ? s->shard_grp->size : 1,
                                s->shard_grp ? s->shard_grp->rank : 0, &s->L);
    if (!rc)
        rc = allocate(s);
    if (!rc && stage == 3) /* the initial values, before the optimizer state exists beside the whole model */
        zero3_take_initial(s);
    if (!rc)
        rc = so_optim_create(&c->optim, s->L.nmine, &st->opt);
    if (!rc) {
        s->opt = st->opt;
        state_view(s);
    }
    if (rc) {
        so_strategy_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

/* zero2/3's gradients and zero3's parameters are mapped a unit at a time;
 * dense layers above --shard-unit N MiB (default 32) run in chunks of rows.
 * zero1 keeps the caller's gradient allocator: data parallelism's registered
 * memory, from which the reduce-scatter on one node reads without copies
 * (zero2/3's slots and zero3's shard are registered too: shared_alloc). */
static int zero_model_opts(int stage, const so_strategy_config *c, so_model_opts *o)
{
    shard_units u;
    int rc = shard_units_for(c, stage, &u);
    if (rc)
        return rc;
    o->chunk_bytes = u.chunk_bytes;
    /* zero1/2 gather the updated blocks in place in the parameter buffer:
     * in the caller's registered memory (the allocator it gave for the
     * gradients, so_dist.buf_alloc) the peers on a node copy them straight
     * out of it */
    o->params_alloc = stage < 3 ? o->grads_alloc : shard_reserve;
    o->params_free = stage < 3 ? o->grads_free : shard_unreserve;
    o->params_ctx = stage < 3 ? o->grads_ctx : NULL;
    if (stage > 1) {
        o->grads_alloc = shard_reserve;
        o->grads_free = shard_unreserve;
        o->grads_ctx = NULL;
    }
    return 0;
}

static int zero1_opts(const so_strategy_config *c, so_model_opts *o) { return zero_model_opts(1, c, o); }
static int zero2_opts(const so_strategy_config *c, so_model_opts *o) { return zero_model_opts(2, c, o); }
static int zero3_opts(const so_strategy_config *c, so_model_opts *o) { return zero_model_opts(3, c, o); }
static int zero1_create(const so_strategy_config *c, so_model *m, so_strategy **out) { return zero_create(1, c, m, out); }
static int zero2_create(const so_strategy_config *c, so_model *m, so_strategy **out) { return zero_create(2, c, m, out); }
static int zero3_create(const so_strategy_config *c, so_model *m, so_strategy **out) { return zero_create(3, c, m, out); }

const so_strategy_kind so_strategy_kind_zero1 = {"zero1", "optimizer state sharded over the ranks", 1, zero1_opts,
                                                 zero1_create};
const so_strategy_kind so_strategy_kind_zero2 = {"zero2", "optimizer state and gradients sharded", 2, zero2_opts,
                                                 zero2_create};
const so_strategy_kind so_strategy_kind_zero3 = {"zero3", "optimizer state, gradients and parameters sharded "
                                                          "(FSDP FULL_SHARD)", 3, zero3_opts, zero3_create};
