/* scaleout/job.h: the library's entry to a training run, on one process or as
 * one rank of an MPI job. so_job_create does the whole set-up in the order
 * that makes collective allocations and cross-rank agreements safe; the CLI's
 * `train` and `bench` commands are thin layers over it, and so is
 * examples/train_lenet5.c.
 *
 * Every call below is collective when the job has more than one rank: every
 * rank calls it, in the same order. Errors: 0 or a negative SO_E* code with a
 * message in so_errmsg(); messages name options as the CLI spells them
 * (--model, --ckpt-every, ...), field names here follow the same words. */
#ifndef SCALEOUT_JOB_H
#define SCALEOUT_JOB_H
#include <stddef.h>

#include "scaleout/predict.h"
#include "scaleout/train.h"

typedef struct so_job so_job;

/* Checkpointing (scaleout/ckpt.h, docs/CHECKPOINT.md). Off unless every or
 * resume is set. */
typedef struct {
    const char *every;      /* "N" steps, "Nepoch", or "auto" (Daly's interval from mtbf_hours) */
    const char *dir;        /* shared level */
    const char *local;      /* node-local level (node<id>/ under it) */
    const char *resume;     /* "auto" (newest complete checkpoint) or a checkpoint's path */
    const char *mode;       /* "scaleout" (sharded, asynchronous) or "naive" (rank 0 writes) */
    const char *on_error;   /* "continue" or "stop" when a checkpoint fails */
    const char *init_from;  /* initial parameters from a .safetensors file */
    int keep;               /* complete checkpoints kept per level */
    int flush_every;        /* every M-th checkpoint is flushed to dir */
    float mtbf_hours;       /* for every = "auto" */
} so_job_ckpt_config;

/* The profiler (docs/PROFILING.md). Off unless dir is set or the environment
 * names SCALEOUT_TIMELINE. */
typedef struct {
    const char *dir;        /* DIR/timeline.json and DIR/profile.json */
    const char *detail;     /* "layer", "block" or "step" */
    const char *steps;      /* timeline window "A:B" or "all" */
} so_job_prof_config;

typedef struct {
    /* what is trained, on what */
    const char *model;           /* zoo name (scaleout/zoo.h) */
    const char *dataset;         /* fashion-mnist, mnist, cifar10, synthetic */
    const char *data_dir;
    int synthetic_samples;       /* synthetic set size (0: 32 batches) */
    int batch;                   /* samples per step on each rank */
    int augment;                 /* random crop (pad 4) and horizontal flip */
    int prefetch;                /* batches prepared ahead on a background thread */
    long seed;
    const char *backend;         /* onednn or ref */
    const char *conv_algo;       /* auto, direct or winograd */
    const char *precision;       /* fp32, bf16 or auto (so_precision_resolve) */
    int threads;                 /* compute threads per process */
    int pin_threads;             /* pin them one per core */
    /* optimizer and learning rate */
    const char *optimizer;       /* sgd, momentum, nesterov, adagrad, rmsprop, adam, adamw */
    float lr, momentum, weight_decay;
    const char *lr_schedule;     /* constant, step, cosine */
    float warmup_epochs;         /* linear warm-up, from lr/world (or lr/10 on one rank) */
    float lr_step_epochs, lr_gamma; /* step schedule */
    int scale_lr;                /* multiply lr by the number of ranks (Goyal et al.) */
    /* the loop */
    int epochs;
    long steps;                  /* optimizer steps (0: epochs) */
    int eval_every;              /* epochs between evaluations; 0 at the end only; < 0 never */
    long eval_steps;             /* > 0: also evaluate every this many steps inside an epoch */
    int accumulate;              /* micro-batches per optimizer step */
    float clip_norm;             /* > 0: clip the gradient to this global L2 norm (every strategy) */
    int warmup_steps;            /* first steps left out of images/sec */
    int allow_nonfinite;         /* 1: train on through a NaN or infinite loss, and from --init-from weights
                                    that hold one (0: the step stops training, the weights the set-up) */
    /* how ranks cooperate (scaleout/strategy.h): "dp" (data parallelism;
     * "data" is its old name), "zero1", "zero2", "zero3" (sharded data
     * parallelism); data parallelism's options follow */
    const char *strategy;
    const char *shard_unit;      /* zero*: "auto", "layer", "block" or a size in MiB (NULL: the strategy's default) */
    int shard_prefetch;          /* zero3: units gathered at once, at most (>= 1) */
    const char *shard_gather;    /* zero3: the parameters' allgather wire, "fp32" (as they are), "bf16" or "fp16" */
    const char *shard_group;     /* zero*: "all" (shard over every rank) or "node" (HYBRID_SHARD) */
    const char *allreduce;       /* gradient allreduce algorithm (scaleout/comm.h names) */
    double bucket_mb;            /* gradient bucket size in MiB; < 0: chosen from the cost model */
    float first_bucket_mb;       /* the small first (and last) bucket */
    int overlap;                 /* allreduce during backward (1) or after it (0) */
    int sync_bn;                 /* batchnorm statistics over the global batch */
    const char *compress;        /* --compress METHOD (so_compress_parse; "none" or NULL: FP32) */
    int error_feedback;          /* 1 on, 0 off, -1 the method's default */
    /* relaxed consistency (scaleout/sync.h, docs/COMPRESSION.md) */
    const char *sync;            /* --sync METHOD (so_sync_parse; NULL or "sync": gradients averaged every step) */
    long local_after;            /* local: steps trained synchronously first (post-local SGD) */
    float outer_lr;              /* diloco: the outer Nesterov step's learning rate */
    float outer_momentum;        /* diloco: the outer step's momentum */
    int ps_ranks;                /* ssp, async: ranks that serve the parameters (1 <= K < world) */
    double stall_warning_s;      /* report a collective stuck this long (0: off) */
    double comm_timeout_s;       /* abort the job when a collective is stuck this long (0: off) */
    int ranks_per_node;          /* > 0: emulate nodes of this many ranks */
    /* pipeline stages x data-parallel replicas (docs/PARALLELISM.md); off
     * when pipeline_stages <= 1 */
    int pipeline_stages;         /* P: the world splits into P stages x world/P replicas */
    int microbatches;            /* M per step; batch stays per replica, each micro-batch batch/M */
    const char *schedule;        /* gpipe, 1f1b or interleaved */
    int virtual_stages;          /* v: model chunks per pipeline rank (interleaved; <= 1: one) */
    const char *partition;       /* auto (= time), time, memory, or a list of stage starts */
    const char *placement;       /* stage-major (a replica's stages on neighbouring ranks) or replica-major */
    double max_memory;           /* > 0: bytes every rank may hold by the trainer's accounting
                                    (so_job_memory_use), checked at set-up; with stages also the cap
                                    --partition auto cuts within */
    so_job_ckpt_config ckpt;
    so_job_prof_config prof;
    /* The caller's observers, called after the library's own (may be NULL). */
    const so_train_hooks *hooks;
    /* Recorded in profile.json (e.g. the build's git commit); may be NULL. */
    const char *build_id;
    /* Token data (dataset "tokens": llm.c's shards in data_dir, scaleout/data.h) */
    int seq_len;                 /* T: tokens per sequence (the model's context must hold it) */
    const char *shuffle;         /* training order: "on" (random windows; images: shuffled),
                                    "off" (llm.c's order; images: in file order), "llmc" (llm.c's shuffle) */
    int eval_batches;            /* > 0: evaluate on this many batches per rank (llm.c's val_num_batches) */
    /* Image data sets, dataset "imagefolder" or "tfrecord" (scaleout/data.h,
     * docs/DATA.md): torchvision's transforms and how they are streamed. */
    struct {
        int image_size;          /* output side (224) */
        int resize;              /* eval: shorter side before the centre crop (0: image_size * 256 / 224) */
        float scale_min, scale_max; /* RandomResizedCrop's area range */
        int label_offset;        /* tfrecord: subtracted from stored labels (1) */
        int no_augment;          /* train with the eval transform */
        int decode_threads;      /* threads decoding per rank */
        const char *dct_scale;   /* JPEG DCT scaling: train, all or off */
        int strict;              /* an unreadable image stops the run */
        const char *stage_local; /* node-local copy of what each rank reads (NULL: off) */
        const char *index;       /* the index file (NULL: DATA_DIR/scaleout.idx when present) */
    } image;
    const char *init;            /* parameter initialisation: torch, he or glorot */
} so_job_config;

/* The defaults of `scaleout train`: LeNet-5 on Fashion-MNIST from
 * /usr/share/datasets/fashion-mnist, batch 64, momentum SGD at lr 0.01,
 * one epoch, allreduce auto, 25 MiB buckets (first 1 MiB), overlap on. */
void so_job_defaults(so_job_config *c);

/* Starts MPI when a launcher (mpirun, mpiexec, srun) started this process,
 * then loads the data, builds the model, optimizer and loaders for this rank,
 * checks that every rank has the same configuration, restores a checkpoint
 * when asked, and attaches the checkpoint, stop and profiler observers. A
 * failure on one rank is agreed on by all: every rank returns an error, and
 * so_job_failed_elsewhere() tells the ranks that only learnt of it.
 * *out is set whenever MPI was started, even on failure: free it on every
 * rank with so_job_free. */
int so_job_create(const so_job_config *c, so_job **out);

/* Trains. progress (may be NULL) is called on every rank; out is filled on
 * every rank (free it with so_train_result_free). A failure here may leave
 * other ranks inside a collective: call so_job_abort when world > 1. On
 * success the checkpoints in flight are complete and the profile is written. */
int so_job_train(so_job *j, so_progress_fn progress, void *progress_arg, so_train_result *out);

/* Collective clean-up: frees the model, data and observers, and finalises MPI
 * when so_job_create started it. Accepts NULL. */
void so_job_free(so_job *j);

/* This process's rank and the number of ranks (0 and 1 without MPI). */
int so_job_rank(const so_job *j);
int so_job_world(const so_job *j);
/* Whether the last error came from another rank (this rank's set-up was fine). */
int so_job_failed_elsewhere(const so_job *j);
/* The end of a job that cannot go on: with more than one rank, prints
 * "[rank R] fatal: scaleout msg" and aborts every rank with exit status code
 * (MPI_Abort); on one process it returns and the caller reports msg. The one fatal path: other ranks may be inside a
 * collective that will never complete. */
void so_job_abort(so_job *j, int code, const char *msg);

/* What the training loader did (so_loader_get_stats; zeros for data sets
 * held in memory), this rank. */
void so_job_data_stats(const so_job *j, so_loader_stats *out);

/* The parts, for callers that look inside (reports, benchmarks). */
so_model *so_job_model(const so_job *j);
so_optim *so_job_optim(const so_job *j);
so_loader *so_job_train_loader(const so_job *j);
so_loader *so_job_test_loader(const so_job *j);   /* NULL when the data set has no test split */
/* The training (train = 1) or test split; NULL for a missing test split. */
const so_dataset *so_job_dataset(const so_job *j, int train);
/* The whole model's graph (with pipeline stages so_job_model holds a slice). */
const so_graph *so_job_graph(const so_job *j);
/* The strategy the job trains with (--strategy; NULL with pipeline stages). */
const so_strategy *so_job_strategy(const so_job *j);
/* The hooks the trainer reaches other ranks through (NULL on one rank). */
const so_dist *so_job_dist(const so_job *j);
/* The "key=value" lines every rank was checked to agree on. */
const char *so_job_config_text(const so_job *j);

/* Pipeline layout of this rank: 0 with pipeline stages (stage, stages,
 * replica, replicas set), -1 without. World rank 0 holds the last stage. */
int so_job_pipeline(const so_job *j, int *stage, int *stages, int *replica, int *replicas);
/* With pipeline stages: the first node of each stage of the model (up to
 * max written; stages x virtual stages of them, the count returned) and,
 * on rank 0, how the cuts were chosen: "measured time", "measured time
 * within --max-memory", "FLOPs within --max-memory (...)" (timing the whole
 * model would break the cap), "memory", "--partition's list", "the
 * checkpoints' partition" ("" on other ranks). -1 without stages. */
int so_job_pipeline_cuts(const so_job *j, int *first, int max, const char **basis);
/* After so_job_train with pipeline stages: stage s's activation memory
 * (every micro-batch in flight) and its message buffers, in bytes, the
 * largest over its replicas; -1 without pipeline stages. */
int so_job_stage_memory(const so_job *j, int stage, double *act_bytes, double *edge_bytes);
/* The whole model's parameters on rank 0 (*out malloc'ed, *n floats; the
 * model's own copy without pipeline stages), NULL elsewhere. Collective. */
int so_job_gather_params(so_job *j, float **out, size_t *n);

/* What this rank holds, by the trainer's own accounting (bytes): weights,
 * gradients, optimizer state, the backend's activation, diff and staging
 * buffers of every micro-batch in flight, and a pipeline stage's message
 * buffers. Not counted: the libraries' own code and data, the data set. */
typedef struct {
    double params, grads, optimizer, activations, messages, total;
    int slots;                   /* micro-batches in flight */
} so_job_memory;
void so_job_memory_use(const so_job *j, so_job_memory *out);

/* Element-wise sum over ranks, in place (per-rank figures for a report). */
int so_job_sum(so_job *j, double *v, int n);
/* Seconds the gradient engine spent in collectives on this rank. */
double so_job_comm_seconds(const so_job *j);
/* How many gradient allreduces ran hier's zero-copy path on the registered
 * gradient buffer, and how many copied through its window (this rank). */
void so_job_hier_paths(const so_job *j, unsigned long long *zero_copy, unsigned long long *copied);
/* How many of hier's steps across nodes went over scaleout's TCP ring and how
 * many over MPI point-to-point (this rank; both 0 on one node). */
void so_job_hier_across(const so_job *j, unsigned long long *tcp, unsigned long long *mpi);

/* ---- per-layer times for predictions (scaleout predict, scaleout plan) ------- */
/* Per-node forward and backward seconds of training steps of the job's
 * model on a fixed synthetic batch (so_predict_measure with `run`;
 * so_graph_size entries each; *t_other the rest of a step, *timed the steps
 * timed, may be NULL). On one process; it changes the parameters. */
int so_job_measure_layers(so_job *j, const so_predict_run *run, double *t_fwd, double *t_bwd, double *t_other,
                          int *timed);

/* How so_job_measure_model times a model's layers for a batch it may not
 * be able to build here. */
typedef struct {
    int batch;                  /* the batch the times are for */
    int measure_batch;          /* > 0: time the layers at this batch (refused when it needs more memory
                                   than is available); 0: the largest that fits half the available memory
                                   and a step of ~step_seconds (so_predict_choose_batch) */
    double step_seconds;        /* for the choice (default 2) */
    double max_bytes;           /* > 0: the memory the measurement may take (--measure-memory), instead of
                                   half the available memory; a batch 1 over it is an input error */
    int check;                  /* when scaling: also time half the measured batch (the linearity check) */
    so_predict_run run;         /* steps per batch timed (its on_step is set here) */
    /* One line at a time of what is being measured (rank 0 only; may be NULL). */
    void (*progress)(void *ctx, const char *line);
    void *progress_ctx;
} so_job_measure_config;

/* Per-layer times at `batch` and what was measured to get them. */
typedef struct so_job_layer_times {
    int n;                      /* nodes (so_graph_size) */
    double *t_fwd, *t_bwd;      /* seconds per node and step at the config's batch (owned) */
    double t_other;             /* the rest of a step (optimizer, input copy) */
    int measured_batch;         /* the batch the layers were timed at */
    int check_batch;            /* the second, smaller batch timed (0: none) */
    int timed_steps;            /* steps timed at measured_batch */
    double linearity;           /* so_predict_linearity(check_batch, measured_batch); 0 without */
    double batch_bytes;         /* so_predict_train_bytes at the config's batch */
    double measure_bytes;       /* ... at measured_batch */
    double avail_bytes;         /* so_mem_available() before the measurement */
    double act_bytes;           /* the backend's activation buffers (so_model_activation_bytes) at
                                   measured_batch, scaled to the config's batch */
} so_job_layer_times;

/* Times the layers of c's model (its model, backend, optimizer and
 * threads; the data is synthetic) at a batch that fits in memory, scaled in
 * proportion to mc->batch (the assumption of scaleout/predict.h, checked
 * on a second batch when mc->check). Memory is checked before anything is
 * built: SO_ENOMEM with the bytes when not even batch 1 fits, SO_EINVAL
 * naming --measure-batch when that does not. Free *out with
 * so_job_layer_times_free. */
int so_job_measure_model(const so_job_config *c, const so_job_measure_config *mc, so_job_layer_times *out);
void so_job_layer_times_free(so_job_layer_times *t);
/* The graph of c->model as a job of c builds it on synthetic data (a GPT-2
 * at c->seq_len tokens, at most its context), finalized; the caller
 * destroys it. SO_EINVAL naming --model. */
int so_job_model_graph(const so_job_config *c, so_graph **out);

/* ---- checkpoints ------------------------------------------------------------- */
/* *step where training starts; *found = 1 when a checkpoint was restored.
 * Returns 0 when the job was asked to resume, else -1. */
int so_job_resumed(const so_job *j, long *step, int *found);
/* Whether the job writes checkpoints. */
int so_job_writes_checkpoints(const so_job *j);
typedef struct {
    long complete, flushed, failed;
    double stall_total_s, stall_max_s;     /* slowest rank */
    double write_mb_s, flush_mb_s;         /* rank 0 */
    double own_write_mb_s, partner_mb_s;   /* rank 0: own shard, partner copy */
    double background_cpu_s;               /* mean per rank */
    double drain_s;                        /* waiting at exit for checkpoints in flight (slowest rank) */
    long daly_interval;                    /* steps, with every = "auto"; else 0 */
    int stopped_by_failure;                /* on_error "stop" ended training after a failed checkpoint */
} so_job_ckpt_summary;
/* After so_job_train; 0, or -1 when the job does not checkpoint. */
int so_job_ckpt_stats(const so_job *j, so_job_ckpt_summary *out);

/* ---- stop on a signal ---------------------------------------------------------- */
/* Asks every rank to stop after the same step, with a checkpoint there when
 * the job writes checkpoints. Async-signal-safe, callable from any thread. */
void so_job_request_stop(void);
/* What a watched signal does (so_job_watch_signals_opts). */
typedef struct {
    /* 1: while a job exists (so_job_create returned it, so_job_free has not
     * begun) the first signal calls so_job_request_stop. 0: every signal ends
     * the process (a command that does not train). */
    int stop_jobs;
    /* Called on the signal thread just before a signal ends the process, to
     * print one line: `when` is "" (stop_jobs 0), " during set-up" (no job
     * yet: the restore included), " a second time" or " at the end of the
     * run". Not called when a launcher (mpirun, srun), our parent, sent the
     * signal: it ends the other ranks so once one has failed, and reports
     * itself. NULL: nothing is printed. */
    void (*on_end)(void *arg, int sig, const char *when);
    void *arg;
} so_job_signal_opts;
/* Takes these signals (SIGTERM: Slurm's scancel and time limit, mpirun
 * passing it on; SIGINT: Ctrl-C) on a thread of its own. While a job exists
 * the first one asks it to stop after a step (when stop_jobs); during set-up,
 * on a second signal, and always when stop_jobs is 0 the process ends at
 * once, within the time the thread takes to be scheduled: on_end, then the
 * signal's default action (the status a shell shows is 128 + signo, and
 * mpirun or srun end the other ranks). A signal the process ignored when it
 * started stays ignored. Call it first, in the main thread, before anything
 * creates a thread (so_job_create starts MPI, OpenMP and the checkpoint
 * threads): it blocks the signals in the calling thread, so every later
 * thread inherits the block, and its thread takes them with sigwait. Do not
 * install a handler for them instead: oneDNN 2.6's GEMM kernels point RSP
 * into the heap while they run (oneDNN issue 4845), and a handler that
 * interrupts one writes its frame there and corrupts the heap. Watch only
 * signals whose default action ends the process. 0, or SO_EINVAL / SO_ENOMEM. */
int so_job_watch_signals_opts(const int *signals, int count, const so_job_signal_opts *o);
/* The same with stop_jobs = 1 and no line. */
int so_job_watch_signals(const int *signals, int count);
/* The signal that asked a job to stop (SIGTERM, ...), 0 if none did. */
int so_job_stop_signal(void);
/* Ends the watching thread; the signals stay blocked. */
void so_job_unwatch_signals(void);
/* The step after which training stopped on such a request, or -1. */
long so_job_stopped_step(const so_job *j);

/* ---- profile ------------------------------------------------------------------- */
/* The profiler's short summary (rank 0, after so_job_train; "" otherwise). */
const char *so_job_profile_summary(const so_job *j);

#endif
