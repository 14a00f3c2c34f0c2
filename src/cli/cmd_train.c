/* `scaleout train`: the flags become a so_job_config (scaleout/job.h), the
 * library sets up and trains on one process or as one rank of an MPI job;
 * this file prints progress and results (rank 0), writes the --json summary
 * and picks the exit status. Bad input exits 2 before training starts. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "env.h"
#include "kernels.h"
#include "progress.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/job.h"
#include "scaleout/json.h"
#include "scaleout/mem.h"
#include "scaleout/sync.h"
#include "scaleout/train.h"

/* The flags: most land in the job's configuration directly; the rest are
 * this command's own or need a conversion (to_config). */
typedef struct {
    so_job_config cfg;
    const char *json, *progress, *scale_lr, *dump_params, *bucket_mb_arg, *max_memory, *error_feedback, *crop_scale;
    float stall_warning, comm_timeout;
    int no_overlap, no_pin;
} train_args;

static const char *const datasets[] = {"fashion-mnist", "mnist", "cifar10", "synthetic", "imagefolder", "tfrecord", "tokens", NULL};
static const char *const shuffles[] = {"on", "off", "llmc", NULL};
static const char *const inits[] = {"torch", "he", "glorot", NULL};
static const char *const dct_modes[] = {"train", "all", "off", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw", NULL};
static const char *const schedules[] = {"constant", "step", "cosine", NULL};
static const char *const progress_modes[] = {"auto", "bar", "lines", "plain", "none", NULL};
static const char *const scalings[] = {"none", "linear", NULL};
static const char *const prof_details[] = {"layer", "block", "step", NULL};
static const char *const ckpt_modes[] = {"scaleout", "naive", NULL};
static const char *const ckpt_on_errors[] = {"continue", "stop", NULL};
static const char *const pipe_schedules[] = {"gpipe", "1f1b", "interleaved", NULL};
static const char *const placements[] = {"stage-major", "replica-major", NULL};
static const char *const on_off[] = {"on", "off", NULL};
static const char *const shard_groups[] = {"all", "node", NULL};
static const char *const shard_gathers[] = {"fp32", "bf16", "fp16", NULL};

#define SUMMARY "Trains a zoo model (see `scaleout models`) on one process, or on every rank under mpirun."

/* ---- flags that do nothing in the run given are refused ------------------------- */

static int has_stages(const void *p) { return ((const train_args *)p)->cfg.pipeline_stages > 1; }
/* One micro-batch is what a run without stages does anyway. */
static int microbatched(const void *p) { return has_stages(p) || ((const train_args *)p)->cfg.microbatches <= 1; }
static int writes_ckpt(const void *p) { return ((const train_args *)p)->cfg.ckpt.every != NULL; }
/* Only --ckpt-dir: every checkpoint goes there; only --ckpt-local: none ever would. */
static int flushes(const void *p)
{
    const so_job_ckpt_config *k = &((const train_args *)p)->cfg.ckpt;
    return k->every && k->dir;
}
static int daly(const void *p) { return writes_ckpt(p) && !strcmp(((const train_args *)p)->cfg.ckpt.every, "auto"); }
static int ckpt_used(const void *p) { return writes_ckpt(p) || ((const train_args *)p)->cfg.ckpt.resume; }
static int step_lr(const void *p) { return !strcmp(((const train_args *)p)->cfg.lr_schedule, "step"); }
static int momentum_opt(const void *p)
{
    const char *o = ((const train_args *)p)->cfg.optimizer;
    return !strcmp(o, "momentum") || !strcmp(o, "nesterov");
}
static int profiles(const void *p)
{
    const char *timeline = getenv("SCALEOUT_TIMELINE"); /* the timeline alone (docs/PROFILING.md) */
    return ((const train_args *)p)->cfg.prof.dir || (timeline && *timeline);
}
static int synthetic(const void *p) { return !strcmp(((const train_args *)p)->cfg.dataset, "synthetic"); }
static int real_data(const void *p) { return !synthetic(p); }
static int compresses(const void *p)
{
    const char *m = ((const train_args *)p)->cfg.compress;
    return m && strcmp(m, "none");
}
static so_sync_method sync_method(const void *p)
{
    so_sync_spec s;
    const char *t = ((const train_args *)p)->cfg.sync;
    return t && !so_sync_parse(t, &s) ? s.method : SO_SYNC_SYNC;
}
static int local_sync(const void *p) { return sync_method(p) == SO_SYNC_LOCAL; }
static int diloco(const void *p) { return sync_method(p) == SO_SYNC_DILOCO; }
static int param_server(const void *p)
{
    so_sync_method m = sync_method(p);
    return m == SO_SYNC_SSP || m == SO_SYNC_ASYNC;
}
static int sharded(const void *p)
{
    const char *s = ((const train_args *)p)->cfg.strategy;
    return s && !strncmp(s, "zero", 4);
}
static int zero3(const void *p)
{
    const char *s = ((const train_args *)p)->cfg.strategy;
    return s && !strcmp(s, "zero3");
}
static int image_data(const void *p)
{
    const char *d = ((const train_args *)p)->cfg.dataset;
    return !strcmp(d, "imagefolder") || !strcmp(d, "tfrecord");
}
static int token_data(const void *p) { return !strcmp(((const train_args *)p)->cfg.dataset, "tokens"); }
static int tfrecord(const void *p) { return !strcmp(((const train_args *)p)->cfg.dataset, "tfrecord"); }

static const cli_need train_needs[] = {
    {"microbatches", microbatched, "--pipeline-stages P (P > 1)"},
    {"schedule", has_stages, "--pipeline-stages P (P > 1)"},
    {"partition", has_stages, "--pipeline-stages P (P > 1)"},
    {"placement", has_stages, "--pipeline-stages P (P > 1)"},
    {"ckpt-keep", writes_ckpt, "--ckpt-every"},
    {"ckpt-mode", writes_ckpt, "--ckpt-every"},
    {"ckpt-on-error", writes_ckpt, "--ckpt-every"},
    {"ckpt-flush-every", flushes, "--ckpt-every and --ckpt-dir"},
    {"mtbf", daly, "--ckpt-every auto"},
    {"ckpt-dir", ckpt_used, "--ckpt-every or --resume"},
    {"ckpt-local", ckpt_used, "--ckpt-every or --resume"},
    {"lr-step-epochs", step_lr, "--lr-schedule step"},
    {"lr-gamma", step_lr, "--lr-schedule step"},
    {"momentum", momentum_opt, "--optimizer momentum or nesterov"},
    {"profile-detail", profiles, "--profile DIR (or SCALEOUT_TIMELINE)"},
    {"timeline-steps", profiles, "--profile DIR (or SCALEOUT_TIMELINE)"},
    {"synthetic-samples", synthetic, "--dataset synthetic"},
    {"data-dir", real_data, "a --dataset read from files (not synthetic)"},
    {"error-feedback", compresses, "--compress METHOD (not none)"},
    {"local-after", local_sync, "--sync local:H"},
    {"outer-lr", diloco, "--sync diloco:H"},
    {"outer-momentum", diloco, "--sync diloco:H"},
    {"ps-ranks", param_server, "--sync ssp:S or async"},
    {"shard-unit", sharded, "--strategy zero1, zero2 or zero3"},
    {"shard-group", sharded, "--strategy zero1, zero2 or zero3"},
    {"shard-prefetch", zero3, "--strategy zero3"},
    {"shard-gather", zero3, "--strategy zero3"},
    {"image-size", image_data, "--dataset imagefolder or tfrecord"},
    {"resize", image_data, "--dataset imagefolder or tfrecord"},
    {"crop-scale", image_data, "--dataset imagefolder or tfrecord"},
    {"no-augment", image_data, "--dataset imagefolder or tfrecord"},
    {"decode-threads", image_data, "--dataset imagefolder or tfrecord"},
    {"dct-scale", image_data, "--dataset imagefolder or tfrecord"},
    {"strict-data", image_data, "--dataset imagefolder or tfrecord"},
    {"stage-local", image_data, "--dataset imagefolder or tfrecord"},
    {"data-index", image_data, "--dataset imagefolder or tfrecord"},
    {"label-offset", tfrecord, "--dataset tfrecord"},
    {"seq-len", token_data, "--dataset tokens"},
    {NULL, NULL, NULL}};

/* Combinations of values that leave a flag without effect. */
static int check_values(const train_args *a)
{
    const so_job_config *c = &a->cfg;
    if (c->pipeline_stages > 1 && c->schedule && !strcmp(c->schedule, "interleaved") && c->virtual_stages <= 1)
        return cli_error("train", CLI_USAGE, "--schedule interleaved does nothing without --virtual-stages V (V > 1 "
                         "model chunks per rank); without them it is 1f1b");
    so_compress_spec cs;
    if (so_compress_parse(c->compress, &cs))
        return cli_error("train", CLI_USAGE, "%s", so_errmsg());
    so_sync_spec ss;
    if (so_sync_parse(c->sync, &ss))
        return cli_error("train", CLI_USAGE, "%s", so_errmsg());
    return CLI_OK;
}

static int parse(train_args *a, int argc, char **argv)
{
    *a = (train_args){.progress = "auto", .scale_lr = "none", .bucket_mb_arg = "25", .stall_warning = 60,
                      .comm_timeout = 300};
    so_job_config *c = &a->cfg;
    so_job_defaults(c);
    const cli_opt opts[] = {
        {"model", OPT_STR, &c->model, "NAME", "model from the zoo", 0, -1, NULL},
        {"dataset", OPT_CHOICE, &c->dataset, "NAME", "data set", 0, -1, datasets},
        {"data-dir", OPT_STR, &c->data_dir, "DIR", "directory of the data set files", 0, -1, NULL},
        {"batch-size", OPT_INT, &c->batch, "N", "samples per step on each rank", 1, 1 << 20, NULL},
        {"epochs", OPT_INT, &c->epochs, "N", "epochs to train", 1, 1 << 20, NULL},
        {"steps", OPT_LONG, &c->steps, "N", "optimizer steps (overrides --epochs; 0 = use epochs)", 0, 1e15, NULL},
        {"optimizer", OPT_CHOICE, &c->optimizer, "NAME", "optimizer", 0, -1, optimizers},
        {"lr", OPT_FLOAT, &c->lr, "X", "base learning rate", 0, 1e6, NULL},
        {"momentum", OPT_FLOAT, &c->momentum, "X", "momentum (momentum, nesterov)", 0, 1, NULL},
        {"weight-decay", OPT_FLOAT, &c->weight_decay, "X", "weight decay", 0, 1e3, NULL},
        {"lr-schedule", OPT_CHOICE, &c->lr_schedule, "NAME", "learning-rate schedule", 0, -1, schedules},
        {"warmup-epochs", OPT_FLOAT, &c->warmup_epochs, "X", "linear warm-up length in epochs", 0, 1e6, NULL},
        {"lr-step-epochs", OPT_FLOAT, &c->lr_step_epochs, "X", "step schedule: epochs between decays", 1e-3, 1e6, NULL},
        {"lr-gamma", OPT_FLOAT, &c->lr_gamma, "X", "step schedule: decay factor", 0, 1, NULL},
        {"scale-lr", OPT_CHOICE, &a->scale_lr, "RULE", "scale lr with the number of ranks (Goyal et al.)", 0, -1, scalings},
        {"seed", OPT_LONG, &c->seed, "N", "random seed (same seed, same bits)", 0, 9.2e18, NULL},
        {"threads", OPT_INT, &c->threads, "N", "compute threads per process", 1, 1024, NULL},
        {"no-pin", OPT_FLAG, &a->no_pin, NULL, "do not pin compute threads to cores", 0, -1, NULL},
        {"backend", OPT_CHOICE, &c->backend, "NAME", "compute backend", 0, -1, cli_backends},
        {"precision", OPT_CHOICE, &c->precision, "NAME", "compute precision: fp32, bf16 (native AVX-512 BF16 only), auto (bf16 where native)", 0, -1, cli_precisions},
        {"conv-algo", OPT_CHOICE, &c->conv_algo, "NAME", "convolution algorithm: auto (Winograd where faster), direct, winograd", 0, -1, cli_conv_algos},
        {"eval-every", OPT_INT, &c->eval_every, "N", "evaluate every N epochs (0 = at the end, -1 = never)", -1, 1 << 20, NULL},
        {"augment", OPT_FLAG, &c->augment, NULL, "random crop (pad 4) and horizontal flip", 0, -1, NULL},
        {"prefetch", OPT_INT, &c->prefetch, "N", "batches prepared ahead on a background thread", 0, 64, NULL},
        {"synthetic-samples", OPT_INT, &c->synthetic_samples, "N", "synthetic data set size (default: 32 batches)", 0, 1 << 30, NULL},
        {"bucket-mb", OPT_STR, &a->bucket_mb_arg, "MB|auto", "gradient bucket size in MiB; auto: chosen with the algorithm from the cost model", 0, -1, NULL},
        {"first-bucket-mb", OPT_FLOAT, &c->first_bucket_mb, "MB", "first and last (small) gradient buckets in MiB", 0.001, 4096, NULL},
        {"no-overlap", OPT_FLAG, &a->no_overlap, NULL, "allreduce after backward instead of during it", 0, -1, NULL},
        {"accumulate", OPT_INT, &c->accumulate, "K", "micro-batches per optimizer step", 1, 1 << 16, NULL},
        {"clip-norm", OPT_FLOAT, &c->clip_norm, "X", "clip the gradient to global L2 norm X (torch's clip_grad_norm_; 0 = off)", 0, 1e30, NULL},
        {"compress", OPT_STR, &c->compress, "METHOD", "gradient compression: none, fp16, bf16, topk:R, randk:R, qsgd:B[:D], sign, powersgd:r[:S] (docs/COMPRESSION.md)", 0, -1, NULL},
        {"sync", OPT_STR, &c->sync, "METHOD", "how often ranks agree on the model: sync (every step), local:H, diloco:H, ssp:S, async, gossip:ring|torus (docs/COMPRESSION.md)", 0, -1, NULL},
        {"local-after", OPT_LONG, &c->local_after, "S", "local SGD after S synchronous steps (post-local SGD)", 0, 1e15, NULL},
        {"outer-lr", OPT_FLOAT, &c->outer_lr, "X", "diloco: the outer Nesterov step's learning rate", 0, 1e3, NULL},
        {"outer-momentum", OPT_FLOAT, &c->outer_momentum, "X", "diloco: the outer step's momentum", 0, 1, NULL},
        {"ps-ranks", OPT_INT, &c->ps_ranks, "K", "ssp, async: the last K ranks serve the parameters (fewer than the world)", 1, 1 << 20, NULL},
        {"error-feedback", OPT_CHOICE, &a->error_feedback, "on|off", "keep what compression dropped and add it to the next step (default: on for topk, sign and powersgd, off for the unbiased randk and qsgd and for fp16, bf16)", 0, -1, on_off},
        {"sync-bn", OPT_FLAG, &c->sync_bn, NULL, "batchnorm statistics over the global batch (SyncBatchNorm)", 0, -1, NULL},
        {"allreduce", OPT_STR, &c->allreduce, "ALGO", "allreduce algorithm for gradients", 0, -1, NULL},
        {"stall-warning", OPT_FLOAT, &a->stall_warning, "S", "report a collective stuck this long (0 = off)", 0, 1e9, NULL},
        {"comm-timeout", OPT_FLOAT, &a->comm_timeout, "S", "abort the job when a collective is stuck this long (0 = off)", 0, 1e9, NULL},
        {"warmup-steps", OPT_INT, &c->warmup_steps, "N", "first steps left out of images/sec", 0, 1 << 30, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write a machine-readable summary", 0, -1, NULL},
        {"dump-params", OPT_STR, &a->dump_params, "FILE", "write the final parameters as raw float32 (rank 0)", 0, -1, NULL},
        {"progress", OPT_CHOICE, &a->progress, "MODE", "progress display: auto (a bar on a terminal, lines in files, pipes and mpirun logs), bar, lines (one per epoch and every 30 s), none", 0, -1, progress_modes},
        {"profile", OPT_STR, &c->prof.dir, "DIR", "write DIR/timeline.json and DIR/profile.json (docs/PROFILING.md)", 0, -1, NULL},
        {"profile-detail", OPT_CHOICE, &c->prof.detail, "LEVEL", "timeline detail of forward/backward", 0, -1, prof_details},
        {"timeline-steps", OPT_STR, &c->prof.steps, "A:B", "steps A..B-1 in full detail, others summarised (or all)", 0, -1, NULL},
        {"ckpt-every", OPT_STR, &c->ckpt.every, "N|Nepoch|auto", "checkpoint every N steps, N epochs, or auto (--mtbf)", 0, -1, NULL},
        {"ckpt-dir", OPT_STR, &c->ckpt.dir, "DIR", "shared checkpoint level", 0, -1, NULL},
        {"ckpt-local", OPT_STR, &c->ckpt.local, "DIR", "node-local checkpoint level (node<id>/ under it)", 0, -1, NULL},
        {"ckpt-keep", OPT_INT, &c->ckpt.keep, "K", "complete checkpoints kept per level", 1, 1 << 20, NULL},
        {"ckpt-flush-every", OPT_INT, &c->ckpt.flush_every, "M", "flush every M-th checkpoint to --ckpt-dir", 1, 1 << 20, NULL},
        {"ckpt-mode", OPT_CHOICE, &c->ckpt.mode, "MODE", "scaleout (sharded, async) or naive (rank 0 writes)", 0, -1, ckpt_modes},
        {"ckpt-on-error", OPT_CHOICE, &c->ckpt.on_error, "WHAT", "when a checkpoint fails: continue or stop", 0, -1, ckpt_on_errors},
        {"mtbf", OPT_FLOAT, &c->ckpt.mtbf_hours, "HOURS", "mean time between failures for --ckpt-every auto", 1e-6, 1e9, NULL},
        {"resume", OPT_STR, &c->ckpt.resume, "auto|PATH", "continue from the newest complete checkpoint", 0, -1, NULL},
        {"init-from", OPT_STR, &c->ckpt.init_from, "FILE", "initial parameters from a .safetensors file or, for GPT-2, llm.c's model file", 0, -1, NULL},
        {"allow-nonfinite", OPT_FLAG, &c->allow_nonfinite, NULL, "train on when the loss becomes NaN or infinite, and from --init-from weights that hold such values (default: stop, exit 1; refuse, exit 2)", 0, -1, NULL},
        {"pipeline-stages", OPT_INT, &c->pipeline_stages, "P", "pipeline stages: the ranks split into P stages x ranks/P data-parallel replicas (docs/PARALLELISM.md)", 1, 4096, NULL},
        {"microbatches", OPT_INT, &c->microbatches, "M", "micro-batches per step with pipeline stages (each batch-size/M)", 1, 1 << 16, NULL},
        {"schedule", OPT_CHOICE, &c->schedule, "NAME", "pipeline schedule", 0, -1, pipe_schedules},
        {"virtual-stages", OPT_INT, &c->virtual_stages, "V", "model chunks per pipeline rank (--schedule interleaved): P x V stages", 1, 4096, NULL},
        {"partition", OPT_STR, &c->partition, "auto|time|memory|LIST", "pipeline cuts: balance measured time (auto, time) or memory, or the first node of each stage", 0, -1, NULL},
        {"placement", OPT_CHOICE, &c->placement, "HOW", "stage-major: a replica's stages on neighbouring ranks; replica-major: a stage's replicas", 0, -1, placements},
        {"max-memory", OPT_STR, &a->max_memory, "BYTES", "what each rank may hold by the trainer's accounting (K/M/G suffixes): a rank above it stops the job at set-up; with pipeline stages, --partition auto cuts within it", 0, -1, NULL},
        {"ranks-per-node", OPT_INT, &c->ranks_per_node, "K", "emulate nodes of K ranks (checkpoint partners, hier)", 0, 1 << 20, NULL},
        {"seq-len", OPT_INT, &c->seq_len, "T", "--dataset tokens: tokens per sequence (at most the model's context)", 1, 1 << 24, NULL},
        {"shuffle", OPT_CHOICE, &c->shuffle, "ORDER", "training order: on (random windows of T+1 tokens; images shuffled), off (llm.c's order; images in file order), llmc (llm.c's shuffle, token data)", 0, -1, shuffles},
        {"eval-batches", OPT_INT, &c->eval_batches, "N", "evaluate on the first N batches per rank (0 = the whole test split)", 0, 1 << 30, NULL},
        {"strategy", OPT_STR, &c->strategy, "NAME", "how ranks share the model: dp (data parallelism), zero1 (optimizer state sharded), zero2 (and gradients), zero3 (and parameters); docs/PARALLELISM.md", 0, -1, NULL},
        {"shard-unit", OPT_STR, &c->shard_unit, "auto|layer|block|MB", "zero*: what is gathered and reduced together: a layer, a block (layer1.0, h.3), layers of at least MB MiB, or auto: small blocks merged into units of up to 1 MiB (default: zero1/2 the gradient buckets, zero3 auto, dense layers above 32 MiB in row chunks); MB also cuts dense layers into chunks of MB", 0, -1, NULL},
        {"shard-prefetch", OPT_INT, &c->shard_prefetch, "K", "zero3: units gathered at once, at most (the one computing and K-1 prefetched)", 1, 1 << 20, NULL},
        {"shard-gather", OPT_CHOICE, &c->shard_gather, "fp32|bf16|fp16", "zero3: the wire of the parameters' allgathers: bf16 or fp16 halve their bytes, forward and backward then compute with the rounded weights (FSDP's param_dtype) while the optimizer steps the FP32 shard", 0, -1, shard_gathers},
        {"shard-group", OPT_CHOICE, &c->shard_group, "all|node", "zero*: shard over every rank, or within each node and replicate across nodes (HYBRID_SHARD)", 0, -1, shard_groups},
        {"init", OPT_CHOICE, &c->init, "SCHEME", "parameter initialisation: torch (PyTorch's, so its recipes transfer), he, glorot", 0, -1, inits},
        /* image data sets (--dataset imagefolder|tfrecord, docs/DATA.md) */
        {"image-size", OPT_INT, &c->image.image_size, "S", "image data sets: crop side (RandomResizedCrop / CenterCrop)", 1, 4096, NULL},
        {"resize", OPT_INT, &c->image.resize, "R", "image data sets: eval resize of the shorter side (0 = image-size x 256/224)", 0, 8192, NULL},
        {"crop-scale", OPT_STR, &a->crop_scale, "MIN[,MAX]", "image data sets: RandomResizedCrop's area range (0.08,1)", 0, -1, NULL},
        {"no-augment", OPT_FLAG, &c->image.no_augment, NULL, "image data sets: train on the eval transform (resize + centre crop)", 0, -1, NULL},
        {"label-offset", OPT_INT, &c->image.label_offset, "K", "tfrecord: subtracted from stored labels (ImageNet shards are 1-based)", -(1 << 30), 1 << 30, NULL},
        {"decode-threads", OPT_INT, &c->image.decode_threads, "N", "image data sets: decoding threads per rank", 1, 256, NULL},
        {"dct-scale", OPT_CHOICE, &c->image.dct_scale, "WHEN", "JPEG DCT-domain downscaling: train crops, all, or off (torchvision's pixels)", 0, -1, dct_modes},
        {"strict-data", OPT_FLAG, &c->image.strict, NULL, "an unreadable image stops the run instead of being skipped", 0, -1, NULL},
        {"stage-local", OPT_STR, &c->image.stage_local, "DIR", "copy each rank's samples to node-local DIR in the first epoch, read them there afterwards", 0, -1, NULL},
        {"data-index", OPT_STR, &c->image.index, "FILE", "index of the image data set (default DATA_DIR/scaleout.idx when present)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    unsigned char seen[sizeof opts / sizeof *opts] = {0};
    int rc = cli_parse_seen("train", SUMMARY, opts, argc, argv, seen);
    if (!rc)
        rc = cli_parse_bucket_mb("train", a->bucket_mb_arg, &c->bucket_mb);
    if (!rc && a->crop_scale)
        rc = cli_parse_crop_scale("train", a->crop_scale, &c->image.scale_min, &c->image.scale_max);
    size_t cap = 0;
    if (!rc && a->max_memory)
        rc = cli_parse_max_memory("train", a->max_memory, &cap);
    c->max_memory = (double)cap;
    if (!rc && !(rc = cli_check_needs("train", opts, seen, train_needs, a)))
        rc = check_values(a);
    c->scale_lr = !strcmp(a->scale_lr, "linear");
    c->pin_threads = !a->no_pin;
    c->overlap = !a->no_overlap;
    c->stall_warning_s = a->stall_warning;
    c->comm_timeout_s = a->comm_timeout;
    c->error_feedback = a->error_feedback ? !strcmp(a->error_feedback, "on") : -1;
    c->build_id = cli_git_commit();
    return rc;
}

typedef struct {
    float *params;      /* the whole model's parameters with --dump-params (rank 0) */
    size_t nparams;
} final_params;

static int report(const train_args *a, so_job *j, const so_train_result *r, const double *ranks,
                  const final_params *fp);

/* Per-rank phase figures, gathered on every rank (index rank*RANK_FIELDS). */
enum { RK_COMPUTE, RK_COMM_EXPOSED, RK_COMM_OVERLAPPED, RK_DATA_WAIT, RK_IMAGES_PER_SEC, RK_MEM_WEIGHTS,
       RK_MEM_GRADS, RK_MEM_OPTIMIZER, RK_MEM_ACTIVATIONS, RK_MEM_MESSAGES, RK_MEM_TOTAL, RK_PEAK_RSS, RANK_FIELDS };

static double *gather_ranks(so_job *j, const so_train_result *r, int batch)
{
    int world = so_job_world(j);
    double *v = calloc((size_t)world * RANK_FIELDS, sizeof *v);
    if (!v)
        return NULL;
    double *mine = v + (size_t)so_job_rank(j) * RANK_FIELDS;
    mine[RK_COMPUTE] = r->forward + r->backward + r->optimizer;
    mine[RK_COMM_EXPOSED] = r->comm_exposed;
    mine[RK_COMM_OVERLAPPED] = r->comm_total > r->comm_exposed ? r->comm_total - r->comm_exposed : 0;
    mine[RK_DATA_WAIT] = r->data_wait;
    mine[RK_IMAGES_PER_SEC] = r->wall_seconds > 0 ? (double)r->steps * batch / r->wall_seconds : 0;
    so_job_memory mu;
    so_job_memory_use(j, &mu);
    double mem[] = {mu.params, mu.grads, mu.optimizer, mu.activations, mu.messages, mu.total, (double)so_peak_rss()};
    memcpy(mine + RK_MEM_WEIGHTS, mem, sizeof mem);
    if (so_job_sum(j, v, world * RANK_FIELDS)) {
        free(v);
        return NULL;
    }
    return v;
}

/* Every rank's phases, its memory by the trainer's accounting (a sharded
 * strategy's ranks each hold their part) and its peak resident set. */
static void write_ranks(so_json *js, const double *v, int world)
{
    static const char *names[RANK_FIELDS] = {"compute_seconds", "comm_exposed_seconds", "comm_overlapped_seconds",
                                             "data_wait_seconds", "images_per_sec", "weights", "gradients",
                                             "optimizer", "activations", "messages", "total"};
    so_json_arr_begin(js, "ranks");
    for (int k = 0; v && k < world; k++) {
        const double *r = v + k * RANK_FIELDS;
        so_json_obj_begin(js, NULL);
        so_json_int(js, "rank", k);
        for (int f = 0; f < RK_MEM_WEIGHTS; f++)
            so_json_num(js, names[f], r[f]);
        so_json_obj_begin(js, "memory_accounted");
        for (int f = RK_MEM_WEIGHTS; f <= RK_MEM_TOTAL; f++)
            so_json_num(js, names[f], r[f]);
        so_json_obj_end(js);
        so_json_int(js, "peak_rss_bytes", (int64_t)r[RK_PEAK_RSS]);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
}

/* A sharded strategy's units and shards (the memory formulas' terms), and
 * rank 0's bytes per step into its gradient and parameter collectives. */
static void write_shards(so_json *js, const so_strategy *st, const so_job_config *c, const so_train_result *r)
{
    const so_state_layout *l = st && st->ops->state ? st->ops->state(st->self) : NULL;
    if (!l)
        return;
    size_t run[3] = {0, 0, 0}; /* the largest unit, run of 2 and of --shard-prefetch consecutive units */
    int k[3] = {1, 2, c->shard_prefetch};
    for (int i = 0; i < 3; i++)
        for (int u = 0; u < l->nunits; u++) {
            int v = u + k[i] < l->nunits ? u + k[i] : l->nunits;
            run[i] = l->units[v] - l->units[u] > run[i] ? l->units[v] - l->units[u] : run[i];
        }
    so_json_obj_begin(js, "shards");
    so_json_int(js, "units", l->nunits);
    so_json_int(js, "largest_unit_parameters", (int64_t)run[0]);
    so_json_int(js, "in_flight_parameters", (int64_t)run[1]);   /* gradients: the unit written, one reduced */
    so_json_int(js, "gathered_parameters", (int64_t)run[2]);    /* zero3: the prefetch window */
    so_json_int(js, "shard_group", l->shards);
    so_json_int(js, "replicas", l->replicas);
    so_json_int(js, "prefetch", c->shard_prefetch);
    so_json_str(js, "gather_wire", c->shard_gather ? c->shard_gather : "fp32");
    so_json_num(js, "gradient_bytes_per_step", r->steps > 0 ? r->shard_grad_bytes / (double)r->steps : 0);
    so_json_num(js, "gather_bytes_per_step", r->steps > 0 ? r->shard_gather_bytes / (double)r->steps : 0);
    so_json_obj_end(js);
}

static void write_config(so_json *js, const so_job_config *c, const so_graph *g, int world)
{
    so_json_obj_begin(js, "config");
    so_json_str(js, "model", c->model);
    so_json_str(js, "dataset", c->dataset);
    so_json_str(js, "shuffle", c->shuffle);
    if (!strcmp(c->dataset, "tokens"))
        so_json_int(js, "seq_len", c->seq_len);
    so_json_str(js, "backend", c->backend);
    so_json_str(js, "conv_algo", c->conv_algo);
    so_json_str(js, "precision_requested", c->precision);
    so_json_int(js, "batch_size", c->batch);
    so_json_int(js, "global_batch_size", (int64_t)c->batch * c->accumulate * world);
    so_json_int(js, "world_size", world);
    so_json_int(js, "threads", c->threads);
    so_json_bool(js, "sync_bn", c->sync_bn);
    so_json_int(js, "epochs", c->epochs);
    so_json_int(js, "steps", c->steps);
    so_json_str(js, "optimizer", c->optimizer);
    so_json_num(js, "lr", c->lr);
    so_json_num(js, "momentum", c->momentum);
    so_json_num(js, "weight_decay", c->weight_decay);
    so_json_num(js, "clip_norm", c->clip_norm);
    so_json_str(js, "sync", c->sync ? c->sync : "sync");
    so_json_str(js, "compress", c->compress ? c->compress : "none");
    so_json_str(js, "lr_schedule", c->lr_schedule);
    so_json_num(js, "warmup_epochs", c->warmup_epochs);
    so_json_int(js, "seed", c->seed);
    so_json_int(js, "parameters", (int64_t)so_graph_nparams(g));
    so_json_num(js, "flops_per_sample", so_graph_flops(g));
    so_json_str(js, "strategy", c->strategy);
    so_json_str(js, "shard_unit", c->shard_unit ? c->shard_unit : "default");
    so_json_int(js, "shard_prefetch", c->shard_prefetch);
    so_json_str(js, "shard_group", c->shard_group);
    so_json_int(js, "pipeline_stages", c->pipeline_stages > 1 ? c->pipeline_stages : 1);
    so_json_int(js, "microbatches", c->microbatches);
    so_json_str(js, "schedule", c->schedule);
    so_json_int(js, "virtual_stages", c->virtual_stages > 1 ? c->virtual_stages : 1);
    so_json_str(js, "version", SCALEOUT_VERSION);
    so_json_str(js, "git", cli_git_commit());
    so_json_obj_end(js);
}

/* --compress: bytes per step against FP32, and what compressing cost. */
static void report_compress(const so_job_config *c, const so_train_result *r)
{
    if (r->compress_bytes_dense <= 0 || r->steps <= 0)
        return;
    double steps = (double)r->steps;
    if (!c->compress || !strcmp(c->compress, "none") || (r->compress_auto_n > 0 && r->compress_auto_pick == 0) ||
        !strcmp(r->compress_auto_resumed, "none")) {
        /* plain FP32 averaging (auto's "none" too) */
        printf("gradient averaging: %.1f KB sent per step by each rank (FP32, uncompressed)\n",
               r->compress_bytes_sent / steps / 1e3);
        return;
    }
    printf("compression %s (error feedback %s): %.1f KB sent per step by each rank against %.1f KB in FP32 (%.1fx "
           "less); compress %.2f ms and decompress %.2f ms per step\n", c->compress,
           r->compress_error_feedback ? "on" : "off", r->compress_bytes_sent / steps / 1e3,
           r->compress_bytes_dense / steps / 1e3,
           r->compress_bytes_sent > 0 ? r->compress_bytes_dense / r->compress_bytes_sent : 0,
           r->compress_encode_s / steps * 1e3, r->compress_decode_s / steps * 1e3);
}

static void json_compress(so_json *js, const so_job_config *c, const so_train_result *r)
{
    if (r->compress_bytes_dense <= 0)
        return;
    double steps = r->steps > 0 ? (double)r->steps : 1;
    so_json_obj_begin(js, "compression");
    so_json_str(js, "method", c->compress ? c->compress : "none");
    so_json_bool(js, "error_feedback", r->compress_error_feedback);
    so_json_num(js, "bytes_per_step", r->compress_bytes_sent / steps);
    so_json_num(js, "dense_bytes_per_step", r->compress_bytes_dense / steps);
    so_json_num(js, "ratio", r->compress_bytes_sent > 0 ? r->compress_bytes_dense / r->compress_bytes_sent : 0);
    so_json_num(js, "compress_seconds", r->compress_encode_s);
    so_json_num(js, "decompress_seconds", r->compress_decode_s);
    so_json_obj_end(js);
}

/* --sync ssp:S / async: the parameter server's traffic and the staleness the workers saw. */
static void report_ps(const so_job_config *c, const so_train_result *r)
{
    if (r->ps_workers > 0)
        printf("parameter server (--sync %s): %d worker(s), %d server(s); %.1f KB pushed and pulled per worker step; "
               "staleness mean %.2f, max %.0f steps\n", c->sync, r->ps_workers, r->ps_servers,
               r->ps_bytes_per_step / 1e3, r->ps_staleness_mean, r->ps_staleness_max);
}

static void json_ps(so_json *js, const so_job_config *c, const so_train_result *r)
{
    if (r->ps_workers <= 0)
        return;
    so_json_obj_begin(js, "parameter_server");
    so_json_str(js, "sync", c->sync);
    so_json_int(js, "workers", r->ps_workers);
    so_json_int(js, "servers", r->ps_servers);
    so_json_num(js, "bytes_per_step", r->ps_bytes_per_step);
    so_json_num(js, "staleness_mean", r->ps_staleness_mean);
    so_json_num(js, "staleness_max", r->ps_staleness_max);
    so_json_obj_end(js);
}

/* --sync local, diloco, gossip: what keeping the models together cost. */
static void report_sync(const so_job_config *c, const so_train_result *r)
{
    if (r->sync_period <= 0 || r->steps <= 0)
        return;
    printf("sync %s: %.1f KB sent per step by each rank (%ld averages, every %d steps)\n", c->sync,
           r->sync_bytes_sent / (double)r->steps / 1e3, r->sync_rounds, r->sync_period);
}

static void json_sync(so_json *js, const so_job_config *c, const so_train_result *r)
{
    if (r->sync_period <= 0)
        return;
    so_json_obj_begin(js, "relaxed_sync");
    so_json_str(js, "method", c->sync);
    so_json_num(js, "bytes_per_step", r->steps > 0 ? r->sync_bytes_sent / (double)r->steps : 0);
    so_json_int(js, "rounds", r->sync_rounds);
    so_json_int(js, "steps_between_averages", r->sync_period);
    so_json_int(js, "local_after", c->local_after);
    so_json_obj_end(js);
}

/* Seconds of the training steps (without evaluation). */
static double step_seconds(const so_train_result *r)
{
    double t = 0;
    for (long k = 0; k < r->nstep_seconds; k++)
        t += r->step_seconds[k];
    return t;
}

/* Decode threads that would keep up: the trainer's rate when it does not
 * wait over one thread's decode rate, with 10% headroom. 0 when unknown. */
static int threads_needed(const so_train_result *r, const so_loader_stats *ds, int batch)
{
    double busy = step_seconds(r) - r->data_wait, images = (double)r->nstep_seconds * batch;
    if (ds->decoded <= 0 || ds->decode_seconds <= 0 || busy <= 0)
        return 0;
    double per_thread = ds->decoded / ds->decode_seconds, need = images / busy;
    return (int)ceil(1.1 * need / per_thread);
}

/* "data": the data wait per step and, for image data sets, the decoding. */
static void write_data_json(so_json *js, const train_args *a, so_job *j, const so_train_result *r)
{
    so_loader_stats ds;
    so_job_data_stats(j, &ds);
    double steps = step_seconds(r);
    so_json_obj_begin(js, "data");
    so_json_num(js, "wait_per_step_seconds", r->nstep_seconds ? r->data_wait / r->nstep_seconds : 0);
    so_json_num(js, "wait_share", steps > 0 ? r->data_wait / steps : 0);
    so_json_int(js, "decode_threads", ds.threads);
    so_json_int(js, "decoded", ds.decoded);
    so_json_int(js, "skipped", ds.skipped);
    so_json_num(js, "decode_images_per_sec_per_thread", ds.decode_seconds > 0 ? ds.decoded / ds.decode_seconds : 0);
    so_json_num(js, "read_bytes", ds.read_bytes);
    so_json_int(js, "decode_threads_needed", threads_needed(r, &ds, a->cfg.batch * a->cfg.accumulate));
    so_json_int(js, "loader_memory_bytes", (int64_t)ds.memory_bound);
    if (a->cfg.image.stage_local) {
        so_json_num(js, "staged_bytes", ds.staged_bytes);
        so_json_num(js, "stage_seconds", ds.stage_seconds);
        so_json_num(js, "local_read_bytes", ds.local_bytes);
    }
    so_json_obj_end(js);
}

/* ---- model-FLOP utilisation ----
 * Every FLOP so_graph_flops counts is a convolution, dense or linear layer or
 * attention. In BF16 runs all but attention and dense chunks compute in BF16
 * (so_model_node_precision), and the run's MFU is held to the BF16 peak
 * (nominal, 128 FLOP/cycle): conservative by the FP32 layers' share, which
 * the profiler's per-layer MFU shows each at its own peak. In FP32 runs against the
 * FP32 peak, or the rate measured in FMA chains where that is clearly lower
 * (a CPU that splits 512-bit operations), as bench/peer_env.py does. */
typedef struct {
    const char *peak_name; /* "BF16" or "FP32" */
    double peak_gflops;    /* per core */
    double mfu;            /* fraction of peak x cores */
} run_mfu;

static run_mfu mfu_of(so_job *j, const so_train_result *r, int threads)
{
    run_mfu u = {"FP32", so_cpu_peak_gflops(), 0};
    double fma = so_cpu_fma_gflops();
    if (so_job_model(j)->precision == SO_PRECISION_BF16) {
        u.peak_name = "BF16";
        u.peak_gflops = so_cpu_bf16_peak_gflops();
    } else if (fma > 0 && fma < 0.8 * u.peak_gflops) {
        u.peak_gflops = fma;
    }
    double cores = (double)so_job_world(j) * (threads > 0 ? threads : 1);
    double flops = r->images_per_sec * 3.0 * so_graph_flops(so_job_graph(j)); /* forward + backward ~ 3x */
    u.mfu = u.peak_gflops > 0 ? flops / (u.peak_gflops * 1e9 * cores) : 0;
    return u;
}

static void write_json(FILE *f, const train_args *a, so_job *j, const so_train_result *r, const double *ranks)
{
    const so_job_config *c = &a->cfg;
    so_model *m = so_job_model(j);
    int world = so_job_world(j);
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    write_config(&js, c, so_job_graph(j), world);
    kernels_conv_json(&js, m, c->conv_algo);
    env_info e;
    env_collect(&e);
    env_write_json(&js, &e, c->threads, c->pin_threads);
    so_json_arr_begin(&js, "epochs");
    for (int e = 0; e < r->nepochs; e++) {
        const so_epoch_stats *s = &r->epochs[e];
        so_json_obj_begin(&js, NULL);
        so_json_int(&js, "epoch", s->epoch + 1);
        so_json_num(&js, "loss", s->loss);
        if (s->test_accuracy >= 0) {
            so_json_num(&js, "test_accuracy", s->test_accuracy);
            so_json_num(&js, "test_loss", s->test_loss);
        }
        so_json_num(&js, "seconds", s->seconds);
        so_json_num(&js, "images_per_sec", s->images_per_sec);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    so_json_arr_begin(&js, "step_loss");
    for (long k = 0; k < r->nstep_seconds; k++)
        so_json_num(&js, NULL, r->step_loss[k]);
    so_json_arr_end(&js);
    so_json_arr_begin(&js, "step_seconds"); /* rank 0's wall time of every step */
    for (long k = 0; k < r->nstep_seconds; k++)
        so_json_num(&js, NULL, r->step_seconds[k]);
    so_json_arr_end(&js);
    if (r->pipe_bubble_formula > 0) {
        so_json_obj_begin(&js, "pipeline");
        so_json_num(&js, "bubble_measured", r->pipe_bubble);
        so_json_num(&js, "bubble_formula", r->pipe_bubble_formula);
        so_json_num(&js, "bubble_with_stage_times", r->pipe_bubble_stages);
        so_json_str(&js, "wire", r->pipe_wire_bf16 ? "bf16" : "f32");
        so_json_num(&js, "bytes_per_step", r->steps > 0 ? r->pipe_bytes_sent / (double)r->steps : 0);
        so_json_arr_begin(&js, "stages");
        double act, edge;
        for (int s = 0; !so_job_stage_memory(j, s, &act, &edge); s++) {
            so_json_obj_begin(&js, NULL);
            so_json_num(&js, "activation_bytes", act);
            so_json_num(&js, "message_buffer_bytes", edge);
            so_json_obj_end(&js);
        }
        so_json_arr_end(&js);
        so_json_obj_end(&js);
    }
    so_json_int(&js, "steps", r->steps);
    so_json_num(&js, "images_per_sec", r->images_per_sec);
    run_mfu u = mfu_of(j, r, c->threads);
    so_json_num(&js, "mfu", u.mfu);
    so_json_str(&js, "mfu_peak", u.peak_name);
    so_json_num(&js, "mfu_peak_gflops_per_core", u.peak_gflops);
    if (r->nepochs > 0)
        so_json_num(&js, "final_loss", r->final_loss);
    else
        so_json_null(&js, "final_loss"); /* no step ran (resumed at the end) */
    if (r->test_accuracy >= 0)
        so_json_num(&js, "test_accuracy", r->test_accuracy);
    else
        so_json_null(&js, "test_accuracy");
    so_json_num(&js, "wall_seconds", r->wall_seconds);
    so_json_num(&js, "data_wait_seconds", r->data_wait);
    write_data_json(&js, a, j, r);
    so_json_obj_begin(&js, "phase_seconds");
    so_json_num(&js, "data_wait", r->data_wait);
    so_json_num(&js, "forward", r->forward);
    so_json_num(&js, "backward", r->backward);
    so_json_num(&js, "comm_exposed", r->comm_exposed);
    so_json_num(&js, "optimizer", r->optimizer);
    so_json_num(&js, "comm_total", r->comm_total);
    so_json_obj_end(&js);
    if (c->clip_norm > 0) {
        so_json_obj_begin(&js, "clipping");
        so_json_int(&js, "clipped_steps", r->clipped_steps);
        so_json_num(&js, "last_grad_norm", r->grad_norm);
        so_json_obj_end(&js);
    }
    json_compress(&js, c, r);
    cli_compress_auto_json(&js, r);
    json_ps(&js, c, r);
    json_sync(&js, c, r);
    so_json_int(&js, "gradient_buckets", r->nbuckets);
    so_json_obj_begin(&js, "bucket_plan");
    so_json_bool(&js, "auto", c->bucket_mb < 0);
    so_json_bool(&js, "stepped_as_they_arrive", r->step_buckets);
    so_json_int(&js, "first_bucket_bytes", (int64_t)r->first_bucket_bytes);
    so_json_int(&js, "bucket_bytes", (int64_t)r->bucket_bytes);
    if (r->bucket_plan_step) {
        so_json_int(&js, "chosen_after_step", r->bucket_plan_step);
        so_json_num(&js, "measured_backward_seconds", r->measured_backward);
        so_json_num(&js, "predicted_comm_end_seconds", r->predicted_comm_end);
    }
    so_json_obj_end(&js);
    write_ranks(&js, ranks, world);
    write_shards(&js, so_job_strategy(j), c, r);
    so_json_int(&js, "peak_rss_bytes", (int64_t)so_peak_rss());
    so_job_memory mu;
    so_job_memory_use(j, &mu);
    so_json_obj_begin(&js, "memory_accounted"); /* rank 0's (every rank's: "ranks"), so_job_memory_use */
    so_json_num(&js, "weights", mu.params);
    so_json_num(&js, "gradients", mu.grads);
    so_json_num(&js, "optimizer", mu.optimizer);
    so_json_num(&js, "activations", mu.activations);
    so_json_num(&js, "messages", mu.messages);
    so_json_num(&js, "total", mu.total);
    so_json_int(&js, "slots", mu.slots);
    so_json_obj_end(&js);
    so_json_obj_end(&js);
}

static int finish(const train_args *a, so_job *j, const so_train_result *r)
{
    double *ranks = gather_ranks(j, r, a->cfg.batch * a->cfg.accumulate);
    final_params fp = {NULL, 0};
    if (a->dump_params && so_job_gather_params(j, &fp.params, &fp.nparams)) {
        free(ranks);
        return cli_error("train", CLI_FAIL, "--dump-params: %s", so_errmsg());
    }
    int rc = so_job_rank(j) == 0 ? report(a, j, r, ranks, &fp) : CLI_OK;
    free(ranks);
    free(fp.params);
    return rc;
}

static int dump_params(const char *path, const float *params, size_t count)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(params, sizeof(float), count, f);
    return (fclose(f) != 0 || n != count) ? -1 : 0;
}

/* Whether hier's collectives (the gradient allreduces; the sharded
 * strategies' reduce-scatters and allgathers) ran zero-copy on registered
 * buffers (above the one-barrier size; this rank's counts). */
static void hier_paths(const so_job *j)
{
    unsigned long long zc, copied;
    so_job_hier_paths(j, &zc, &copied);
    if (zc + copied > 0)
        printf("hier: %llu collectives zero-copy on registered buffers, %llu copied (window or ring)\n",
               zc, copied);
    unsigned long long tcp, mpi;
    so_job_hier_across(j, &tcp, &mpi);
    if (tcp + mpi > 0)
        printf("hier across nodes: %llu steps on scaleout's tcp ring, %llu on MPI\n", tcp, mpi);
}

static void report_comm(so_job *j, const so_train_result *r, const double *ranks)
{
    int world = so_job_world(j);
    double comm = 0, hidden = 0;
    for (int k = 0; k < world; k++) {
        comm += ranks[k * RANK_FIELDS + RK_COMM_EXPOSED] + ranks[k * RANK_FIELDS + RK_COMM_OVERLAPPED];
        hidden += ranks[k * RANK_FIELDS + RK_COMM_OVERLAPPED];
    }
    printf("communication: %.3f s per rank, %.0f%% overlapped with backward (%d gradient buckets%s)\n",
           comm / world, comm > 0 ? 100 * hidden / comm : 0, r->nbuckets,
           r->step_buckets ? ", each stepped as it arrives" : "");
    if (r->bucket_plan_step)
        printf("bucket plan (auto, after step %ld): first %.3g MiB, then %.3g MiB; backward %.1f ms, "
               "predicted end of the last allreduce %.1f ms after backward began\n", r->bucket_plan_step,
               r->first_bucket_bytes / 1048576.0, r->bucket_bytes / 1048576.0, r->measured_backward * 1e3,
               r->predicted_comm_end * 1e3);
    hier_paths(j);
}

/* The pipeline's layout and its measured bubble beside the formula. */
static void report_pipeline(const so_job_config *c, so_job *j, const so_train_result *r)
{
    int stage, stages, replica, replicas;
    if (so_job_pipeline(j, &stage, &stages, &replica, &replicas))
        return;
    char chunks[48] = "";
    if (c->virtual_stages > 1)
        snprintf(chunks, sizeof chunks, " x %d chunks", c->virtual_stages);
    printf("pipeline: %d stages%s x %d replicas (%s), %s, %d micro-batches of %d: bubble %.3f measured, %.3f by the "
           "schedule's formula, %.3f with the stages' measured times\n", stages, chunks, replicas, c->placement,
           c->schedule, c->microbatches, c->batch / c->microbatches, r->pipe_bubble, r->pipe_bubble_formula,
           r->pipe_bubble_stages);
    double act, edge;
    for (int s = 0; !so_job_stage_memory(j, s, &act, &edge); s++)
        printf("  stage %d: activation memory %.1f MB, message buffers %.1f MB\n", s, act / 1e6, edge / 1e6);
    printf("  messages between stages: %.1f kB per step (every stage's, shared memory none), tensors as %s\n",
           r->steps > 0 ? r->pipe_bytes_sent / (double)r->steps / 1e3 : 0, r->pipe_wire_bf16 ? "bf16" : "f32");
}

/* The data lines (rank 0's loader): what was decoded, and when the trainer
 * waited on data for more than 5% of the step, what would stop it. */
static void report_data(const train_args *a, so_job *j, const so_train_result *r)
{
    so_loader_stats ds;
    so_job_data_stats(j, &ds);
    double steps = step_seconds(r), share = steps > 0 ? r->data_wait / steps : 0;
    int batch = a->cfg.batch * a->cfg.accumulate;
    if (ds.threads > 0)
        printf("data: %ld images decoded on %d thread(s), %.0f images/s per thread busy; %ld unreadable skipped; "
               "data wait %.2f ms per step (%.1f%%)\n", ds.decoded, ds.threads,
               ds.decode_seconds > 0 ? ds.decoded / ds.decode_seconds : 0, ds.skipped,
               r->nstep_seconds ? 1e3 * r->data_wait / r->nstep_seconds : 0, 100 * share);
    if (ds.staged_bytes > 0 || ds.local_bytes > 0)
        printf("stage-local: %.1f MB copied to %s in %.2f s, %.1f MB read back from it\n", ds.staged_bytes / 1e6,
               a->cfg.image.stage_local, ds.stage_seconds, ds.local_bytes / 1e6);
    if (share <= 0.05 || r->nstep_seconds < 2)
        return;
    int need = threads_needed(r, &ds, batch);
    if (ds.threads > 0 && need > 0)
        printf("data wait: the trainer waited on data %.0f%% of the step; decoding ran at %.0f images/s on %d "
               "thread(s) (%.0f per thread), the trainer takes %.0f images/s: --decode-threads %d would keep up\n",
               100 * share, ds.decode_seconds > 0 ? ds.decoded / (ds.decode_seconds / ds.threads) : 0, ds.threads,
               ds.decoded / ds.decode_seconds, (double)r->nstep_seconds * batch / (steps - r->data_wait), need);
    else
        printf("data wait: the trainer waited on data %.0f%% of the step (%.2f ms per step)\n", 100 * share,
               1e3 * r->data_wait / r->nstep_seconds);
}

static int report(const train_args *a, so_job *j, const so_train_result *r, const double *ranks,
                  const final_params *fp)
{
    double flops = so_graph_flops(so_job_graph(j)) * 3.0; /* forward + backward ~ 3x forward */
    long step;
    int found;
    if (r->steps == 0 && !so_job_resumed(j, &step, &found) && found)
        printf("trained 0 steps: the checkpoint resumed is at step %ld, where the run ends (raise --steps or "
               "--epochs to go on)", step); /* no loss: no step computed one */
    else
        printf("trained %ld steps in %.1f s: %.0f images/sec (%.1f GFLOP/s model), final loss %.4f", r->steps,
               r->wall_seconds, r->images_per_sec, r->images_per_sec * flops * 1e-9, r->final_loss);
    if (r->test_accuracy >= 0)
        printf(", test accuracy %.4f", r->test_accuracy);
    printf("\n");
    run_mfu u = mfu_of(j, r, a->cfg.threads);
    if (r->steps > 0 && u.peak_gflops > 0)
        printf("MFU: %.1f%% of the %s peak (%.0f GFLOP/s per core x %d core(s))\n", 100 * u.mfu, u.peak_name,
               u.peak_gflops, so_job_world(j) * (a->cfg.threads > 0 ? a->cfg.threads : 1));
    if (so_job_world(j) > 1 && ranks && r->nbuckets > 0)
        report_comm(j, r, ranks);
    report_pipeline(&a->cfg, j, r);
    report_compress(&a->cfg, r);
    cli_compress_auto_print(r);
    report_ps(&a->cfg, r);
    report_sync(&a->cfg, r);
    report_data(a, j, r);
    if (a->cfg.clip_norm > 0)
        printf("clipping: %ld of %ld steps scaled down to global norm %g (last step's norm %.4g)\n", r->clipped_steps,
               r->steps, (double)a->cfg.clip_norm, r->grad_norm);
    if (a->dump_params && dump_params(a->dump_params, fp->params, fp->nparams))
        return cli_error("train", CLI_USAGE, "--dump-params: cannot write '%s'", a->dump_params);
    if (!a->json)
        return CLI_OK;
    FILE *f = fopen(a->json, "w");
    if (!f)
        return cli_error("train", CLI_USAGE, "--json: cannot write '%s'", a->json);
    write_json(f, a, j, r, ranks);
    if (fclose(f) != 0)
        return cli_error("train", CLI_FAIL, "--json: error writing '%s'", a->json);
    return CLI_OK;
}

/* What runs where: the model and job shape, then the kernels (ISA, and for a
 * model with convolutions the algorithm each propagation got). */
/* "cuts by measured time: stages start at conv1, layer2.0.conv1" (the
 * input opens stage 0, so it starts at the node after it). */
static void print_cuts(const so_job *j, const so_graph *g)
{
    int first[64];
    const char *basis;
    int n = so_job_pipeline_cuts(j, first, 64, &basis);
    printf("cuts by %s: stages start at", basis);
    for (int s = 0; s < n && s < 64; s++)
        printf("%s %s", s ? "," : "", so_graph_node(g, s ? first[s] : 1)->name);
    printf(n > 64 ? ", ...\n" : "\n");
}

static void banner(const so_job_config *c, so_job *j)
{
    char conv[256];
    so_model *m = so_job_model(j);
    const so_graph *g = so_job_graph(j);
    printf("training %s (%zu parameters, %.3g GFLOPs/sample) on %s, %d rank(s) x batch %d, %d thread(s)\n",
           c->model, so_graph_nparams(g), so_graph_flops(g) * 1e-9, c->dataset, so_job_world(j), c->batch,
           c->threads);
    int stage, stages, replica, replicas;
    if (!so_job_pipeline(j, &stage, &stages, &replica, &replicas)) {
        printf("pipeline: %d stages x %d replicas (%s), %s schedule, %d micro-batches; rank 0 holds the last stage "
               "(%zu parameters)\n", stages, replicas, c->placement, c->schedule, c->microbatches, m->nparams);
        print_cuts(j, g);
    }
    printf("precision: %s%s\n", so_precision_name(m->precision),
           strcmp(c->precision, "auto") ? "" : m->precision == SO_PRECISION_BF16 ? " (auto: the CPU has AVX-512 BF16)"
                                                                                  : " (auto: no native BF16 on this CPU)");
    kernels_conv_summary(m, conv, sizeof conv);
    if (conv[0])
        printf("kernels: %s; convolutions (--conv-algo %s): %s\n", so_isa_label(so_cpu_isa()), c->conv_algo, conv);
    else
        printf("kernels: %s\n", so_isa_label(so_cpu_isa()));
}

/* Rank 0's lines about the checkpoints of the run. */
static void report_ckpt(so_job *j)
{
    so_job_ckpt_summary s;
    if (so_job_rank(j) != 0 || so_job_ckpt_stats(j, &s))
        return;
    if (s.complete + s.failed > 0)
        printf("checkpoints: %ld complete, %ld flushed, %ld failed; stall total %.6f s, max %.6f s per checkpoint "
               "(slowest rank); write %.1f MB/s, flush %.1f MB/s (rank 0; write = own shard %.1f MB/s + partner copy "
               "%.1f MB/s); background CPU %.4f s per rank; exit drain %.4f s\n",
               s.complete, s.flushed, s.failed, s.stall_total_s, s.stall_max_s, s.write_mb_s,
               s.flush_mb_s, s.own_write_mb_s, s.partner_mb_s, s.background_cpu_s, s.drain_s);
    if (s.daly_interval > 0)
        printf("checkpoint interval (Daly, --mtbf): %ld steps\n", s.daly_interval);
}

/* After a stop on SIGTERM (or SIGINT), once the checkpoint taken at that
 * step is durable: the status tells a scheduler to run the job again. */
static int stopped(so_job *j, long step)
{
    const char *sig = so_job_stop_signal() == SIGINT ? "SIGINT" : "SIGTERM";
    if (so_job_rank(j) == 0)
        fprintf(stderr, so_job_writes_checkpoints(j) ? "scaleout train: %s: stopped after step %ld and "
                                                       "checkpointed it; run again with --resume auto to continue "
                                                       "(exit %d)\n"
                                                     : "scaleout train: %s: stopped after step %ld; nothing "
                                                       "saved (no --ckpt-every) (exit %d)\n", sig, step, CLI_REQUEUE);
    return CLI_REQUEUE;
}

static void resumed(so_job *j)
{
    long step;
    int found;
    if (so_job_rank(j) == 0 && !so_job_resumed(j, &step, &found))
        printf(found ? "resuming from the checkpoint at step %ld\n" : "no checkpoint to resume from: starting at "
                                                                      "step %ld\n", step);
}

/* Training and what follows it; a failure during training may leave other
 * ranks inside a collective, so it ends the whole job. */
static int run(const train_args *a, so_job *j)
{
    progress_state ps;
    progress_init(&ps, a->progress, so_job_rank(j));
    if (so_job_rank(j) == 0 && ps.enabled)
        banner(&a->cfg, j);
    so_train_result r;
    int rc = so_job_train(j, progress_update, &ps, &r);
    if (rc) {
        rc = cli_job_train_error("train", j, rc);
    } else {
        report_ckpt(j);
        rc = finish(a, j, &r);
        const char *prof = so_job_profile_summary(j);
        if (!rc && prof[0])
            fputs(prof, stdout);
        so_job_ckpt_summary cs;
        if (!rc && !so_job_ckpt_stats(j, &cs) && cs.stopped_by_failure)
            rc = CLI_FAIL;
        if (!rc && so_job_stopped_step(j) >= 0)
            rc = stopped(j, so_job_stopped_step(j));
    }
    so_train_result_free(&r);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    so_job *j = NULL; /* SIGTERM and SIGINT are watched (main.c): the first stops training after a step */
    rc = so_job_create(&a.cfg, &j);
    if (rc)
        rc = cli_job_setup_error("train", j, rc);
    else {
        resumed(j);
        rc = run(&a, j);
    }
    so_job_free(j);
    return rc;
}
