/* The sharded strategies (src/train/strategy_zero.c) on N ranks inside one
 * process: each rank is a thread with its own model, and a fake process
 * group (the collective vocabulary of scaleout/group.h, non-blocking with
 * handles and continuations) matches their collectives and computes them in
 * rank order. Checks that zero1, zero2 and zero3 train like data
 * parallelism on the same fake group (N = 1..4, units whose blocks fall
 * inside tensors, uneven last blocks, accumulation, clipping, two
 * optimizers, HYBRID_SHARD's nodes), that values loaded before create are
 * what the shards hold, that zero3 never has more than --shard-prefetch
 * units mapped, the memory each reports, the checkpoint's view of a shard,
 * and the unit rules. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/strategy.h"
#include "scaleout/train.h"
#include "scaleout/zoo.h"
#include "scaleout/group.h"
#include "train/buckets.h"
#include "train/shard.h"

enum { MAXR = 4, BATCH = 4, SAMPLES = 128 };

/* ---- a fake group: threads as ranks ------------------------------------------------ */

struct so_handle {
    int done, status;
    so_then_fn fn;          /* continuation, run when this completes */
    void *arg;
    so_handle *next;        /* the continuation's handle */
    so_handle *forward;     /* completes with this one (a continuation's follow) */
    so_handle *all;         /* every handle, freed with the world */
};

typedef enum { OP_ALLREDUCE, OP_RS, OP_AG, OP_BCAST } op_kind;

typedef struct {
    const void *send;
    void *recv;
    so_handle *h;
} arrival;

typedef struct slot {
    int gid;
    long seq;
    int arrived;
    op_kind kind;
    size_t count;
    const size_t *counts;
    so_dtype dt;
    so_dtype wire;          /* an allgather's: F32 buffers delivered rounded to BF16 / F16, as the library's */
    so_reduce_op op;
    arrival a[MAXR];
    struct slot *next;
} slot;

typedef struct world world;
typedef struct {
    world *w;
    int gid, kind;          /* kind 0 all, 1 node, 2 cross */
    so_group g;
} fake_group;

struct world {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int N, node;            /* ranks, ranks per node */
    slot *slots;
    so_handle *handles;
    long seq[MAXR][3];
    fake_group groups[MAXR][3];
    long collectives;
};

static so_handle *new_handle(world *w)
{
    so_handle *h = calloc(1, sizeof *h);
    h->all = w->handles;
    w->handles = h;
    return h;
}

static void complete(world *w, so_handle *h, int status);

static void run_then(world *w, so_handle *h)
{
    so_handle *follow = NULL;
    so_then_fn fn = h->fn;
    h->fn = NULL;
    int rc = fn(h->arg, h->status, &follow);
    if (!follow)
        complete(w, h->next, rc);
    else if (follow->done)
        complete(w, h->next, follow->status);
    else
        follow->forward = h->next;
}

static void complete(world *w, so_handle *h, int status)
{
    h->status = status;
    h->done = 1;
    if (h->fn)
        run_then(w, h);
    if (h->forward)
        complete(w, h->forward, status);
    pthread_cond_broadcast(&w->cv);
}

/* Block r of the counts: offset and length. */
static size_t block_off(const size_t *counts, int r)
{
    size_t off = 0;
    for (int k = 0; k < r; k++)
        off += counts[k];
    return off;
}

/* Sums in rank order, AVG times 1/size: every rank gets the same bits. */
static void reduce_into(const slot *s, int size, size_t lo, size_t n, void *out)
{
    if (s->dt == SO_DTYPE_F64) {
        double *o = out;
        for (size_t i = 0; i < n; i++) {
            double v = ((const double *)s->a[0].send)[lo + i];
            for (int r = 1; r < size; r++) {
                double x = ((const double *)s->a[r].send)[lo + i];
                v = s->op == SO_REDUCE_MAX ? fmax(v, x) : v + x;
            }
            o[i] = v;
        }
        return;
    }
    float *o = out;
    for (size_t i = 0; i < n; i++) {
        float v = ((const float *)s->a[0].send)[lo + i];
        for (int r = 1; r < size; r++)
            v += ((const float *)s->a[r].send)[lo + i];
        o[i] = s->op == SO_REDUCE_AVG ? v * (1.0f / (float)size) : v;
    }
}

/* The collective, once every member arrived: results computed aside first
 * (buffers may be in place), then written out. */
static void perform(world *w, slot *s, int size)
{
    size_t es = s->dt == SO_DTYPE_F64 ? 8 : 4;
    void *tmp[MAXR];
    for (int r = 0; r < size; r++) {
        size_t n = s->kind == OP_RS ? s->counts[r] : s->count;
        tmp[r] = malloc(n * es + 8);
        if (s->kind == OP_ALLREDUCE)
            reduce_into(s, size, 0, n, tmp[r]);
        else if (s->kind == OP_RS)
            reduce_into(s, size, block_off(s->counts, r), n, tmp[r]);
        else if (s->kind == OP_BCAST)
            memcpy(tmp[r], s->a[0].send, n * es);
        else
            for (int k = 0; k < size; k++)
                memcpy((char *)tmp[r] + block_off(s->counts, k) * es, s->a[k].send, s->counts[k] * es);
        if (s->kind == OP_AG)
            so_round_to(s->wire, tmp[r], n);
    }
    for (int r = 0; r < size; r++) {
        size_t n = s->kind == OP_RS ? s->counts[r] : s->count;
        memcpy(s->a[r].recv, tmp[r], n * es);
        free(tmp[r]);
    }
    w->collectives++;
    for (int r = 0; r < size; r++)
        complete(w, s->a[r].h, 0);
}

static int submit_wire(so_group *g, op_kind kind, const void *send, void *recv, size_t count,
                       const size_t *counts, so_dtype dt, so_dtype wire, so_reduce_op op, so_handle **out)
{
    fake_group *fg = g->impl;
    world *w = fg->w;
    pthread_mutex_lock(&w->mu);
    int wrank = (int)(fg - &w->groups[0][0]) / 3;
    long seq = w->seq[wrank][fg->kind]++;
    slot *s = w->slots;
    while (s && !(s->gid == fg->gid && s->seq == seq))
        s = s->next;
    if (!s) {
        s = calloc(1, sizeof *s);
        *s = (slot){.gid = fg->gid, .seq = seq, .kind = kind, .count = count, .counts = counts, .dt = dt,
                    .wire = wire, .op = op, .next = w->slots};
        w->slots = s;
    }
    assert_int_equal(s->kind, kind); /* every rank runs the same collective */
    assert_int_equal(s->count, count);
    so_handle *h = new_handle(w);
    s->a[g->rank] = (arrival){send, recv, h};
    *out = h;
    if (++s->arrived == g->size)
        perform(w, s, g->size);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int submit(so_group *g, op_kind kind, const void *send, void *recv, size_t count, const size_t *counts,
                  so_dtype dt, so_reduce_op op, so_handle **out)
{
    return submit_wire(g, kind, send, recv, count, counts, dt, SO_DTYPE_F32, op, out);
}

static int f_allreduce(so_group *g, const void *send, void *recv, size_t count, so_dtype dt, so_reduce_op op,
                       const so_group_opts *o, so_handle **out)
{
    (void)o;
    return submit(g, OP_ALLREDUCE, send, recv, count, NULL, dt, op, out);
}

static int f_rs(so_group *g, const void *send, void *recv, size_t count, const size_t *counts, so_dtype dt,
                so_reduce_op op, const so_group_opts *o, so_handle **out)
{
    (void)o;
    return submit(g, OP_RS, send, recv, count, counts, dt, op, out);
}

static int f_ag(so_group *g, const void *send, void *recv, size_t count, const size_t *counts, so_dtype dt,
                const so_group_opts *o, so_handle **out)
{
    return submit_wire(g, OP_AG, send, recv, count, counts, dt, o ? o->wire : SO_DTYPE_F32, SO_REDUCE_SUM, out);
}

static int f_bcast(so_group *g, void *buf, size_t count, so_dtype dt, int root, const so_group_opts *o,
                   so_handle **out)
{
    (void)o, (void)root;
    return submit(g, OP_BCAST, buf, buf, count, NULL, dt, SO_REDUCE_SUM, out);
}

static int f_wait(so_group *g, so_handle *h)
{
    world *w = ((fake_group *)g->impl)->w;
    pthread_mutex_lock(&w->mu);
    while (!h->done)
        pthread_cond_wait(&w->cv, &w->mu);
    int rc = h->status;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int f_test(so_group *g, so_handle *h, int *done)
{
    world *w = ((fake_group *)g->impl)->w;
    pthread_mutex_lock(&w->mu);
    *done = h->done;
    pthread_mutex_unlock(&w->mu);
    return *done ? h->status : 0;
}

static int f_then(so_group *g, so_handle *h, so_then_fn fn, void *arg, so_handle **next)
{
    world *w = ((fake_group *)g->impl)->w;
    pthread_mutex_lock(&w->mu);
    h->fn = fn;
    h->arg = arg;
    h->next = new_handle(w);
    *next = h->next;
    if (h->done)
        run_then(w, h);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void f_release(so_group *g, so_handle *h) { (void)g, (void)h; }

static int f_sub(so_group *g, so_group_kind kind, so_group **out)
{
    fake_group *fg = g->impl;
    int wrank = (int)(fg - &fg->w->groups[0][0]) / 3;
    *out = kind == SO_GROUP_NODE ? &fg->w->groups[wrank][1].g : kind == SO_GROUP_CROSS ? &fg->w->groups[wrank][2].g
                                                                                      : NULL;
    return 0;
}

static int f_send(so_group *g, const void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out)
{
    (void)g, (void)buf, (void)count, (void)dt, (void)peer, (void)tag, (void)out;
    return SO_EUNSUP;
}

static int f_recv(so_group *g, void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out)
{
    (void)g, (void)buf, (void)count, (void)dt, (void)peer, (void)tag, (void)out;
    return SO_EUNSUP;
}

static const so_group_ops fake_ops = {f_allreduce, f_rs, f_ag, f_bcast, f_send, f_recv,
                                      f_test, f_wait, f_then, f_release, f_sub, NULL};

static void world_init(world *w, int N, int node)
{
    memset(w, 0, sizeof *w);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE); /* continuations submit while it is held */
    pthread_mutex_init(&w->mu, &a);
    pthread_cond_init(&w->cv, NULL);
    w->N = N;
    w->node = node;
    for (int r = 0; r < N; r++) {
        int nodes = N / node;
        int gid[3] = {0, 100 + r / node, 200 + r % node}, rank[3] = {r, r % node, r / node}, size[3] = {N, node, nodes};
        for (int k = 0; k < 3; k++)
            w->groups[r][k] = (fake_group){w, gid[k], k, {&fake_ops, NULL, rank[k], size[k]}};
        for (int k = 0; k < 3; k++)
            w->groups[r][k].g.impl = &w->groups[r][k];
    }
}

static void world_free(world *w)
{
    for (slot *s = w->slots, *n; s; s = n) {
        n = s->next;
        free(s);
    }
    for (so_handle *h = w->handles, *n; h; h = n) {
        n = h->all;
        free(h);
    }
}

/* ---- so_dist over the fake group, for data parallelism ------------------------------------ */

typedef struct {
    so_dist d;
    so_group *g;
    so_handle *pending[256];
    int npending;
} fake_dist;

static int d_submit(void *ctx, float *buf, size_t count, int bucket)
{
    fake_dist *f = ctx;
    (void)bucket;
    return so_group_iallreduce(f->g, buf, buf, count, SO_DTYPE_F32, SO_REDUCE_AVG, NULL, &f->pending[f->npending++]);
}

static int d_wait(void *ctx, double *waited)
{
    fake_dist *f = ctx;
    for (int i = 0; i < f->npending; i++)
        so_group_wait(f->g, f->pending[i]);
    f->npending = 0;
    *waited = 0;
    return 0;
}

static int d_sum(void *ctx, double *v, int n)
{
    return so_group_allreduce(((fake_dist *)ctx)->g, v, (size_t)n, SO_DTYPE_F64, SO_REDUCE_SUM);
}

static int d_max(void *ctx, double *v, int n)
{
    return so_group_allreduce(((fake_dist *)ctx)->g, v, (size_t)n, SO_DTYPE_F64, SO_REDUCE_MAX);
}

static int d_bcast(void *ctx, float *buf, size_t count)
{
    fake_dist *f = ctx;
    so_handle *h;
    int rc = so_group_ibcast(f->g, buf, count, SO_DTYPE_F32, 0, NULL, &h);
    return rc ? rc : so_group_wait(f->g, h);
}

/* ---- one training run on N threads -------------------------------------------------------- */

typedef struct {
    const char *model, *strategy, *unit, *backend;
    so_optim_kind optim;
    int N, node, accumulate, prefetch;
    float clip;
    float eps;              /* > 0: Adam's eps instead of the default 1e-8 */
    long steps;
    int loaded;             /* every parameter written between the model and the strategy (--init-from's place) */
    so_dtype gather;        /* zero3's --shard-gather wire (0: F32) */
} run_config;

typedef struct {
    const run_config *rc;
    world *w;
    int rank;
    so_model *m;
    const shard_layout *units; /* zero3's, for the probe */
    float *params;          /* rank 0: the whole model's after training */
    size_t nparams;
    so_strategy_memory mem;
    float *loaded;          /* c->loaded: the values written before the strategy was made */
    float *held;            /* ... and what the strategy's state holds of them right after create: its
                             * blocks' elements, NaN elsewhere (NULL: a strategy without a state view) */
    int max_mapped;         /* zero3: most units mapped at once (sampled at every hook) */
    int failed;
} rank_run;

/* Units whose pages (wholly inside the unit) are mapped now (mincore). */
static int mapped_units(const so_model *m, const shard_layout *L)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int n = 0;
    for (int u = 0; u < L->nunits; u++) {
        const float *at = so_model_params_at(m, L->lo[u]);
        if (at < m->params || at >= m->params + m->nparams) { /* gathered into a slot of zero3's */
            n++;
            continue;
        }
        uintptr_t a = ((uintptr_t)(m->params + L->lo[u]) + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t b = (uintptr_t)(m->params + L->lo[u + 1]) & ~(uintptr_t)(page - 1);
        unsigned char vec[4096];
        if (b <= a || (b - a) / page > sizeof vec || mincore((void *)a, b - a, vec))
            continue;
        int any = 0;
        for (size_t i = 0; i < (b - a) / page; i++)
            any |= vec[i] & 1;
        n += any;
    }
    return n;
}

/* Pages of the whole parameter buffer mapped now (mincore), at most `cap`. */
static size_t resident_pages(const so_model *m, size_t cap)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)m->params & ~(uintptr_t)(page - 1);
    uintptr_t b = ((uintptr_t)(m->params + m->nparams) + page - 1) & ~(uintptr_t)(page - 1);
    unsigned char vec[4096];
    size_t n = 0, pages = (b - a) / page;
    if (pages > sizeof vec || mincore((void *)a, b - a, vec))
        return cap + 1;
    for (size_t i = 0; i < pages; i++)
        n += vec[i] & 1;
    return n;
}

/* zero3 after create: the whole model's pages given back (the last page,
 * shared with what follows the buffer, may stay). */
static int holds_whole_model(const so_model *m)
{
    size_t n = resident_pages(m, 1);
    if (n <= 1)
        return 0;
    print_message("zero3 holds %zu pages of the whole parameter buffer after create\n", n);
    return 1;
}

/* c->loaded: the model's values replaced before the strategy is made, as
 * parts.c loads --init-from; a copy kept to compare with what the strategy
 * then holds (rank_held). */
static int load_values(rank_run *rr, so_model *m)
{
    so_model_init_params(m, 77); /* a loader's writes: the same on every rank, not the model's seed */
    if (!(rr->loaded = malloc(m->nparams * sizeof(float))))
        return so_err(SO_ENOMEM, "out of memory");
    memcpy(rr->loaded, m->params, m->nparams * sizeof(float));
    return 0;
}

/* Right after create: this rank's part of the strategy's parameters through
 * its state view (the checkpoint's), NaN where it holds nothing. */
static int rank_held(rank_run *rr, const so_strategy *st, const so_model *m)
{
    const so_state_layout *L = st->ops->state ? st->ops->state(st->self) : NULL;
    if (!L)
        return 0;
    if (!(rr->held = malloc(m->nparams * sizeof(float))))
        return so_err(SO_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->nparams; i++)
        rr->held[i] = NAN;
    L->get(L->ctx, 0, 0, m->nparams, rr->held);
    return 0;
}

/* Backward writes of a node with parameters outside the whole gradient
 * buffer (into zero2/3's slots), over every rank of the current run. */
static atomic_int slotted_writes;
/* Forward or backward runs of a node whose parameters are in zero3's slots. */
static atomic_int slotted_reads;
/* Forward or backward runs of a node that read a weight with any of its low
 * 16 bits set (not a BF16 value). */
static atomic_int unrounded_reads;

static int bf16_exact(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0xffffu) == 0;
}

/* Row chunks of cut layers: backward passes of a chunk whose gradients were
 * in the whole buffer, and runs of a chunk whose parameters were (zero3). */
static atomic_int chunk_whole_writes, chunk_whole_reads;

static int outside(const so_model *m, const float *whole, const float *p)
{
    return p < whole || p >= whole + m->nparams;
}

/* After a chunked layer's pass: where each chunk's gradients went (placed
 * for the whole step) and where the chunk that ran last (forward: K-1,
 * backward: 0) read its parameters. */
static void probe_chunks(const so_model *m, int node, int backward)
{
    int K = m->chunks[node], r0, r1;
    size_t lo, hi;
    for (int k = 0; backward && k < K; k++) {
        so_graph_chunk_rows(m->g, node, K, k, &r0, &r1, &lo, &hi);
        if (!outside(m, m->grads, so_model_grads_at(m, lo)))
            atomic_fetch_add(&chunk_whole_writes, 1);
    }
    so_graph_chunk_rows(m->g, node, K, backward ? 0 : K - 1, &r0, &r1, &lo, &hi);
    if (!outside(m, m->params, so_model_params_at(m, lo)))
        atomic_fetch_add(&chunk_whole_reads, 1);
}

/* After every node's forward and backward: zero3's mapped units, and where
 * the node's gradients went. */
static void probe(void *arg, int node, int backward, double t0, double t1)
{
    rank_run *rr = arg;
    (void)t0, (void)t1;
    const so_node *nd = so_graph_node(rr->m->g, node);
    if (backward && nd->nparam && outside(rr->m, rr->m->grads, so_model_grads_at(rr->m, nd->param_off)))
        atomic_fetch_add(&slotted_writes, 1);
    if (nd->nparam && outside(rr->m, rr->m->params, so_model_params_at(rr->m, nd->param_off)))
        atomic_fetch_add(&slotted_reads, 1);
    if (rr->m->chunks && rr->m->chunks[node] > 1)
        probe_chunks(rr->m, node, backward);
    const float *w = nd->nparam ? so_model_params_at(rr->m, nd->param_off) : NULL;
    for (size_t i = 0; w && (!rr->m->chunks || rr->m->chunks[node] == 1) && i < nd->nparam; i++)
        if (!bf16_exact(w[i])) {
            atomic_fetch_add(&unrounded_reads, 1);
            break;
        }
    if (!rr->units)
        return;
    int n = mapped_units(rr->m, rr->units);
    rr->max_mapped = n > rr->max_mapped ? n : rr->max_mapped;
}

static void *rank_main(void *arg)
{
    rank_run *rr = arg;
    const run_config *c = rr->rc;
    so_group *g = &rr->w->groups[rr->rank][0].g;
    fake_dist fd = {.g = g};
    fd.d = (so_dist){.rank = rr->rank, .world = c->N, .ctx = &fd, .grad_submit = d_submit, .grad_wait = d_wait,
                     .sum = d_sum, .max = d_max, .bcast = d_bcast};
    so_dataset *ds = NULL;
    so_graph *gr = NULL;
    so_model *m = NULL;
    so_loader *l = NULL;
    so_strategy *st = NULL;
    const so_strategy_kind *k = NULL;
    const so_zoo_entry *z = so_zoo_find(c->model);
    so_strategy_config sc = {.dist = &fd.d, .group = g, .bucket_bytes = 8192, .first_bucket_bytes = 2048,
                             .shard_unit = c->unit, .shard_prefetch = c->prefetch, .shard_node = c->node < c->N,
                             .shard_gather = c->gather};
    so_optim_defaults(&sc.optim, c->optim);
    sc.optim.weight_decay = c->optim == SO_OPT_ADAMW ? 0.05f : 0.0f;
    if (c->eps > 0)
        sc.optim.eps = c->eps;
    so_model_opts mo = {.backend = c->backend ? c->backend : "ref", .batch = BATCH, .seed = 5};
    int rc = so_dataset_synthetic(SAMPLES, z->c, z->h, z->w, z->classes, 9, &ds);
    if (!rc)
        rc = so_zoo_build(c->model, z->c, z->h, z->w, z->classes, &gr);
    if (!rc)
        rc = so_strategy_lookup(c->strategy, &k);
    if (!rc && k->model_opts)
        rc = k->model_opts(&sc, &mo);
    if (!rc)
        rc = so_model_create_opts(gr, &mo, &m);
    if (!rc && c->loaded)
        rc = load_values(rr, m);
    if (!rc)
        rc = so_strategy_create(k, &sc, m, &st);
    if (!rc && !strcmp(c->strategy, "zero3") && holds_whole_model(m))
        rc = so_err(SO_EINVAL, "zero3 kept the whole model after create");
    if (!rc && c->loaded)
        rc = rank_held(rr, st, m);
    shard_layout units = {0};
    shard_units spec;
    if (!rc && !strcmp(c->strategy, "zero3") && c->unit && !shard_units_parse(c->unit, &spec) &&
        !shard_layout_build(m->g, &spec, 1, 0, &units)) /* the same units as the strategy's */
        rr->units = &units;
    if (!rc) {
        rr->m = m;
        m->on_node = probe;
        m->on_node_arg = rr;
    }
    so_loader_config lc = {.batch = BATCH, .shuffle = 1, .drop_last = 1, .seed = 3, .rank = rr->rank, .world = c->N};
    if (!rc)
        rc = so_loader_create(ds, &lc, &l);
    so_train_config tc;
    so_train_defaults(&tc);
    tc.steps = c->steps;
    tc.eval_every = -1;
    tc.accumulate = c->accumulate;
    tc.clip_norm = c->clip;
    tc.lr.base_lr = 0.02f;
    tc.first_bucket_bytes = 2048;
    tc.bucket_bytes = 8192;
    tc.strategy = st;
    so_train_result res = {0};
    if (!rc)
        rc = so_train(m, st->opt, l, NULL, &tc, &fd.d, NULL, NULL, &res);
    so_train_result_free(&res);
    if (!rc && st->ops->params_whole)
        rc = st->ops->params_whole(st->self);
    if (!rc) {
        so_strategy_memory_use(st, m, &rr->mem);
        rr->nparams = m->nparams;
        rr->params = malloc(m->nparams * sizeof(float));
        memcpy(rr->params, m->params, m->nparams * sizeof(float));
    }
    if (rc)
        print_message("rank %d: %s\n", rr->rank, so_errmsg());
    rr->failed = rc != 0;
    shard_layout_free(&units);
    so_strategy_free(st);
    so_loader_destroy(l);
    so_model_destroy(m);
    so_dataset_destroy(ds);
    return NULL;
}

/* c->loaded: right after create the ranks' strategies held the loaded
 * values, each element on as many ranks as hold a copy of it (every rank
 * for zero1/2's parameters, one rank for zero3's: its shards tile the
 * model), and no other values. */
static void check_held(const run_config *c, const rank_run *rr)
{
    size_t n = rr[0].nparams;
    int copies = !strcmp(c->strategy, "zero3") ? 1 : c->N;
    for (size_t i = 0; rr[0].held && i < n; i++) {
        int on = 0;
        for (int r = 0; r < c->N; r++) {
            if (isnan(rr[r].held[i]))
                continue;
            on++;
            if (memcmp(&rr[r].held[i], &rr[r].loaded[i], sizeof(float)))
                fail_msg("%s N=%d: rank %d holds %g at element %zu, loaded %g", c->strategy, c->N, r,
                         (double)rr[r].held[i], i, (double)rr[r].loaded[i]);
        }
        if (on != copies)
            fail_msg("%s N=%d: element %zu held by %d rank(s) after create, not %d", c->strategy, c->N, i, on, copies);
    }
}

/* Trains on c->N threads; *params = rank 0's whole model (caller frees);
 * *mapped the most zero3 units any rank had mapped at once. */
static void train_ranks(const run_config *c, float **params, size_t *n, so_strategy_memory *mem, int *mapped)
{
    world w;
    world_init(&w, c->N, c->node ? c->node : c->N);
    rank_run rr[MAXR];
    pthread_t th[MAXR];
    for (int r = 0; r < c->N; r++) {
        rr[r] = (rank_run){.rc = c, .w = &w, .rank = r};
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &rr[r]), 0);
    }
    for (int r = 0; r < c->N; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < c->N; r++)
        assert_false(rr[r].failed);
    for (int r = 1; r < c->N; r++) /* every rank ends with the same whole model */
        assert_memory_equal(rr[0].params, rr[r].params, rr[0].nparams * sizeof(float));
    if (c->loaded)
        check_held(c, rr);
    for (int r = 0; r < c->N; r++) {
        free(rr[r].loaded);
        free(rr[r].held);
    }
    *params = rr[0].params;
    *n = rr[0].nparams;
    if (mem)
        *mem = rr[0].mem;
    for (int r = 0; mapped && r < c->N; r++)
        *mapped = r == 0 || rr[r].max_mapped > *mapped ? rr[r].max_mapped : *mapped;
    for (int r = 1; r < c->N; r++)
        free(rr[r].params);
    world_free(&w);
}

static void assert_close(const float *a, const float *b, size_t n, double tol, const char *what)
{
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(a[i]));
        err = fmax(err, fabs((double)a[i] - b[i]));
    }
    if (!(err <= tol * scale))
        fail_msg("%s: max |a-b| %g > %g x %g", what, err, tol, scale);
}

/* dp, zero1, zero2 and zero3 of one configuration: the same parameters. */
static void same_as_dp(run_config c, const char *what)
{
    float *ref, *got;
    size_t n, m;
    c.strategy = "dp";
    train_ranks(&c, &ref, &n, NULL, NULL);
    static const char *const zero[] = {"zero1", "zero2", "zero3"};
    for (int z = 0; z < 3; z++) {
        c.strategy = zero[z];
        train_ranks(&c, &got, &m, NULL, NULL);
        assert_int_equal(n, m);
        char msg[160];
        snprintf(msg, sizeof msg, "%s %s N=%d", what, zero[z], c.N);
        assert_close(ref, got, n, 1e-6, msg);
        free(got);
    }
    free(ref);
}

static void test_like_dp(void **state)
{
    (void)state;
    for (int N = 1; N <= 4; N++) {
        run_config c = {.model = "lenet5", .optim = SO_OPT_MOMENTUM, .N = N, .accumulate = 1, .steps = 6};
        same_as_dp(c, "lenet5 momentum, bucket units");
        c = (run_config){.model = "lenet5", .optim = SO_OPT_ADAMW, .N = N, .accumulate = 2, .clip = 0.3f,
                         .unit = "layer", .steps = 5};
        same_as_dp(c, "lenet5 adamw wd, accumulate 2, clip, layer units");
    }
    /* 10 KiB units cut LeNet-5's fc1 and fc2 into row chunks. The chunks'
     * gradients equal the whole layers' but for the order in which a chunked
     * layer's input gradient is summed (test_chunked_grads: a few ulps).
     * Momentum keeps that at rounding level. Adam's first steps move each
     * weight by about lr g / (|g| + eps), which turns the relative error of
     * a gradient near zero into an absolute one: with the default eps 1e-8
     * dp and zero3 differ by 2e-3 after 4 steps here, 1.4e-5 with eps 1e-5,
     * 2e-7 with eps 1e-3, falling as eps grows, as amplification does and
     * no fault of the chunks would. So AdamW (its moments, weight decay and
     * clipping by chunk) is checked at eps 1e-3, where a decay on the wrong
     * mask or a norm counted twice would still show at 1e-4. */
    run_config c = {.model = "lenet5", .optim = SO_OPT_MOMENTUM, .N = 3, .accumulate = 1, .clip = 0.3f,
                    .unit = "0.01", .prefetch = 1, .steps = 4};
    same_as_dp(c, "lenet5 N=3 10 KiB units, prefetch 1");
    c = (run_config){.model = "lenet5", .optim = SO_OPT_ADAMW, .N = 3, .accumulate = 1, .clip = 0.3f,
                     .unit = "0.01", .prefetch = 1, .steps = 4, .eps = 1e-3f};
    same_as_dp(c, "lenet5 N=3 10 KiB units, AdamW eps 1e-3 wd, prefetch 1");
}

/* zero2/3 with one micro-batch write the gradients of the units backward
 * writes once into two slots, reused unit after unit, not into the whole
 * buffer (whose pages would be mapped and given back each step); dp,
 * zero1 and micro-batches (summed in place) keep the whole buffer. zero3's
 * layers read their gathered parameters from its parameter slots. The
 * values are checked against dp by test_like_dp. */
static void test_grad_slots(void **state)
{
    (void)state;
    static const struct {
        const char *strategy;
        int accumulate, slotted, param_slots;
        const char *backend;
    } cases[] = {{"zero2", 1, 1, 0, "ref"}, {"zero3", 1, 1, 1, "ref"},    {"zero2", 2, 0, 0, "ref"},
                 {"zero1", 1, 0, 0, "ref"}, {"dp", 1, 0, 0, "ref"},       {"zero2", 1, 1, 0, "onednn"},
                 {"zero3", 2, 0, 1, "onednn"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_config c = {.model = "lenet5", .strategy = cases[i].strategy, .backend = cases[i].backend,
                        .optim = SO_OPT_MOMENTUM, .N = 2, .accumulate = cases[i].accumulate, .unit = "layer",
                        .steps = 2};
        float *p;
        size_t n;
        atomic_store(&slotted_writes, 0);
        atomic_store(&slotted_reads, 0);
        train_ranks(&c, &p, &n, NULL, NULL);
        free(p);
        int got = atomic_load(&slotted_writes), read = atomic_load(&slotted_reads);
        if ((got > 0) != cases[i].slotted)
            fail_msg("%s on %s, %d micro-batch(es): %d backward writes into slots, expected %s", cases[i].strategy,
                     cases[i].backend, cases[i].accumulate, got, cases[i].slotted ? "some" : "none");
        if ((read > 0) != cases[i].param_slots)
            fail_msg("%s on %s: %d layer runs read parameters from slots, expected %s", cases[i].strategy,
                     cases[i].backend, read, cases[i].param_slots ? "some" : "none");
    }
}

/* Row chunks are units like any other: with one micro-batch, zero2/3 write
 * every chunk's gradients into the slots, and zero3's chunks read their
 * gathered parameters from its parameter slots, on both backends (each
 * addresses a chunk from its own offset); no chunk's pages of the whole
 * buffers are mapped a step. LeNet-5 in 10 KiB units: fc1 in 19 chunks,
 * fc2 in 4. test_like_dp checks the values. */
static void test_chunk_slots(void **state)
{
    (void)state;
    static const char *strategies[] = {"zero2", "zero3"}, *backends[] = {"ref", "onednn"};
    for (int i = 0; i < 4; i++) {
        run_config c = {.model = "lenet5", .strategy = strategies[i & 1], .backend = backends[i >> 1],
                        .optim = SO_OPT_MOMENTUM, .N = 2, .accumulate = 1, .unit = "0.01", .steps = 2};
        float *p;
        size_t n;
        atomic_store(&chunk_whole_writes, 0);
        atomic_store(&chunk_whole_reads, 0);
        atomic_store(&slotted_writes, 0);
        train_ranks(&c, &p, &n, NULL, NULL);
        free(p);
        int writes = atomic_load(&chunk_whole_writes), reads = atomic_load(&chunk_whole_reads);
        if (writes || !atomic_load(&slotted_writes))
            fail_msg("%s on %s: %d chunk backward passes wrote the whole gradient buffer", c.strategy, c.backend,
                     writes);
        if ((i & 1) && reads)
            fail_msg("%s on %s: %d chunk runs read the whole parameter buffer", c.strategy, c.backend, reads);
    }
}

/* --shard-gather bf16 (FSDP's param_dtype): zero3 gathers each rank's
 * block rounded to BF16, so every layer computes forward and backward with
 * BF16 values on every rank, while the optimizer steps the FP32 shard: the
 * export (params_whole) holds weights BF16 cannot represent, and the run
 * stays near the FP32 gather's: 3 steps of momentum SGD on weights rounded
 * by at most 2^-9 relative differ by 1.6e-3 of the largest weight (5e-3
 * allowed). The same probe on FP32 gathers must see unrounded weights, so
 * it can fail. */
static void test_gather_wire(void **state)
{
    (void)state;
    for (int N = 1; N <= 3; N++) {
        float *ref = NULL, *got;
        size_t n, m;
        for (int b = 0; b < 2; b++) {
            run_config c = {.model = "lenet5", .strategy = "zero3", .optim = SO_OPT_MOMENTUM, .N = N,
                            .accumulate = 1, .unit = "layer", .steps = 3, .gather = b ? SO_DTYPE_BF16 : SO_DTYPE_F32};
            atomic_store(&unrounded_reads, 0);
            train_ranks(&c, b ? &got : &ref, b ? &m : &n, NULL, NULL);
            int unrounded = atomic_load(&unrounded_reads);
            if (b && unrounded)
                fail_msg("N=%d bf16 gathers: %d layer runs read weights not rounded to BF16", N, unrounded);
            if (!b && !unrounded)
                fail_msg("N=%d fp32 gathers: no layer run read an unrounded weight (the probe cannot fail)", N);
        }
        size_t exact = 0;
        for (size_t i = 0; i < m; i++)
            exact += bf16_exact(got[i]);
        if (exact == m)
            fail_msg("N=%d bf16 gathers: every exported weight is a BF16 value, not the FP32 shard's", N);
        assert_int_equal(n, m);
        assert_close(ref, got, n, 5e-3, "zero3 bf16 gathers against fp32 gathers");
        free(ref);
        free(got);
    }
}

/* The contract of create (scaleout/strategy.h): the model holds its
 * initial values when the strategy is made, and a strategy may take them
 * there. Values loaded between the model and the strategy (where parts.c
 * loads --init-from, the only place the job writes them) are what zero3's
 * shards hold right after create, each element on one rank, with none of
 * the whole buffer kept (check_held, holds_whole_model); zero1/2 hold them
 * on every rank; and all three then train from them like dp, which would
 * fail if a strategy started from the model's own seed instead. */
static void test_loaded_before_create(void **state)
{
    (void)state;
    run_config c = {.model = "lenet5", .optim = SO_OPT_MOMENTUM, .N = 2, .accumulate = 1, .unit = "layer",
                    .steps = 3, .loaded = 1};
    same_as_dp(c, "lenet5 loaded before create");
    c.N = 3;
    c.unit = NULL;
    same_as_dp(c, "lenet5 N=3 loaded before create, bucket units");
}

/* One batch through LeNet-5 (ref backend) whole and with its dense layers
 * in 10 KiB row chunks (fc1 in 19, fc2 in 4), the same parameters: the
 * loss and the gradients compared element by element. A chunk writes its
 * rows of dW and db from the same dy in the same order, so a layer with no
 * chunked layer after it (fc2, fc3) has bitwise the same gradients; a
 * chunked layer adds its chunks' parts of dx last chunk first, another
 * order than one product, so the layers below it (fc1, conv2, conv1) get
 * gradients a few ulps apart (measured: at most 5e-9 of 0.018, 4e-7
 * relative, 1/3 of fc1's elements). Nothing else differs: no row is
 * missing, no bias is counted twice. */
static void test_chunked_grads(void **state)
{
    (void)state;
    const so_zoo_entry *z = so_zoo_find("lenet5");
    so_model *m[2];
    for (int k = 0; k < 2; k++) {
        so_graph *g;
        assert_int_equal(so_zoo_build("lenet5", z->c, z->h, z->w, z->classes, &g), 0);
        so_model_opts mo = {.backend = "ref", .batch = BATCH, .seed = 5, .chunk_bytes = k ? 10240 : 0};
        assert_int_equal(so_model_create_opts(g, &mo, &m[k]), 0);
    }
    assert_non_null(m[1]->chunks);
    size_t in = (size_t)BATCH * z->c * z->h * z->w;
    float *x = malloc(in * sizeof *x);
    int32_t y[BATCH];
    for (size_t i = 0; i < in; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int n = 0; n < BATCH; n++)
        y[n] = n % z->classes;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(so_model_forward(m[k], x, y, BATCH, 1), 0);
        assert_int_equal(so_model_backward(m[k]), 0);
    }
    assert_memory_equal(&m[0]->loss, &m[1]->loss, sizeof(float));
    int chunked_after = 0, chunked = 0; /* from the last node back: a chunked node seen yet? */
    for (int i = so_graph_size(m[0]->g) - 1; i >= 1; i--) {
        const so_node *nd = so_graph_node(m[0]->g, i);
        const float *a = m[0]->grads + nd->param_off, *b = m[1]->grads + nd->param_off;
        chunked += m[1]->chunks[i] > 1;
        if (!nd->nparam)
            continue;
        if (!chunked_after)
            assert_memory_equal(a, b, nd->nparam * sizeof *a);
        char what[96];
        snprintf(what, sizeof what, "%s's gradient, chunked", nd->name);
        assert_close(a, b, nd->nparam, 1e-6, what);
        chunked_after |= m[1]->chunks[i] > 1;
    }
    assert_int_equal(chunked, 2);
    for (int k = 0; k < 2; k++)
        so_model_destroy(m[k]);
    free(x);
}

/* HYBRID_SHARD: 2 nodes of 2 ranks shard within the node, average across.
 * The fake dp adds the 4 ranks in order, hybrid node sums first: with
 * momentum the different association stays below 1e-6 (AdamW divides each
 * gradient by its own magnitude and shows it near zero; shard_matrix runs
 * HYBRID_SHARD against dp with hier's node-first order under MPI). */
static void test_hybrid(void **state)
{
    (void)state;
    run_config c = {.model = "lenet5", .optim = SO_OPT_MOMENTUM, .N = 4, .node = 2, .accumulate = 2, .clip = 0.3f,
                    .unit = "layer", .steps = 4};
    same_as_dp(c, "lenet5 hybrid 2x2");
    c.accumulate = 1; /* zero2/3's gradients in slots, summed across the nodes there */
    same_as_dp(c, "lenet5 hybrid 2x2, one micro-batch");
}

/* A model with batchnorm (running statistics stay per rank). */
static void test_batchnorm(void **state)
{
    (void)state;
    run_config c = {.model = "smallcnn", .optim = SO_OPT_MOMENTUM, .N = 2, .accumulate = 1, .clip = 1.0f,
                    .unit = "block", .steps = 3};
    same_as_dp(c, "smallcnn");
    c.backend = "onednn"; /* its primitives hold gradient addresses: they follow zero2/3's slots */
    same_as_dp(c, "smallcnn onednn");
}

/* zero3 keeps at most --shard-prefetch units mapped: with K = 1 one at a
 * time, with 2 and 3 at most that many (LeNet-5's layers, of which three
 * span whole pages). */
static void test_prefetch_bound(void **state)
{
    (void)state;
    for (int K = 1; K <= 3; K++) {
        run_config c = {.model = "lenet5", .strategy = "zero3", .optim = SO_OPT_MOMENTUM, .N = 2, .accumulate = 1,
                        .unit = "layer", .prefetch = K, .steps = 2};
        float *p;
        size_t n;
        int mapped = 0;
        train_ranks(&c, &p, &n, NULL, &mapped);
        free(p);
        print_message("prefetch %d: at most %d units mapped\n", K, mapped);
        assert_true(mapped >= 1 && mapped <= K);
    }
}

/* What each stage says it holds, against ZeRO's formulas for Adam (2 slots)
 * over N ranks: zero1 8P + 8P/N, zero2 4P + 12P/N + two consecutive units'
 * gradients in flight, zero3 16P/N + K consecutive units gathered + the same
 * two units' gradients. */
static void test_memory(void **state)
{
    (void)state;
    enum { N = 4 };
    static const char *const zero[] = {"zero1", "zero2", "zero3"};
    for (int z = 0; z < 3; z++) {
        run_config c = {.model = "lenet5", .strategy = zero[z], .optim = SO_OPT_ADAMW, .N = N, .accumulate = 1,
                        .unit = "layer", .prefetch = 2, .steps = 1};
        float *p;
        size_t n;
        so_strategy_memory mem;
        train_ranks(&c, &p, &n, &mem, NULL);
        free(p);
        /* LeNet-5's layers: conv1, conv2, fc1 (48120), fc2 (10164), fc3; the
         * largest two consecutive are fc1 + fc2 (K = 2 gathered, two in flight). */
        double P = 4.0 * n, run = 4.0 * (48120 + 10164);
        double want[3][3] = {{P, P, 2 * P / N}, {P, P / N + run, 2 * P / N}, {P / N + run, P / N + run, 2 * P / N}};
        double got[3] = {mem.params, mem.grads, mem.optimizer};
        for (int k = 0; k < 3; k++)
            if (fabs(got[k] - want[z][k]) > 0.02 * want[z][k])
                fail_msg("%s: part %d holds %.0f bytes, the formula %.0f", zero[z], k, got[k], want[z][k]);
    }
}

/* The unit rules on ResNet-20's graph: layers, blocks (layer1.0 is one
 * unit), sizes, the bucket plan; units tile the parameters and blocks tile
 * each unit. */
static void test_units(void **state)
{
    (void)state;
    so_graph *g;
    assert_int_equal(so_zoo_build("resnet20", 3, 32, 32, 10, &g), 0);
    int layers = 0;
    for (int i = 1; i < so_graph_size(g); i++)
        layers += so_graph_node(g, i)->nparam > 0;
    struct {
        const char *text;
        int min, max;
    } cases[] = {{"layer", layers, layers}, {"block", 12, 12}, {"0.25", 2, 5}, {NULL, 2, 12}, {"auto", 2, 3}};
    for (int i = 0; i < 5; i++) {
        shard_units u = {SHARD_UNIT_BUCKETS, 256 << 10, 64 << 10, 0};
        if (cases[i].text)
            assert_int_equal(shard_units_parse(cases[i].text, &u), 0);
        for (int S = 1; S <= 4; S++) {
            shard_layout L;
            size_t mine = 0;
            for (int k = 0; k < S; k++) {
                assert_int_equal(shard_layout_build(g, &u, S, k, &L), 0);
                assert_in_range(L.nunits, cases[i].min, cases[i].max);
                assert_int_equal(L.lo[0], 0);
                assert_int_equal(L.lo[L.nunits], so_graph_nparams(g));
                for (int v = 0; v < L.nunits; v++) {
                    size_t sum = 0;
                    for (int r = 0; r < S; r++)
                        sum += L.counts[(size_t)v * S + r];
                    assert_int_equal(sum, L.lo[v + 1] - L.lo[v]);
                    assert_true(L.mine_off[v] >= L.lo[v] && L.mine_off[v] + L.mine_len[v] <= L.lo[v + 1]);
                }
                mine += L.nmine;
                shard_layout_free(&L);
            }
            assert_int_equal(mine, so_graph_nparams(g));
        }
    }
    shard_units u;
    assert_int_equal(shard_units_parse("block", &u), 0);
    shard_layout L;
    assert_int_equal(shard_layout_build(g, &u, 1, 0, &L), 0);
    int l10 = -1;
    for (int i = 1; i < so_graph_size(g); i++)
        if (!strcmp(so_graph_node(g, i)->name, "layer1.0.conv1"))
            l10 = L.unit_of[i];
    for (int i = 1; i < so_graph_size(g); i++)
        if (!strncmp(so_graph_node(g, i)->name, "layer1.0.", 9))
            assert_int_equal(L.unit_of[i], l10);
    shard_layout_free(&L);
    assert_int_equal(shard_units_parse("bricks", &u), SO_EINVAL);
    assert_int_equal(shard_units_parse("-1", &u), SO_EINVAL);
    so_graph_destroy(g);
}

/* Without --shard-unit every stage cuts dense layers above SHARD_CHUNK_BYTES
 * into row chunks, inside zero1/2's bucket plan too: VGG-16's 411 MB fc6
 * whole made zero2 hold more gradient memory than zero1 at N = 2 (two slots
 * of it beside the shard). Each chunked layer's units are its chunks, and
 * the buckets' boundaries stay (LeNet-5 in 10 KiB chunks). */
static void test_default_chunks(void **state)
{
    (void)state;
    so_strategy_config c = {.bucket_bytes = 25u << 20, .first_bucket_bytes = 1u << 20};
    shard_units u;
    for (int stage = 1; stage <= 3; stage++) {
        assert_int_equal(shard_units_for(&c, stage, &u), 0);
        assert_int_equal(u.chunk_bytes, SHARD_CHUNK_BYTES);
    }
    so_graph *g;
    assert_int_equal(so_zoo_build("vgg16", 3, 224, 224, 1000, &g), 0);
    assert_int_equal(shard_units_for(&c, 2, &u), 0);
    shard_layout L;
    assert_int_equal(shard_layout_build(g, &u, 2, 0, &L), 0);
    size_t largest = 0;
    for (int v = 0; v < L.nunits; v++)
        largest = L.lo[v + 1] - L.lo[v] > largest ? L.lo[v + 1] - L.lo[v] : largest;
    assert_true(largest * sizeof(float) <= SHARD_CHUNK_BYTES + 25088 * sizeof(float)); /* a chunk and a row of fc6 */
    so_strategy_memory z1, z2;
    shard_memory(1, &L, so_graph_nparams(g), 2, 2, 1, &z1);
    shard_memory(2, &L, so_graph_nparams(g), 2, 2, 1, &z2);
    if (!(z2.grads < z1.grads))
        fail_msg("VGG-16 at N = 2: zero2 holds %.0f MB of gradients, zero1 %.0f", z2.grads / 1e6, z1.grads / 1e6);
    shard_layout_free(&L);
    so_graph_destroy(g);

    assert_int_equal(so_zoo_build("lenet5", 1, 28, 28, 10, &g), 0);
    u = (shard_units){SHARD_UNIT_BUCKETS, 256 << 10, 64 << 10, 10240};
    assert_int_equal(shard_layout_build(g, &u, 2, 1, &L), 0);
    so_bucket_plan p;
    assert_int_equal(so_bucket_plan_build(g, u.first_bytes, u.bytes, &p), 0);
    for (int b = 0; b < p.n; b++) { /* every bucket starts a unit */
        int found = 0;
        for (int v = 0; v <= L.nunits; v++)
            found |= L.lo[v] == p.b[b].lo;
        assert_true(found);
    }
    so_bucket_plan_free(&p);
    int chunked = 0;
    for (int i = 1; i < so_graph_size(g); i++) {
        int K = L.chunks[i], r0, r1;
        for (int k = 0; K > 1 && k < K; k++) {
            size_t lo, hi;
            so_graph_chunk_rows(g, i, K, k, &r0, &r1, &lo, &hi);
            assert_int_equal(L.lo[L.unit_of[i] + k], lo);
            assert_int_equal(L.lo[L.unit_of[i] + k + 1], hi);
            assert_int_equal(L.node_lo[L.unit_of[i] + k], i);
        }
        chunked += K > 1;
    }
    assert_int_equal(chunked, 2); /* fc1 and fc2 */
    shard_layout_free(&L);
    so_graph_destroy(g);
}

/* Unit u's flat range in bytes. */
static size_t unit_bytes(const shard_layout *L, int u) { return (L->lo[u + 1] - L->lo[u]) * sizeof(float); }

/* auto units (zero3's default) merge whole blocks greedily up to
 * SHARD_AUTO_BYTES: each block in one unit, no unit above the limit unless
 * it is one block, no two neighbours that would fit together, and a tied
 * table a unit alone. ResNet-50's layer4 blocks (above the limit) stay
 * units of their own, its small early blocks merge. */
static void test_auto_units(void **state)
{
    (void)state;
    static const struct {
        const char *model;
        int c, h, w, classes;
    } models[] = {{"resnet50", 3, 224, 224, 1000}, {"gpt2:L=3,H=2,C=16,T=8,V=40", 1, 8, 1, 40}};
    for (int m = 0; m < 2; m++) {
        so_graph *g;
        assert_int_equal(so_zoo_build(models[m].model, models[m].c, models[m].h, models[m].w, models[m].classes, &g), 0);
        shard_units u, blk;
        assert_int_equal(shard_units_parse("auto", &u), 0);
        assert_int_equal(shard_units_parse("block", &blk), 0);
        shard_layout L, B;
        assert_int_equal(shard_layout_build(g, &u, 2, 0, &L), 0);
        assert_int_equal(shard_layout_build(g, &blk, 2, 0, &B), 0);
        assert_true(L.nunits < B.nunits);
        int big = 0;
        for (int v = 0; v < B.nunits; v++)
            big += unit_bytes(&B, v) > SHARD_AUTO_BYTES;
        assert_true(m == 1 || big > 0); /* ResNet-50 has blocks above the limit */
        int whole_blocks = 0;
        for (int v = 0; v < L.nunits; v++) { /* a unit is whole blocks: its first node opens a block */
            int i0 = L.node_lo[v];
            assert_int_equal(B.node_lo[B.unit_of[i0]], i0);
            int one_block = B.unit_of[i0] == B.unit_of[L.node_hi[v] - 1];
            whole_blocks += one_block && unit_bytes(&L, v) > SHARD_AUTO_BYTES;
            int tied = shard_unit_tied(&L, v);
            if (tied)
                assert_int_equal(unit_bytes(&L, v), (size_t)B.lo[1] * sizeof(float)); /* the token table alone */
            else
                assert_true(unit_bytes(&L, v) <= SHARD_AUTO_BYTES || one_block);
            if (v + 1 < L.nunits && !tied && !shard_unit_tied(&L, v + 1))
                assert_true(unit_bytes(&L, v) + unit_bytes(&L, v + 1) > SHARD_AUTO_BYTES);
        }
        assert_int_equal(whole_blocks, big); /* every block above the limit is a unit alone */
        shard_layout_free(&L);
        shard_layout_free(&B);
        so_graph_destroy(g);
    }
}

/* GPT-2's units by blocks: the embedding, each transformer.h.<l>, ln_f
 * (the LM head has no parameters of its own: it ties the token table). A
 * forward reads them in that order and then the embedding's unit again for
 * the LM head; the tied unit's gradient is accounted for the whole backward. */
static void test_tied_units(void **state)
{
    (void)state;
    so_graph *g;
    assert_int_equal(so_zoo_build("gpt2:L=3,H=2,C=16,T=8,V=40", 1, 8, 1, 40, &g), 0);
    shard_units u;
    assert_int_equal(shard_units_parse("block", &u), 0);
    shard_layout L;
    assert_int_equal(shard_layout_build(g, &u, 2, 1, &L), 0);
    assert_int_equal(L.nunits, 5);
    int want[] = {0, 1, 2, 3, 4, 0}, head = -1;
    assert_int_equal(L.nseq, 6);
    for (int p = 0; p < 6; p++)
        assert_int_equal(L.seq[p], want[p]);
    for (int i = 1; i < so_graph_size(g); i++)
        if (!strcmp(so_graph_node(g, i)->name, "lm_head"))
            head = i;
    assert_true(head > 0);
    assert_int_equal(L.unit_of[head], -1);
    assert_int_equal(L.use_lo[head], 5);
    assert_int_equal(L.use_hi[head], 5);
    assert_int_equal(L.tied, L.lo[1]);
    so_strategy_memory mem;
    shard_memory(3, &L, so_graph_nparams(g), 2, 2, 1, &mem);
    /* zero3's two parameter slots hold the two largest untied units (two
     * blocks); the tied table is mapped in the whole buffer while gathered */
    size_t block = L.lo[2] - L.lo[1];
    assert_true(fabs(mem.params - 4.0 * (double)(L.nmine + 2 * block + L.lo[1])) < 1);
    shard_layout_free(&L);
    so_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked_grads),
        cmocka_unit_test(test_chunk_slots),
        cmocka_unit_test(test_gather_wire),
        cmocka_unit_test(test_like_dp),
        cmocka_unit_test(test_grad_slots),
        cmocka_unit_test(test_loaded_before_create),
        cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_prefetch_bound),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_default_chunks),
        cmocka_unit_test(test_auto_units),
        cmocka_unit_test(test_tied_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
