/* Scaling prediction for data-parallel training: one rank's measured
 * per-layer compute times, the trainer's real gradient-bucket plan and a
 * cost model of one gradient allreduce at the target scale give the step
 * time, images/s and the communication left exposed after backward. The
 * engine knows no algorithms or links: the caller supplies the cost model
 * (the comm layer's alpha-beta-gamma, see `scaleout predict`). */
#ifndef SCALEOUT_PREDICT_H
#define SCALEOUT_PREDICT_H
#include <stddef.h>

#include "scaleout/model.h"
#include "scaleout/optim.h"
#include "scaleout/strategy.h"

/* What one rank spends per step, measured on this machine (or read from a
 * profile). t_fwd and t_bwd have so_graph_size(g) entries, node 0 unused. */
typedef struct {
    const so_graph *g;
    const double *t_fwd, *t_bwd;  /* seconds per node per step */
    double t_other;               /* per step outside the nodes: optimizer, input copy */
    int batch;                    /* samples per rank per step */
    size_t first_bucket_bytes;    /* the trainer's plan; both 0: its automatic choice */
    size_t bucket_bytes;
} so_predict_compute;

/* Seconds of one allreduce of `bytes` over every rank of the target scale. */
typedef double (*so_predict_cost_fn)(void *ctx, size_t bytes);

typedef struct {
    double step_seconds;          /* forward + max(backward, last bucket done) + other */
    double compute_seconds;       /* forward + backward + other: the step on one rank */
    double comm_seconds;          /* sum of every bucket's allreduce */
    double comm_exposed_seconds;  /* past the end of backward */
    double images_per_sec;        /* all ranks */
    int nbuckets;
    size_t first_bucket_bytes, bucket_bytes; /* the plan used */
} so_predict_point;

/* The step at `ranks` ranks (1: no communication). cost may be NULL when
 * ranks is 1. SO_EINVAL on a bad argument, SO_ENOMEM. */
int so_predict_step(const so_predict_compute *c, int ranks, so_predict_cost_fn cost, void *ctx,
                    so_predict_point *out);

/* ---- per strategy (scaleout/strategy.h): memory and step time ----------------------
 * dp as so_predict_step; the sharded strategies by the same units and order
 * of collectives as strategy_zero.c runs them, on one communication engine
 * (collectives one after another in submission order): zero1/2 the
 * reduce-scatters closed by backward and the allgathers waited for unit by
 * unit in forward; zero3 also gathers before each unit's forward and
 * backward with at most --shard-prefetch units gathered. A reduce-scatter
 * or an allgather costs half the allreduce of the same bytes (the ring's
 * halves). Memory by the strategy's own accounting, without activations. */
typedef struct {
    so_strategy_memory mem;       /* per rank */
    double step_seconds, compute_seconds, comm_seconds, comm_exposed_seconds, images_per_sec;
    int units;                    /* buckets (dp) or units */
} so_predict_strategy_point;

/* nslots: the optimizer's state per parameter (so_optim_nslots). cost: one
 * allreduce over `ranks` ranks (NULL when ranks is 1). */
int so_predict_strategy(const so_predict_compute *c, const so_strategy_kind *k, const so_strategy_config *sc,
                        int ranks, int nslots, so_predict_cost_fn cost, void *ctx, so_predict_strategy_point *out);

/* Measures c's times on this machine: `warmup` untimed then `steps` timed
 * training steps of m (forward, backward, optimizer step) on one batch x/y
 * of m->batch samples. t_fwd and t_bwd (so_graph_size entries) receive the
 * mean seconds per node, *t_other the rest of a step. */
int so_predict_measure(so_model *m, so_optim *opt, const float *x, const int32_t *y, int warmup, int steps,
                       double *t_fwd, double *t_bwd, double *t_other);

#endif
