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
 * first node boundary past its size; small layers are fused). */
int so_bucket_plan_build(const so_graph *g, size_t first_bytes, size_t bucket_bytes, so_bucket_plan *p);
void so_bucket_plan_free(so_bucket_plan *p);

#endif
