/* The training loop: epochs of loader batches through forward, backward,
 * gradient averaging (through the so_dist hooks, so this module never sees
 * MPI) and the optimizer; distributed evaluation; timing of every phase. */
#ifndef SCALEOUT_TRAIN_H
#define SCALEOUT_TRAIN_H
#include <stddef.h>
#include <stdint.h>

#include "scaleout/data.h"
#include "scaleout/model.h"
#include "scaleout/optim.h"

/* How the trainer reaches the other ranks. NULL means one process. The CLI
 * fills it from the comm module; tests may fake it. */
typedef struct so_dist {
    int rank, world;
    void *ctx;
    /* Starts an in-place AVERAGE allreduce of buf[0..count); the trainer does
     * not touch buf until grad_wait returns. Buckets are submitted in the same
     * order on every rank. */
    int (*grad_submit)(void *ctx, float *buf, size_t count, int bucket);
    /* Blocks until every submitted bucket is done; *waited = seconds blocked. */
    int (*grad_wait)(void *ctx, double *waited);
    /* Blocking element-wise sum / max over ranks, in place. */
    int (*sum)(void *ctx, double *v, int n);
    int (*max)(void *ctx, double *v, int n);
    /* Broadcast from rank 0, in place. */
    int (*bcast)(void *ctx, float *buf, size_t count);
} so_dist;

typedef struct {
    int epochs;               /* used when steps == 0 */
    long steps;               /* total optimizer steps (0 = epochs x steps per epoch) */
    so_lr_schedule lr;
    int eval_every;           /* evaluate every N epochs; 0 = at the end only; <0 never */
    size_t bucket_bytes;      /* gradient bucket size (DDP default 25 MiB) */
    size_t first_bucket_bytes;/* the first bucket is small so communication starts early (1 MiB) */
    int overlap;              /* submit buckets during backward (1) or after it (0) */
    int accumulate;           /* micro-batches per optimizer step (>= 1) */
    int throughput_skip;      /* first steps excluded from images/sec (warm-up) */
} so_train_config;

/* Fills the defaults above (25 MiB / 1 MiB buckets, overlap on, 1 micro-batch, skip 10). */
void so_train_defaults(so_train_config *c);

typedef struct {
    int epoch;
    double loss;              /* mean training loss over the epoch */
    double test_accuracy;     /* -1 when not evaluated this epoch */
    double test_loss;
    double seconds;
    double images_per_sec;    /* global (all ranks) */
} so_epoch_stats;

typedef struct {
    int epoch, epochs;
    long step, steps;         /* within the epoch */
    double loss;              /* running mean this epoch */
    double images_per_sec;
    double elapsed;           /* seconds since the epoch began */
    const so_epoch_stats *done; /* non-NULL once per epoch, after evaluation */
} so_progress;

typedef void (*so_progress_fn)(void *arg, const so_progress *p);

typedef struct {
    so_epoch_stats *epochs;
    int nepochs;
    long steps;               /* optimizer steps taken */
    double images_per_sec;    /* global, after throughput_skip steps */
    double final_loss;
    double test_accuracy;     /* last evaluation, -1 if none */
    double wall_seconds;
    /* Per-rank phase totals (seconds) for this rank. */
    double data_wait, forward, backward, comm_exposed, comm_total, optimizer;
    double *step_seconds;     /* wall time of every step */
    long nstep_seconds;
    int nbuckets;
} so_train_result;

/* Runs training. `test` may be NULL. Progress is reported through `progress`
 * (may be NULL); the library itself prints nothing. Rank 0's parameters are
 * broadcast first when dist is set. */
int so_train(so_model *m, so_optim *opt, so_loader *train, so_loader *test, const so_train_config *c,
             const so_dist *dist, so_progress_fn progress, void *progress_arg, so_train_result *out);

/* Evaluates on `test` (every sample once; summed over ranks): accuracy and mean loss. */
int so_evaluate(so_model *m, so_loader *test, const so_dist *dist, double *accuracy, double *loss);

void so_train_result_free(so_train_result *r);

#endif
