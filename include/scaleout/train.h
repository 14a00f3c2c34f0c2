/* The training loop: epochs of loader batches through forward, backward,
 * the strategy (scaleout/strategy.h: data parallelism through the so_dist
 * hooks by default, so this module never sees MPI) and the optimizer;
 * distributed evaluation; timing of every phase. */
#ifndef SCALEOUT_TRAIN_H
#define SCALEOUT_TRAIN_H
#include <stddef.h>
#include <stdint.h>

#include "scaleout/compress.h"
#include "scaleout/data.h"
#include "scaleout/group.h"
#include "scaleout/model.h"
#include "scaleout/optim.h"
#include "scaleout/strategy.h"

/* How the trainer reaches the other ranks. NULL means one process. so_job
 * fills it from the comm module (src/job/dist.c); tests may fake it. */
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
    /* Blocking element-wise sum over ranks, in place, callable while gradient
     * buckets are in flight (synchronised batchnorm). May be NULL. */
    int (*allsum)(void *ctx, double *v, size_t count);
    /* Predicted seconds of one gradient allreduce of `bytes` with the algorithm
     * the layer would use for it (its fitted cost model). May be NULL. */
    double (*cost)(void *ctx, size_t bytes);
    /* Memory for the gradient buffer that the communication layer reduces
     * in place without copies (registered memory): zero-filled, 64-byte
     * aligned, NULL on failure (message in so_errmsg()). Collective: every
     * rank allocates and frees in the same order with the same sizes.
     * Pass both to so_model_opts (grads_alloc / grads_free). May be NULL. */
    void *(*buf_alloc)(void *ctx, size_t bytes);
    void (*buf_free)(void *ctx, void *p);
    /* The same ranks as a group of the collective vocabulary (scaleout/group.h:
     * non-blocking allreduce, reduce-scatter(v), allgather(v), bcast and
     * messages on F32 / BF16 / F16 / F64 buffers, with handles), and its node
     * and cross-node subgroups. May be NULL (a fake without it). */
    so_group *group;
    /* Blocks until the k-th bucket submitted since the last grad_wait
     * (0-based) is done, the later ones still in flight; the round still
     * ends with grad_wait. *waited = seconds blocked. May be NULL. */
    int (*grad_wait_bucket)(void *ctx, int k, double *waited);
} so_dist;

/* Spans of time the trainer reports after they end (profilers, timelines).
 * id: the micro-batch for DATA/FORWARD/BACKWARD, 0 otherwise. `step` is the
 * 0-based index of the step for the phases inside it, but for STEP and EVAL
 * it is the number of steps done (index + 1): they are reported after the
 * step counter moved on. Recorders rely on this. */
typedef enum {
    SO_SPAN_DATA,        /* waiting for the loader */
    SO_SPAN_FORWARD,
    SO_SPAN_BACKWARD,    /* includes submitting gradient buckets */
    SO_SPAN_COMM_WAIT,   /* blocked on the last gradient bucket (exposed communication) */
    SO_SPAN_OPTIMIZER,
    SO_SPAN_EVAL,
    SO_SPAN_STEP,        /* one whole optimizer step */
    SO_SPAN_KINDS
} so_span_kind;

/* Where training stands after an optimizer step: enough to checkpoint and
 * later continue bit for bit (the loader is deterministic in (seed, epoch,
 * step), the LR schedule in step, the optimizer keeps its own step count). */
typedef struct {
    long step;            /* optimizer steps done (global, counted from 0 at the very start) */
    int epoch;            /* epoch of the NEXT step */
    long epoch_step;      /* steps of that epoch already done (0 right after an epoch ends) */
    int epoch_end;        /* 1 when this step ended an epoch (after its evaluation) */
    long steps_per_epoch;
    so_model *m;
    so_optim *opt;
} so_train_state;

/* Optional observers; every member may be NULL. The library calls them from
 * the training thread only. */
typedef struct so_train_hooks {
    void *arg;
    void (*span)(void *arg, so_span_kind kind, long step, int id, double t0, double t1);
    /* After every optimizer step (after evaluation at an epoch end). A
     * non-zero return stops training with that code (SO_STOP: stop cleanly). */
    int (*step_end)(void *arg, const so_train_state *s);
    /* Just before the optimizer changes the parameters (after grads_done;
     * data parallelism may still be reducing gradient buckets, so read no
     * gradients and make no MPI call here: communicate at step_end): the parameters and optimizer state have not changed since the
     * previous step_end, so a checkpoint can snapshot them in the background
     * during forward and backward and only needs to finish by now. */
    int (*before_update)(void *arg);
} so_train_hooks;

typedef struct so_train_config {
    int epochs;               /* used when steps == 0 */
    long steps;               /* total optimizer steps (0 = epochs x steps per epoch) */
    so_lr_schedule lr;
    int eval_every;           /* evaluate every N epochs; 0 = at the end only; <0 never */
    long eval_steps;          /* > 0: also evaluate after every eval_steps steps inside an epoch (a
                                 finer time to accuracy; reported through so_progress.eval, its time
                                 kept out of the epoch's); 0: epochs only */
    size_t bucket_bytes;      /* gradient bucket size (DDP default 25 MiB) */
    size_t first_bucket_bytes;/* the first bucket is small so communication starts early (1 MiB) */
    int overlap;              /* submit buckets during backward (1) or after it (0) */
    int accumulate;           /* micro-batches per optimizer step (>= 1) */
    int throughput_skip;      /* first steps excluded from images/sec (warm-up) */
    long start_step;          /* resume: optimizer steps already done (parameters, optimizer
                                 state and model RNG restored by the caller) */
    int no_initial_bcast;     /* resume: every rank already holds the same state */
    int sync_bn;              /* batchnorm statistics over the global batch (needs dist->allsum) */
    int auto_buckets;         /* choose bucket sizes from measured backward times and dist->cost */
    float clip_norm;          /* > 0: scale the step's gradient down to this global L2 norm
                                 (torch.nn.utils.clip_grad_norm_); 0: off */
    /* 0: a step whose loss is NaN or infinite stops training with SO_ENUMERIC
     * (before its step_end observers, so no checkpoint is taken of it),
     * naming the step and so_train_first_nonfinite's tensor. 1: train on. */
    int allow_nonfinite;
    const so_train_hooks *hooks;
    /* What happens between gradients ready and the optimizer step
     * (scaleout/strategy.h). NULL: data parallelism over dist when dist is
     * set, else the plain local step. */
    const so_strategy *strategy;
    /* Data parallelism's gradient buckets compressed (scaleout/compress.h;
     * method SO_COMPRESS_NONE: the FP32 average, bit for bit as without),
     * with error feedback on (1), off (0) or the method's default (-1), and
     * the seed of its draws (rand-k, QSGD, PowerSGD's first Q). */
    so_compress_spec compress;
    int error_feedback;
    uint64_t compress_seed;
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
    /* non-NULL after an evaluation inside the epoch (eval_steps): its
     * test_accuracy and test_loss; seconds = the epoch's training so far */
    const so_epoch_stats *eval;
} so_progress;

typedef void (*so_progress_fn)(void *arg, const so_progress *p);

typedef struct so_train_result {
    so_epoch_stats *epochs;
    int nepochs;
    long steps;               /* optimizer steps taken by this call (not counting start_step) */
    int stopped;              /* a step_end hook returned SO_STOP */
    double images_per_sec;    /* global, after throughput_skip steps */
    double final_loss;
    double test_accuracy;     /* last evaluation, -1 if none */
    double wall_seconds;
    /* Per-rank phase totals (seconds) for this rank. */
    double data_wait, forward, backward, comm_exposed, comm_total, optimizer;
    long clipped_steps;       /* clip_norm: steps whose gradient was scaled down */
    double grad_norm;         /* clip_norm: the last step's global gradient norm before clipping */
    double *step_seconds;     /* wall time of every step */
    double *step_loss;        /* mean loss of every step (NAN on ranks that compute none) */
    long nstep_seconds;       /* entries of both */
    int nbuckets;
    int step_buckets;         /* data parallelism's update stepped each bucket as its average arrived */
    /* auto_buckets: the sizes chosen, the simulated end of the last bucket
     * after backward began, and the step after which the plan changed (0: not). */
    size_t first_bucket_bytes, bucket_bytes;
    double predicted_comm_end, measured_backward;
    long bucket_plan_step;
    /* Pipeline stages: seconds this rank spent in forward and backward
     * during the steps counted for images/sec (the measured bubble is
     * 1 - their sum over ranks / (ranks x those steps' seconds)). */
    double pipe_busy;
    /* Set by so_job_train with pipeline stages (else 0): the measured bubble
     * over every rank; the schedule's formula (P-1)/(M+P-1) for equal
     * stages; and the same schedule with the stages' measured busy times
     * (what the imbalance between stages adds). */
    double pipe_bubble, pipe_bubble_formula, pipe_bubble_stages;
    /* Pipeline stages: this rank's activation memory (every micro-batch
     * slot, so_model_activation_bytes) and its buffers for messages. */
    size_t pipe_act_bytes, pipe_edge_bytes;
    /* Pipeline stages: bytes the stages' training messages carried (this
     * rank's during the run; every rank's after so_job_train), and whether
     * the copied tensors travelled as BF16 (docs/PRECISION.md). */
    double pipe_bytes_sent;
    int pipe_wire_bf16;
    /* --compress: this rank's bytes contributed to the gradient collectives
     * and those an FP32 allreduce would have (so_compressor_stats), the
     * seconds spent compressing and decompressing, error feedback on. */
    double compress_bytes_sent, compress_bytes_dense, compress_encode_s, compress_decode_s;
    int compress_error_feedback;
    /* --compress auto: the methods weighed (as so_compress_format spells
     * them; 0 first, "none"), each one's predicted step seconds, its
     * measured bytes ratio and compress + decompress seconds per step on
     * this CPU, the one chosen, and the step after which it was. */
    int compress_auto_n, compress_auto_pick;
    long compress_auto_step;
    char compress_auto_name[SO_COMPRESS_AUTO_MAX][24];
    /* --compress auto resumed from a checkpoint written after the choice:
     * the method it took from there ("" otherwise; nothing weighed again). */
    char compress_auto_resumed[24];
    double compress_auto_predicted[SO_COMPRESS_AUTO_MAX], compress_auto_ratio[SO_COMPRESS_AUTO_MAX],
        compress_auto_overhead[SO_COMPRESS_AUTO_MAX];
    /* ... each one's steps to the target over FP32's (what the pick weighs
     * beside the step) from what its message loses of the gradient,
     * ||g - C(g)|| / ||g||, and the link auto measured: alpha + beta bytes. */
    double compress_auto_steps_factor[SO_COMPRESS_AUTO_MAX], compress_auto_rel_error[SO_COMPRESS_AUTO_MAX];
    double compress_auto_link_alpha, compress_auto_link_beta;
    /* ... the predicted step's terms: forward + backward + other (the
     * optimizer; other alone too), measured over FP32 steps, the same for
     * every method; and each method's compress seconds (training thread) of its
     * overhead; the step's remainder is communication left exposed. */
    double compress_auto_compute, compress_auto_other, compress_auto_encode[SO_COMPRESS_AUTO_MAX];
    /* --sync ssp:S / async (the parameter server, over every rank): workers
     * and servers, the bytes a worker's step moves (pushed and pulled), the
     * staleness of the parameters a worker computed with, in clocks of the
     * slowest worker missing from them (mean, max over every worker step). */
    int ps_workers, ps_servers;
    double ps_bytes_per_step, ps_staleness_mean, ps_staleness_max;
    /* --sync local, diloco, gossip: the payload bytes this rank sent to keep
     * the models together (its part of the averages' allreduces, its
     * messages to gossip neighbours; the synchronous steps' gradients
     * before --local-after included), the averages or gossip rounds done,
     * and the steps between averages (1 for gossip). */
    double sync_bytes_sent;
    long sync_rounds;
    /* --strategy zero1|2|3: this rank's bytes put into the gradients'
     * reduce-scatters (and HYBRID's allreduces across nodes) and into the
     * parameters' allgathers, each unit counted whole at its wire's width. */
    double shard_grad_bytes, shard_gather_bytes;
    int sync_period;
} so_train_result;

/* Runs training. `test` may be NULL. Progress is reported through `progress`
 * (may be NULL); the library itself prints nothing. Rank 0's parameters are
 * broadcast first when dist is set. */
int so_train(so_model *m, so_optim *opt, so_loader *train, so_loader *test, const so_train_config *c,
             const so_dist *dist, so_progress_fn progress, void *progress_arg, so_train_result *out);

/* Evaluates on `test` (every sample once; summed over ranks): accuracy and mean loss. */
int so_evaluate(so_model *m, so_loader *test, const so_dist *dist, double *accuracy, double *loss);
/* This rank's part of so_evaluate, the test loader read on from where it
 * is: adds correct answers, samples and loss x samples to sums. */
int so_evaluate_sums(so_model *m, so_loader *test, double sums[3]);

void so_train_result_free(so_train_result *r);

/* Which buffers so_train_first_nonfinite reads (bits, in its order). */
enum {
    SO_NONFINITE_WEIGHTS = 1u << 0,
    SO_NONFINITE_GRADIENTS = 1u << 1,
    SO_NONFINITE_RUNNING_STATS = 1u << 2,
    SO_NONFINITE_ALL = 7u
};

/* The first tensor of m holding a NaN or an infinity, looked for in the
 * chosen buffers in the order weights, gradients, running statistics: e.g.
 * "weights of conv1.weight (nan at element 0)" in what. 1 if there is one,
 * else 0 (what is ""). A full pass over those buffers: for after a
 * non-finite loss, or once at set-up, not for every step. A check of loaded
 * values leaves the gradients out: reading zero2/zero3's released gradient
 * buffer would map all of it in. */
int so_train_first_nonfinite(const so_model *m, unsigned buffers, char *what, size_t len);

#endif
