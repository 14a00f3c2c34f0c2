/* The trainer's strategy seam: a strategy owns what happens between "backward
 * has produced the gradients of these parameters" and "the optimizer may
 * step these parameters", so the loop in train.c stays the same for every
 * way of parallelising. Bucketed data parallelism (strategy_dp.c) is the
 * first; docs/ARCHITECTURE.md sketches sharded optimizer state, compression,
 * local SGD and pipeline stages against the same calls. */
#ifndef SCALEOUT_STRATEGY_H
#define SCALEOUT_STRATEGY_H
#include <stddef.h>

#include "scaleout/model.h"
#include "scaleout/optim.h"

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
    /* After the step counter moved on: `step` optimizer steps are done. */
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
} so_strategy_ops;

typedef struct so_strategy {
    const so_strategy_ops *ops;
    void *self;
    /* Ranks whose batches differ: images per step = batch x K x replicas
     * (pipeline stages of one replica share a batch). 0: every rank. */
    int replicas;
    /* 1: this rank computes no loss (an early pipeline stage): the loss the
     * step reports is NaN, and that is no divergence. */
    int no_loss;
} so_strategy;

/* Today's data parallelism: the gradient buffer tiled into buckets in
 * backward order (first small, then bucket_bytes, last small), each averaged
 * over ranks through d->grad_submit as soon as backward closes it (overlap)
 * or after backward; with auto_buckets the plan is re-made after a few steps
 * from measured backward times and d->cost. Broadcasts rank 0's parameters
 * at start unless the run resumes with identical state. d must outlive it. */
int so_strategy_data_parallel(const struct so_dist *d, so_strategy **out);
void so_strategy_free(so_strategy *s); /* accepts NULL */

#endif
