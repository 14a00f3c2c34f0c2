/* Gradient buckets for data-parallel training (internal to the train module).
 * Backward produces gradients in reverse node order, and node parameter
 * slices are laid out in node order, so every bucket is ONE contiguous slice
 * [lo, hi) of the flat gradient buffer: no packing copies are ever needed. */
#ifndef SCALEOUT_TRAIN_BUCKETS_H
#define SCALEOUT_TRAIN_BUCKETS_H
#include <stddef.h>

#include "scaleout/graph.h"

typedef struct {
    size_t lo, hi;   /* float offsets into the gradient buffer */
} so_bucket;

typedef struct {
    so_bucket *b;
    int n;
    int *closes;     /* per node: index of the bucket that is complete once this
                        node's gradients are ready, or -1 */
} so_bucket_plan;

/* Groups parameterised nodes in backward order: the first bucket holds at
 * least first_bytes, later ones at least bucket_bytes (a bucket closes at the
 * first node boundary past its size; small layers are fused). The last one
 * is small too: when the remainder exceeds first_bytes, its lowest nodes (at
 * least first_bytes) become a bucket of their own, so only that little waits
 * for the end of backward. */
int so_bucket_plan_build(const so_graph *g, size_t first_bytes, size_t bucket_bytes, so_bucket_plan *p);
void so_bucket_plan_free(so_bucket_plan *p);
/* The buckets' first offsets in flat order, lo[0..p->n): the plan holds
 * them in backward order, highest first. */
void so_bucket_plan_lows(const so_bucket_plan *p, size_t *lo);

/* Predicted seconds of one gradient allreduce of `bytes` (the communication
 * layer's cost model, with the algorithm it would use for that size). */
typedef double (*so_comm_cost_fn)(void *ctx, size_t bytes);

/* When the last bucket of plan p finishes if backward spends t_bwd[i] seconds
 * in node i and buckets are reduced one after another as soon as they close:
 * start_k = max(ready_k, end_{k-1}), end_k = start_k + cost(bytes_k). Returns
 * the end relative to the start of backward. */
double so_bucket_plan_simulate(const so_graph *g, const so_bucket_plan *p, const double *t_bwd,
                               so_comm_cost_fn cost, void *ctx);

/* Joint choice of the first and the regular bucket size (from 64 KiB to
 * 256 MiB, powers of two and DDP's 25 MiB) minimising the simulated end, with
 * the cost model choosing the algorithm per size. The plan and the chosen
 * sizes come back; *predicted is its simulated end. */
int so_bucket_plan_auto(const so_graph *g, const double *t_bwd, so_comm_cost_fn cost, void *ctx,
                        so_bucket_plan *p, size_t *first_bytes, size_t *bucket_bytes, double *predicted);

#endif
