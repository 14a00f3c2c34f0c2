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

/* ---- gradient compression (--compress auto) ----------------------------------------
 * A method priced from measurements: its bytes on the wire over the FP32
 * bytes, how they travel, and its compress (training thread, before the
 * bucket is sent) and decompress (communication thread, after it arrived)
 * seconds per FP32 byte of gradient on this CPU (so_compress_calibrate). A
 * bucket of B bytes then costs, on the communication engine,
 *   allreduce methods:  cost(ratio B) [+ cost(ratio2 B): PowerSGD's Q] + decode B
 *   allgather methods:  cost(ranks ratio B / 2) + decode B   (a ring allgather of
 *                       w bytes per rank moves what a ring allreduce of ranks w / 2 does)
 * and the step adds encode x the whole gradient's bytes to backward. A
 * lossy method also needs more steps to reach a given accuracy: steps_factor
 * is its steps to the target over FP32's (0 or 1: as many), and the pick
 * weighs step seconds x steps_factor, the time to the target. */
typedef struct {
    double ratio;                 /* bytes sent / FP32 bytes (1: none) */
    double ratio2;                /* a second, dependent allreduce (PowerSGD's Q); 0: none */
    int gather;                   /* sent by allgather (top-k sparse, QSGD, sign) */
    double encode_per_byte, decode_per_byte; /* seconds per FP32 byte of gradient */
    double steps_factor;          /* steps to the target accuracy over FP32's (0: 1) */
} so_predict_compress_cost;

/* The predicted step of each of n methods (step_seconds[i]) on the compute
 * and link of so_predict_step; *best = the smallest time to the target
 * (step x steps_factor), where method 0 (none, by convention) wins unless
 * another is at least `margin` (e.g. 0.02) sooner. SO_EINVAL on bad
 * arguments (ranks < 2, no cost). */
int so_predict_compress(const so_predict_compute *c, int ranks, so_predict_cost_fn cost, void *ctx,
                        const so_predict_compress_cost *methods, int n, double margin, double *step_seconds,
                        int *best);

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

/* How long a measurement runs: up to `warmup` untimed training steps, then
 * up to `steps` timed ones. With max_seconds > 0 the warm-up ends after a
 * quarter of it (and one step) and the timing once the timed steps took
 * max_seconds (and at least 2), so a large model answers in seconds.
 * on_step (may be NULL) is called after every step, warm-up included, with
 * the steps done and the most there can be. */
typedef struct {
    int warmup, steps;
    double max_seconds;
    void (*on_step)(void *ctx, int done, int most);
    void *ctx;
} so_predict_run;

/* Measures c's times on this machine: the training steps of `run` (forward,
 * backward, optimizer step) on one batch x/y of m->batch samples. t_fwd and
 * t_bwd (so_graph_size entries) receive the mean seconds per node, *t_other
 * the rest of a step, *timed the steps timed (may be NULL). */
int so_predict_measure(so_model *m, so_optim *opt, const float *x, const int32_t *y, const so_predict_run *run,
                       double *t_fwd, double *t_bwd, double *t_other, int *timed);

/* ---- measuring at a batch that fits, then scaling ---------------------------
 * A prediction at batch B need not build the model at B: a layer's time is
 * assumed linear in its batch (each sample is the same work; true once a
 * layer's work per call dwarfs its fixed cost), so the layers are timed at
 * a batch that fits in memory and takes a fraction of a second, and scaled.
 * A second, smaller batch checks the assumption (so_predict_linearity). */

/* Bytes one process needs to train g at `batch` samples with optim_slots
 * floats of optimizer state per parameter, estimated from the graph before
 * anything is built: weights, gradients and optimizer state, 2.5x every
 * node's fp32 output per sample (the backend's activations, diffs and
 * workspaces measured 1.0x to 2.3x of it across the zoo), the input batch,
 * and 128 MiB for the libraries. Meant as an upper bound. */
double so_predict_train_bytes(const so_graph *g, int batch, int optim_slots);

/* Limits on the batch the layers are timed at. */
typedef struct {
    int target;               /* the batch the prediction is for */
    int optim_slots;          /* as for so_predict_train_bytes */
    double max_bytes;         /* so_predict_train_bytes must stay within this */
    double flops_per_s;       /* this process's expected training FLOP rate (0: no time limit) */
    double step_seconds;      /* with flops_per_s: the longest step wanted */
} so_predict_limits;

/* *measure: the target batch when it fits both limits, else the largest
 * power of two below it that does (at least 1); *check: half of *measure
 * when *measure is below the target and above 1 (the second batch of the
 * linearity check), else 0. SO_ENOMEM, its message naming the bytes, when
 * even batch 1 does not fit in max_bytes. */
int so_predict_choose_batch(const so_graph *g, const so_predict_limits *l, int *measure, int *check);

/* Per-layer times measured at `from` samples scaled to `to` (n nodes each,
 * in place): in proportion, the assumption above. t_other (the optimizer's
 * step, which does not grow with the batch, and the input copy, which does)
 * is extrapolated along the line through (check, other_check) and (from,
 * *t_other) when a check batch was measured (check > 0), never below the
 * measured value nor above it in proportion; without one it is kept. */
void so_predict_scale(int n, double *t_fwd, double *t_bwd, double *t_other, int from, int to, int check,
                      double other_check);

/* How far the layers are from linear in the batch: the per-sample time of
 * every node's forward and backward at batch `lo` over that at batch `hi`
 * (n nodes each; 1: linear; above 1: the larger batch is more efficient per
 * sample, so scaling from hi overestimates the time at a still larger
 * batch a little, and the prediction errs on the slow side). */
double so_predict_linearity(int n, const double *fwd_lo, const double *bwd_lo, int lo, const double *fwd_hi,
                            const double *bwd_hi, int hi);

#endif
