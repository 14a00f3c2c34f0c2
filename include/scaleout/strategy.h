/* The trainer's strategy seam: a strategy owns what happens between "backward
 * has produced the gradients of these parameters" and "the optimizer may
 * step these parameters", so the loop in train.c stays the same for every
 * way of parallelising. Built on it: bucketed data parallelism
 * (strategy_dp.c), ZeRO-1/2/3 (strategy_zero.c), the pipeline (src/pipe).
 *
 * Adding a strategy (compression, local SGD, ...): one file with a static
 * so_strategy_ops and an `so_strategy_kind` (name, model_opts, create) listed
 * in src/train/strategy.c's table; create makes the so_strategy and the
 * optimizer it steps (so_strategy.opt, e.g. so_optim_create over the ranges
 * it updates); memory says what the rank holds (--max-memory, --json); state
 * describes the part of the parameters and optimizer slots it keeps, so
 * checkpoints save and re-shard it (NULL: the whole model and optimizer);
 * its collectives go through the so_group vocabulary (scaleout/group.h) of
 * so_strategy_config.group, non-blocking with continuations, tagged from
 * SO_STRATEGY_TAG so the job counts their time. (so_state_layout's segments
 * are the parameters and optimizer slots; a strategy's per-rank buffers,
 * such as error-feedback residuals, go through rank_state.) */
#ifndef SCALEOUT_STRATEGY_H
#define SCALEOUT_STRATEGY_H
#include <stddef.h>

#include "scaleout/compress.h"
#include "scaleout/dtype.h"
#include "scaleout/model.h"
#include "scaleout/optim.h"
#include "scaleout/sync.h"

struct so_train_config;
struct so_train_result;
struct so_dist;
struct so_loader;

/* The loop's side of a step a strategy runs itself. next: the step's next
 * micro-batch from the loader (the loop times the wait); 1, or <= 0 at the
 * end of the epoch / on error, as so_loader_next. pass: a forward
 * (backward = 0) or backward of micro-batch k ran from t0 to t1 (phase
 * totals and timelines). */
typedef struct {
    int (*next)(void *arg, const float **x, const int32_t **y, int *n);
    void (*pass)(void *arg, int backward, int k, double t0, double t1);
    void *arg;
} so_step_io;

/* Strategies by name (so_strategy_create): "dp" (data parallelism; on one
 * process the plain local step), "zero1", "zero2", "zero3" (sharded data
 * parallelism, docs/PARALLELISM.md). A strategy made so creates the
 * optimizer it steps (so_strategy.opt: sized to what this rank steps), and
 * says what this rank holds (memory) and which part of the whole-model
 * state it keeps (state, for checkpoints). */
typedef struct so_strategy_config {
    const struct so_dist *dist;   /* the ranks (NULL: one process) */
    struct so_group *group;       /* the same ranks' collective vocabulary (scaleout/group.h); sharded
                                     strategies need it with more than one rank */
    so_optim_config optim;        /* the optimizer the strategy creates */
    size_t bucket_bytes;          /* dp's gradient buckets; zero1/2's units by default */
    size_t first_bucket_bytes;
    int auto_buckets;             /* --bucket-mb auto */
    int accumulate;               /* micro-batches per step (for the memory accounting) */
    /* Sharded strategies: what is gathered and reduced together ("auto",
     * "layer", "block", or a size in MiB as text; NULL: zero1/2 the buckets,
     * zero3 "auto"), at most this many units gathered at once (zero3, >= 1), and
     * sharding within each node only, replicating across nodes (HYBRID_SHARD). */
    const char *shard_unit;
    int shard_prefetch;
    int shard_node;
    /* zero3: the wire of the parameters' allgathers (F32: as they are; BF16
     * or F16: each rank's block rounded once and gathered at half the bytes,
     * so forward and backward compute with the rounded weights on every rank
     * while the optimizer steps the FP32 shard: FSDP's param_dtype). */
    so_dtype shard_gather;
    /* dp: gradient compression (scaleout/compress.h; method NONE: off), made
     * at create so its state can be checkpointed and restored before the
     * first step. error_feedback as so_compressor_config. */
    so_compress_spec compress;
    int error_feedback;
    uint64_t compress_seed;
    /* The parameter server ("ps": --sync ssp:S or async): the method and the
     * number of ranks serving the parameters (the last ps_ranks ranks). */
    so_sync_spec sync;
    int ps_ranks;
    /* Relaxed consistency (--sync, scaleout/sync.h; so_strategy_sync_lookup
     * finds its strategy): the method, the synchronous steps before local
     * SGD begins (post-local SGD), DiLoCo's outer step. */
    long local_after;
    float outer_lr, outer_momentum;
} so_strategy_config;

/* The tags of the sharded strategies' collectives (so_group_opts.tag: the
 * communication thread's operation log): SO_STRATEGY_TAG + unit. */
#define SO_STRATEGY_TAG (1 << 24)

/* Bytes this rank holds for the model's state by the strategy's accounting. */
typedef struct {
    double params, grads, optimizer;
    double messages;  /* the strategy's own buffers: gathered units, gradient buckets in flight */
} so_strategy_memory;

/* Which part of the whole-model state this rank keeps, for checkpoints. The
 * whole-model state is the parameters followed by each optimizer slot,
 * nparams floats apiece (segment 0: parameters, 1 + k: slot k). Units
 * [units[u], units[u+1]) tile [0, nparams); the shard group has `shards`
 * ranks and each unit is cut into `shards` blocks (so_comm_block's rule:
 * the first n % shards one element longer), block k kept by the group's
 * rank k; with `replicas` > 1 groups (HYBRID_SHARD) hold the same blocks and
 * replica n writes piece n of each block cut again in `replicas`. World rank
 * = replica x shards + k. */
typedef struct so_state_layout {
    int nunits;
    const size_t *units;      /* nunits + 1 element boundaries */
    int shards, replicas;
    int shard, replica;       /* this rank's */
    /* Elements [lo, lo + n) of segment seg out of (get: within this rank's
     * blocks) or into (set: only the part within its blocks is kept) the
     * strategy's buffers. */
    void (*get)(void *ctx, int seg, size_t lo, size_t n, float *dst);
    void (*set)(void *ctx, int seg, size_t lo, size_t n, const float *src);
    void *ctx;
} so_state_layout;

/* State a strategy keeps per rank beyond the parameters and optimizer slots
 * (data parallelism's --compress: the error-feedback residuals and
 * PowerSGD's warm-start Q), saved in this rank's section of a checkpoint.
 * A resume restores it only when the checkpoint's tag and world size are
 * this run's; otherwise the strategy starts it afresh (one logged line), or,
 * when `required` (each rank's own model: --sync local, gossip, ps), the
 * resume is refused (SO_EINVAL). */
typedef struct so_rank_state {
    char tag[96];         /* what the bytes are ("compress topk:0.01 ef"), no spaces */
    uint64_t bytes;       /* this rank's, the same on every rank */
    int required;         /* 1: no resume without it */
    void (*get)(void *ctx, void *dst);        /* at a checkpoint's step end */
    void (*set)(void *ctx, const void *src);  /* on resume, before the first step */
    void *ctx;
} so_rank_state;

/* Called by so_train, in this order per optimizer step of K micro-batches:
 *   backward_begin(k, K) before each micro-batch's backward,
 *   grads_ready(node, ...) from inside backward as nodes finish,
 *   grads_done once after the last backward,
 *   (the before_update observers), update, then step_done.
 * Every member but grads_done may be NULL. Return 0 or an SO_E* code. */
typedef struct so_strategy_ops {
    const char *name;
    /* Before the first step: the model, the run's configuration and result
     * (for the strategy's own fields, e.g. the bucket plan). */
    int (*start)(void *self, so_model *m, const struct so_train_config *c, struct so_train_result *r);
    void (*backward_begin)(void *self, int k, int K);
    /* Backward produced node `node`'s gradients: floats [off, off + n) of
     * m->grads. Called from inside so_model_backward; an error is kept and
     * ends the step after backward. */
    int (*grads_ready)(void *self, int node, size_t off, size_t n);
    /* After the step's last backward: when it returns, m->grads holds what
     * this rank steps with. *exposed = seconds spent blocked here. */
    int (*grads_done)(void *self, double *exposed);
    /* The update of the parameters from the gradients (already divided by
     * K). NULL: so_optim_step over the whole flat buffer. */
    int (*update)(void *self, so_optim *opt, float *params, float *grads, float lr);
    /* After the update: `step` optimizer steps are done (timed as part of the
     * step: a model average or gossip round here counts in its seconds). */
    int (*step_done)(void *self, long step);
    /* After the last step, on success or failure. */
    void (*finish)(void *self);
    /* Pipeline schedules: the forwards and backwards of the step's K
     * micro-batches in the strategy's own order instead of the loop's one
     * after the other (backward_begin and grads_ready are then the
     * strategy's own business). *loss = the step's mean loss, or NAN on a
     * rank that computes none (an early stage). NULL: the loop's order. */
    int (*run_step)(void *self, int K, const so_step_io *io, double *loss);
    /* Evaluation when forward needs the other ranks (pipeline stages):
     * sums[0..3) = this rank's correct answers, samples and loss x samples
     * (0 where it computes none); the loop sums them over ranks. NULL:
     * so_evaluate on the whole model. */
    int (*evaluate)(void *self, struct so_loader *test, double sums[3]);
    /* Frees self (so_strategy_free); NULL: free(self). */
    void (*destroy)(void *self);
    /* The squared L2 norm of the whole model's gradient as the update will
     * use it (--clip-norm), after grads_done: a strategy that steps a shard
     * sums its shard's over the ranks holding the other shards. NULL: the
     * loop sums m->grads over the ranks and divides by `replicas` (data
     * parallelism and pipeline stages: every replica holds the same). */
    int (*grad_sqnorm)(void *self, double *sq);
    /* Multiplies the gradient the update will use by f (1/K after K
     * micro-batches; the clipping factor). NULL: m->grads. */
    int (*grad_scale)(void *self, float f);
    /* The ranks to reach from start on: so_train passes its own so_dist
     * (which a profiler may have wrapped) before start. May be NULL. */
    void (*use_dist)(void *self, const struct so_dist *d);
    /* This rank's memory (so_strategy_memory_use); NULL: the whole model's. */
    void (*memory)(void *self, so_strategy_memory *out);
    /* The part of the state this rank keeps (checkpoints); NULL: all of it,
     * in the model and the optimizer. */
    const so_state_layout *(*state)(void *self);
    /* Makes m->params the whole model's parameters (a sharded strategy
     * gathers them; collective) for a caller that reads them all, until
     * the next step. NULL: they are. */
    int (*params_whole)(void *self);
    /* The per-rank state beyond the model and optimizer (checkpoints);
     * NULL, or NULL returned: none. */
    const so_rank_state *(*rank_state)(void *self);
} so_strategy_ops;

/* How far --sync async lets a worker run ahead of the slowest. Its method
 * sets no bound, but a stop on a signal needs one: every rank stops after
 * the same step, which the stop agreement tells a rank that many steps
 * after it was posted. */
#define SO_PS_ASYNC_LEAD 16

typedef struct so_strategy {
    const so_strategy_ops *ops;
    void *self;
    /* Ranks whose batches differ: images per step = batch x K x replicas
     * (pipeline stages of one replica share a batch). 0: every rank. */
    int replicas;
    /* 1: this rank computes no loss (an early pipeline stage): the loss the
     * step reports is NaN, and that is no divergence. */
    int no_loss;
    /* Steps a rank may run ahead of the slowest (the same on every rank;
     * 0: lockstep). The job's step-end agreements complete that many steps
     * after they are posted, so they do not hold a fast rank back sooner:
     * the parameter server's ssp:S (S) and async (SO_PS_ASYNC_LEAD). */
    int lead;
    /* The optimizer it steps, owned (so_strategy_create); NULL: the caller's. */
    so_optim *opt;
} so_strategy;

typedef struct so_strategy_kind {
    const char *name;
    const char *summary;
    int zero_stage;               /* what it shards: 0 nothing, 1 optimizer state, 2 + gradients, 3 + parameters */
    /* Fills the allocators of the model's buffers the strategy wants in o
     * (so_model_opts' params_alloc / grads_alloc and their contexts, which
     * must outlive the model); NULL: the defaults. */
    int (*model_opts)(const so_strategy_config *c, so_model_opts *o);
    /* The strategy for model m (built with model_opts), and its optimizer.
     * m's parameters and buffers hold their initial values by then (the
     * model's init, or weights the caller loaded: --init-from): a strategy
     * may take them at create (zero3 keeps only its blocks), and values
     * written into m->params after create need not reach it. */
    int (*create)(const so_strategy_config *c, so_model *m, struct so_strategy **out);
} so_strategy_kind;

/* The kind named `name` ("data" is dp's old name); SO_EINVAL naming the
 * choices otherwise. so_strategy_kind_at(i) walks the registry (NULL past
 * the end). */
int so_strategy_lookup(const char *name, const so_strategy_kind **out);
const so_strategy_kind *so_strategy_kind_at(int i);
/* The strategy that runs --sync method m (local, diloco, gossip); SO_EINVAL
 * for sync (that is "dp") and methods this build runs elsewhere. */
int so_strategy_sync_lookup(so_sync_method m, const so_strategy_kind **out);
/* model_opts then create, for callers that build the model between them. */
int so_strategy_create(const so_strategy_kind *k, const so_strategy_config *c, so_model *m, struct so_strategy **out);
/* The wire a sharded strategy (zero1/2/3, named `strategy`) reduces its
 * gradients on under --compress cs: F32 for none, F16/BF16 for fp16/bf16;
 * SO_EINVAL naming the flag for any other method or error_feedback > 0
 * (its residual would be the whole gradient on every rank). */
int so_strategy_zero_wire(const so_compress_spec *cs, int error_feedback, const char *strategy, so_dtype *wire);

/* What the strategy's rank holds; without a memory op the whole model's
 * parameters, gradients and optimizer state. */
void so_strategy_memory_use(const struct so_strategy *s, const so_model *m, so_strategy_memory *out);

/* Today's data parallelism: the gradient buffer tiled into buckets in
 * backward order (first small, then bucket_bytes, last small), each averaged
 * over ranks through d->grad_submit as soon as backward closes it (overlap)
 * or after backward; with auto_buckets the plan is re-made after a few steps
 * from measured backward times and d->cost. Broadcasts rank 0's parameters
 * at start unless the run resumes with identical state. d must outlive it. */
int so_strategy_data_parallel(const struct so_dist *d, so_strategy **out);
void so_strategy_free(so_strategy *s); /* accepts NULL; frees s->opt too */

#endif
