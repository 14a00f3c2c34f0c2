/* `scaleout train`: builds a zoo model, loads data, trains on one process or
 * as one rank of an MPI job, prints progress (rank 0) and writes the --json
 * summary. All validation happens before training starts; bad input exits 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ckpt_glue.h"
#include "dist.h"
#include "job.h"
#include "env.h"
#include "progress.h"
#include "stop.h"
#include "scaleout/cpu.h"
#include "prof_glue.h"
#include "scaleout/err.h"
#include "scaleout/json.h"
#include "scaleout/mem.h"
#include "scaleout/threads.h"
#include "scaleout/train.h"
#include "scaleout/zoo.h"

typedef struct {
    const char *model, *dataset, *data_dir, *optimizer, *schedule, *backend, *json, *progress, *scale_lr;
    const char *dump_params, *allreduce, *bucket_mb_arg, *conv_algo;
    const char *profile, *profile_detail, *timeline_steps;
    float stall_warning, comm_timeout;
    int batch, epochs, threads, eval_every, accumulate, no_overlap, prefetch, augment, no_pin, synthetic_n;
    int warmup_steps, sync_bn;
    long steps, seed;
    float lr, momentum, weight_decay, warmup_epochs, step_epochs, gamma, first_bucket_mb;
    double bucket_mb;         /* < 0: auto */
    ckpt_args ck;
} train_args;

static const char *const datasets[] = {"fashion-mnist", "mnist", "cifar10", "synthetic", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw", NULL};
static const char *const schedules[] = {"constant", "step", "cosine", NULL};
static const char *const progress_modes[] = {"auto", "bar", "lines", "plain", "none", NULL};
static const char *const scalings[] = {"none", "linear", NULL};
static const char *const prof_details[] = {"layer", "block", "step", NULL};

#define SUMMARY "Trains a zoo model (see `scaleout models`) on one process, or on every rank under mpirun."

static int parse(train_args *a, int argc, char **argv)
{
    *a = (train_args){.model = "lenet5", .dataset = "fashion-mnist", .data_dir = "/usr/share/datasets/fashion-mnist",
                      .optimizer = "momentum", .schedule = "constant", .backend = "onednn", .conv_algo = "auto", .progress = "auto",
                      .scale_lr = "none", .batch = 64, .epochs = 1, .threads = 1, .eval_every = 1, .accumulate = 1,
                      .prefetch = 4, .synthetic_n = 0, .warmup_steps = 10, .seed = 42, .lr = 0.01f, .momentum = 0.9f,
                      .step_epochs = 30, .gamma = 0.1f, .bucket_mb_arg = "25", .first_bucket_mb = 1,
                      .allreduce = CLI_DEFAULT_ALLREDUCE, .stall_warning = 60, .comm_timeout = 300,
                      .profile_detail = "layer", .timeline_steps = "0:30"};
    ckpt_args_defaults(&a->ck);
    const cli_opt opts[] = {
        {"model", OPT_STR, &a->model, "NAME", "model from the zoo", 0, -1, NULL},
        {"dataset", OPT_CHOICE, &a->dataset, "NAME", "data set", 0, -1, datasets},
        {"data-dir", OPT_STR, &a->data_dir, "DIR", "directory of the data set files", 0, -1, NULL},
        {"batch-size", OPT_INT, &a->batch, "N", "samples per step on each rank", 1, 1 << 20, NULL},
        {"epochs", OPT_INT, &a->epochs, "N", "epochs to train", 1, 1 << 20, NULL},
        {"steps", OPT_LONG, &a->steps, "N", "optimizer steps (overrides --epochs; 0 = use epochs)", 0, 1e15, NULL},
        {"optimizer", OPT_CHOICE, &a->optimizer, "NAME", "optimizer", 0, -1, optimizers},
        {"lr", OPT_FLOAT, &a->lr, "X", "base learning rate", 0, 1e6, NULL},
        {"momentum", OPT_FLOAT, &a->momentum, "X", "momentum (momentum, nesterov)", 0, 1, NULL},
        {"weight-decay", OPT_FLOAT, &a->weight_decay, "X", "weight decay", 0, 1e3, NULL},
        {"lr-schedule", OPT_CHOICE, &a->schedule, "NAME", "learning-rate schedule", 0, -1, schedules},
        {"warmup-epochs", OPT_FLOAT, &a->warmup_epochs, "X", "linear warm-up length in epochs", 0, 1e6, NULL},
        {"lr-step-epochs", OPT_FLOAT, &a->step_epochs, "X", "step schedule: epochs between decays", 1e-3, 1e6, NULL},
        {"lr-gamma", OPT_FLOAT, &a->gamma, "X", "step schedule: decay factor", 0, 1, NULL},
        {"scale-lr", OPT_CHOICE, &a->scale_lr, "RULE", "scale lr with the number of ranks (Goyal et al.)", 0, -1, scalings},
        {"seed", OPT_LONG, &a->seed, "N", "random seed (same seed, same bits)", 0, 9.2e18, NULL},
        {"threads", OPT_INT, &a->threads, "N", "compute threads per process", 1, 1024, NULL},
        {"no-pin", OPT_FLAG, &a->no_pin, NULL, "do not pin compute threads to cores", 0, -1, NULL},
        {"backend", OPT_CHOICE, &a->backend, "NAME", "compute backend", 0, -1, job_backends},
        {"conv-algo", OPT_CHOICE, &a->conv_algo, "NAME", "convolution algorithm: auto (Winograd where faster), direct, winograd", 0, -1, job_conv_algos},
        {"eval-every", OPT_INT, &a->eval_every, "N", "evaluate every N epochs (0 = at the end, -1 = never)", -1, 1 << 20, NULL},
        {"augment", OPT_FLAG, &a->augment, NULL, "random crop (pad 4) and horizontal flip", 0, -1, NULL},
        {"prefetch", OPT_INT, &a->prefetch, "N", "batches prepared ahead on a background thread", 0, 64, NULL},
        {"synthetic-samples", OPT_INT, &a->synthetic_n, "N", "synthetic data set size (default: 32 batches)", 0, 1 << 30, NULL},
        {"bucket-mb", OPT_STR, &a->bucket_mb_arg, "MB|auto", "gradient bucket size in MiB; auto: chosen with the algorithm from the cost model", 0, -1, NULL},
        {"first-bucket-mb", OPT_FLOAT, &a->first_bucket_mb, "MB", "first and last (small) gradient buckets in MiB", 0.001, 4096, NULL},
        {"no-overlap", OPT_FLAG, &a->no_overlap, NULL, "allreduce after backward instead of during it", 0, -1, NULL},
        {"accumulate", OPT_INT, &a->accumulate, "K", "micro-batches per optimizer step", 1, 1 << 16, NULL},
        {"sync-bn", OPT_FLAG, &a->sync_bn, NULL, "batchnorm statistics over the global batch (SyncBatchNorm)", 0, -1, NULL},
        {"allreduce", OPT_STR, &a->allreduce, "ALGO", "allreduce algorithm for gradients", 0, -1, NULL},
        {"stall-warning", OPT_FLOAT, &a->stall_warning, "S", "report a collective stuck this long (0 = off)", 0, 1e9, NULL},
        {"comm-timeout", OPT_FLOAT, &a->comm_timeout, "S", "abort the job when a collective is stuck this long (0 = off)", 0, 1e9, NULL},
        {"warmup-steps", OPT_INT, &a->warmup_steps, "N", "first steps left out of images/sec", 0, 1 << 30, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write a machine-readable summary", 0, -1, NULL},
        {"dump-params", OPT_STR, &a->dump_params, "FILE", "write the final parameters as raw float32 (rank 0)", 0, -1, NULL},
        {"progress", OPT_CHOICE, &a->progress, "MODE", "progress display: auto (a bar on a terminal, lines in files, pipes and mpirun logs), bar, lines (one per epoch and every 30 s), none", 0, -1, progress_modes},
        {"profile", OPT_STR, &a->profile, "DIR", "write DIR/timeline.json and DIR/profile.json (docs/PROFILING.md)", 0, -1, NULL},
        {"profile-detail", OPT_CHOICE, &a->profile_detail, "LEVEL", "timeline detail of forward/backward", 0, -1, prof_details},
        {"timeline-steps", OPT_STR, &a->timeline_steps, "A:B", "steps A..B-1 in full detail, others summarised (or all)", 0, -1, NULL},
        CKPT_GLUE_OPTIONS(a),
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    int rc = cli_parse("train", SUMMARY, opts, argc, argv);
    if (rc)
        return rc;
    return cli_parse_bucket_mb("train", a->bucket_mb_arg, &a->bucket_mb);
}

/* Everything that must be equal on all ranks, as key=value lines; its hash is
 * compared at start-up and the first differing key is reported. */
static void config_text(const train_args *a, const so_graph *g, char *buf, size_t len)
{
    so_shape in = so_graph_input_shape(g);
    snprintf(buf, len,
             "version=%s\nmodel=%s\ninput=%dx%dx%d\nclasses=%d\nparams=%zu\nbackend=%s\nconv_algo=%s\ndataset=%s\n"
             "batch=%d\nepochs=%d\nsteps=%ld\noptimizer=%s\nlr=%g\nmomentum=%g\nweight_decay=%g\n"
             "schedule=%s\nwarmup_epochs=%g\nseed=%ld\naccumulate=%d\naugment=%d\nsync_bn=%d\n"
             "bucket_mb=%s\nfirst_bucket_mb=%g\nallreduce=%s\noverlap=%d\n",
             SCALEOUT_VERSION, a->model, in.c, in.h, in.w, so_graph_classes(g), so_graph_nparams(g), a->backend,
             a->conv_algo, a->dataset, a->batch, a->epochs, a->steps, a->optimizer, a->lr, a->momentum, a->weight_decay,
             a->schedule, a->warmup_epochs, a->seed, a->accumulate, a->augment, a->sync_bn,
             a->bucket_mb_arg, a->first_bucket_mb, a->allreduce, !a->no_overlap);
}

static job_spec spec_of(const train_args *a)
{
    return (job_spec){a->model, a->dataset, a->data_dir, a->backend, a->optimizer, a->batch, a->prefetch,
                      a->augment, a->synthetic_n, a->seed, a->momentum, a->weight_decay, a->conv_algo};
}

static void train_config(const train_args *a, const job *j, int world, so_train_config *c)
{
    so_train_defaults(c);
    long spe = so_loader_steps(j->ltrain) / a->accumulate;
    c->epochs = a->epochs;
    c->steps = a->steps;
    c->eval_every = a->eval_every;
    c->accumulate = a->accumulate;
    c->throughput_skip = a->warmup_steps;
    c->overlap = !a->no_overlap;
    c->sync_bn = a->sync_bn;
    c->auto_buckets = a->bucket_mb < 0;
    c->bucket_bytes = (size_t)((c->auto_buckets ? 25 : a->bucket_mb) * 1048576.0);
    c->first_bucket_bytes = (size_t)(a->first_bucket_mb * 1048576.0);
    so_lr_parse(a->schedule, &c->lr.kind);
    c->lr.base_lr = a->lr * (strcmp(a->scale_lr, "linear") ? 1.0f : (float)world);
    c->lr.warmup_steps = (long)(a->warmup_epochs * spe);
    c->lr.warmup_start = 1.0f / (float)(world > 1 ? world : 10);
    c->lr.step_size = (long)(a->step_epochs * spe);
    if (c->lr.step_size < 1)
        c->lr.step_size = 1;
    c->lr.gamma = a->gamma;
    c->lr.total_steps = a->steps ? a->steps : (long)a->epochs * spe;
}

static int report(const train_args *a, const job *j, const so_train_result *r, int world, const double *ranks);

/* Per-rank phase figures, gathered on every rank (index rank*RANK_FIELDS). */
enum { RK_COMPUTE, RK_COMM_EXPOSED, RK_COMM_OVERLAPPED, RK_DATA_WAIT, RK_IMAGES_PER_SEC, RANK_FIELDS };

static double *gather_ranks(const so_dist *d, const so_train_result *r, double comm_total, int batch)
{
    int world = d ? d->world : 1, rank = d ? d->rank : 0;
    double *v = calloc((size_t)world * RANK_FIELDS, sizeof *v);
    if (!v)
        return NULL;
    double *mine = v + (size_t)rank * RANK_FIELDS;
    mine[RK_COMPUTE] = r->forward + r->backward + r->optimizer;
    mine[RK_COMM_EXPOSED] = r->comm_exposed;
    mine[RK_COMM_OVERLAPPED] = comm_total > r->comm_exposed ? comm_total - r->comm_exposed : 0;
    mine[RK_DATA_WAIT] = r->data_wait;
    mine[RK_IMAGES_PER_SEC] = r->wall_seconds > 0 ? (double)r->steps * batch / r->wall_seconds : 0;
    if (d && d->sum(d->ctx, v, world * RANK_FIELDS)) {
        free(v);
        return NULL;
    }
    return v;
}

static void write_ranks(so_json *js, const double *v, int world)
{
    static const char *names[RANK_FIELDS] = {"compute_seconds", "comm_exposed_seconds", "comm_overlapped_seconds",
                                             "data_wait_seconds", "images_per_sec"};
    so_json_arr_begin(js, "ranks");
    for (int k = 0; v && k < world; k++) {
        so_json_obj_begin(js, NULL);
        so_json_int(js, "rank", k);
        for (int f = 0; f < RANK_FIELDS; f++)
            so_json_num(js, names[f], v[k * RANK_FIELDS + f]);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
}

static void write_json(FILE *f, const train_args *a, const job *j, const so_train_result *r, int world,
                       const double *ranks)
{
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    so_json_obj_begin(&js, "config");
    so_json_str(&js, "model", a->model);
    so_json_str(&js, "dataset", a->dataset);
    so_json_str(&js, "backend", a->backend);
    so_json_str(&js, "conv_algo", a->conv_algo);
    so_json_int(&js, "batch_size", a->batch);
    so_json_int(&js, "global_batch_size", (int64_t)a->batch * a->accumulate * world);
    so_json_int(&js, "world_size", world);
    so_json_int(&js, "threads", a->threads);
    so_json_bool(&js, "sync_bn", a->sync_bn);
    so_json_int(&js, "epochs", a->epochs);
    so_json_int(&js, "steps", a->steps);
    so_json_str(&js, "optimizer", a->optimizer);
    so_json_num(&js, "lr", a->lr);
    so_json_num(&js, "momentum", a->momentum);
    so_json_num(&js, "weight_decay", a->weight_decay);
    so_json_str(&js, "lr_schedule", a->schedule);
    so_json_num(&js, "warmup_epochs", a->warmup_epochs);
    so_json_int(&js, "seed", a->seed);
    so_json_int(&js, "parameters", (int64_t)j->m->nparams);
    so_json_num(&js, "flops_per_sample", so_graph_flops(j->m->g));
    so_json_str(&js, "version", SCALEOUT_VERSION);
    so_json_str(&js, "git", cli_git_commit());
    so_json_obj_end(&js);
    job_conv_json(&js, j->m, a->conv_algo);
    env_info e;
    env_collect(&e);
    env_write_json(&js, &e, a->threads, !a->no_pin);
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
    so_json_int(&js, "steps", r->steps);
    so_json_num(&js, "images_per_sec", r->images_per_sec);
    so_json_num(&js, "final_loss", r->final_loss);
    if (r->test_accuracy >= 0)
        so_json_num(&js, "test_accuracy", r->test_accuracy);
    else
        so_json_null(&js, "test_accuracy");
    so_json_num(&js, "wall_seconds", r->wall_seconds);
    so_json_num(&js, "data_wait_seconds", r->data_wait);
    so_json_obj_begin(&js, "phase_seconds");
    so_json_num(&js, "data_wait", r->data_wait);
    so_json_num(&js, "forward", r->forward);
    so_json_num(&js, "backward", r->backward);
    so_json_num(&js, "comm_exposed", r->comm_exposed);
    so_json_num(&js, "optimizer", r->optimizer);
    so_json_num(&js, "comm_total", r->comm_total);
    so_json_obj_end(&js);
    so_json_int(&js, "gradient_buckets", r->nbuckets);
    so_json_obj_begin(&js, "bucket_plan");
    so_json_bool(&js, "auto", a->bucket_mb < 0);
    so_json_int(&js, "first_bucket_bytes", (int64_t)r->first_bucket_bytes);
    so_json_int(&js, "bucket_bytes", (int64_t)r->bucket_bytes);
    if (r->bucket_plan_step) {
        so_json_int(&js, "chosen_after_step", r->bucket_plan_step);
        so_json_num(&js, "measured_backward_seconds", r->measured_backward);
        so_json_num(&js, "predicted_comm_end_seconds", r->predicted_comm_end);
    }
    so_json_obj_end(&js);
    write_ranks(&js, ranks, world);
    so_json_int(&js, "peak_rss_bytes", (int64_t)so_peak_rss());
    so_json_obj_end(&js);
}

static int finish(const train_args *a, const job *j, const so_train_result *r, const so_dist *d)
{
    int rank = d ? d->rank : 0, world = d ? d->world : 1;
    double *ranks = gather_ranks(d, r, r->comm_total, a->batch * a->accumulate);
    int rc = rank == 0 ? report(a, j, r, world, ranks) : CLI_OK;
    free(ranks);
    return rc;
}

static int dump_params(const char *path, const so_model *m)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(m->params, sizeof(float), m->nparams, f);
    return (fclose(f) != 0 || n != m->nparams) ? -1 : 0;
}

/* Whether the gradient allreduces ran zero-copy on the registered gradient
 * buffer (hier above its one-barrier size; this rank's counts). */
static void hier_paths(void)
{
#ifdef SCALEOUT_HAVE_MPI
    uint64_t zc, copied;
    so_comm_hier_path_counts(&zc, &copied);
    if (zc + copied > 0)
        printf("hier: %llu gradient allreduces zero-copy on registered gradients, %llu copied through the window\n",
               (unsigned long long)zc, (unsigned long long)copied);
#endif
}

static int report(const train_args *a, const job *j, const so_train_result *r, int world, const double *ranks)
{
    double flops = so_graph_flops(j->m->g) * 3.0; /* forward + backward ~ 3x forward */
    printf("trained %ld steps in %.1f s: %.0f images/sec (%.1f GFLOP/s model), final loss %.4f", r->steps,
           r->wall_seconds, r->images_per_sec, r->images_per_sec * flops * 1e-9, r->final_loss);
    if (r->test_accuracy >= 0)
        printf(", test accuracy %.4f", r->test_accuracy);
    printf("\n");
    if (world > 1 && ranks) {
        double comm = 0, hidden = 0;
        for (int k = 0; k < world; k++) {
            comm += ranks[k * RANK_FIELDS + RK_COMM_EXPOSED] + ranks[k * RANK_FIELDS + RK_COMM_OVERLAPPED];
            hidden += ranks[k * RANK_FIELDS + RK_COMM_OVERLAPPED];
        }
        printf("communication: %.3f s per rank, %.0f%% overlapped with backward (%d gradient buckets)\n",
               comm / world, comm > 0 ? 100 * hidden / comm : 0, r->nbuckets);
        if (r->bucket_plan_step)
            printf("bucket plan (auto, after step %ld): first %.3g MiB, then %.3g MiB; backward %.1f ms, "
                   "predicted end of the last allreduce %.1f ms after backward began\n", r->bucket_plan_step,
                   r->first_bucket_bytes / 1048576.0, r->bucket_bytes / 1048576.0, r->measured_backward * 1e3,
                   r->predicted_comm_end * 1e3);
        hier_paths();
    }
    if (a->dump_params && dump_params(a->dump_params, j->m))
        return cli_error("train", CLI_USAGE, "--dump-params: cannot write '%s'", a->dump_params);
    if (!a->json)
        return CLI_OK;
    FILE *f = fopen(a->json, "w");
    if (!f)
        return cli_error("train", CLI_USAGE, "--json: cannot write '%s'", a->json);
    write_json(f, a, j, r, world, ranks);
    if (fclose(f) != 0)
        return cli_error("train", CLI_FAIL, "--json: error writing '%s'", a->json);
    return CLI_OK;
}

/* What runs where: the model and job shape, then the kernels (ISA, and for a
 * model with convolutions the algorithm each propagation got). */
static void banner(const train_args *a, const job *j, int world)
{
    char conv[256];
    printf("training %s (%zu parameters, %.3g GFLOPs/sample) on %s, %d rank(s) x batch %d, %d thread(s)\n",
           a->model, j->m->nparams, so_graph_flops(j->m->g) * 1e-9, a->dataset, world, a->batch, a->threads);
    job_conv_summary(j->m, conv, sizeof conv);
    if (conv[0])
        printf("kernels: %s; convolutions (--conv-algo %s): %s\n", so_isa_label(so_cpu_isa()), a->conv_algo, conv);
    else
        printf("kernels: %s\n", so_isa_label(so_cpu_isa()));
}

/* After a stop on SIGTERM, once the checkpoint taken at that step is durable
 * (ckpt_glue_finish): the status tells a scheduler to run the job again. */
static int stopped(const ckpt_glue *cg, long step, int rank)
{
    if (rank == 0)
        fprintf(stderr, ckpt_glue_writes(cg) ? "scaleout train: SIGTERM: stopped after step %ld and checkpointed "
                                               "it; run again with --resume auto to continue (exit %d)\n"
                                             : "scaleout train: SIGTERM: stopped after step %ld; nothing saved "
                                               "(no --ckpt-every) (exit %d)\n", step, CLI_REQUEUE);
    return CLI_REQUEUE;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if (!so_zoo_find(a.model))
        return cli_error("train", CLI_USAGE, "--model: unknown model '%s' (see `scaleout models`)", a.model);
    dist_handle *dh = NULL;
    dist_options dopt = {a.stall_warning, a.comm_timeout, a.allreduce, a.ck.ranks_per_node};
    if ((rc = dist_open(&dopt, &dh)))
        return cli_error("train", CLI_FAIL, "%s", so_errmsg());
    const so_dist *d = dist_get(dh);
    int rank = d ? d->rank : 0, world = d ? d->world : 1;
    stop_install(); /* after MPI start-up, so no MPI library replaces the handler */
    stop_hook *sh = NULL;
    job j = {0};
    so_train_result r = {0};
    prof_glue *pg = NULL;
    ckpt_glue *cg = NULL;
    job_spec spec = spec_of(&a);
    rc = so_threads_set(a.threads, !a.no_pin);
    if (!rc)
        rc = job_load(&spec, &j);
    /* Set-up errors are agreed on by all ranks, so a failure on one rank ends
     * every rank cleanly instead of leaving the others in a collective (the
     * model's gradient buffer is a collective allocation: job.h). */
    if ((rc = dist_agree(dh, "train", rc ? cli_exit_code(rc) : 0, so_errmsg())))
        goto out;
    rc = job_build(&spec, d, &j);
    if ((rc = dist_agree(dh, "train", rc ? cli_exit_code(rc) : 0, so_errmsg())))
        goto out;
    char cfg[2048];
    config_text(&a, j.m->g, cfg, sizeof cfg);
    if ((rc = dist_check_config(dh, "train", cfg)))
        goto out;
    so_train_config tc;
    train_config(&a, &j, world, &tc);
    /* Checkpointing first: the profiler chains the hooks it finds. */
    if ((rc = ckpt_glue_open(&a.ck, dh, j.m, j.opt, a.model, a.optimizer, cfg, &tc, &cg)))
        goto out;
    /* Outside the checkpoint hook, so it can ask for a checkpoint at the step it stops after. */
    if ((rc = stop_hook_open(&tc, dh, cg, &sh)))
        goto out;
    prof_options po = {a.profile, a.profile_detail, a.timeline_steps, a.allreduce};
    if ((rc = prof_glue_start(&po, dh, j.m, &tc, &pg)))
        goto out;
    d = prof_glue_dist(pg, d);
    if (pg) {
        ckpt_glue_set_span(cg, prof_glue_checkpoint_span, pg);
        ckpt_glue_set_io(cg, prof_glue_checkpoint_io, pg); /* the writer and flush threads' work */
    }
    progress_state ps;
    progress_init(&ps, a.progress, rank);
    if (rank == 0 && ps.enabled)
        banner(&a, &j, world);
    rc = so_train(j.m, j.opt, j.ltrain, j.ltest, &tc, d, progress_update, &ps, &r);
    if (rc)
        rc = dist_fail(dh, "train", cli_exit_code(rc), so_errmsg());
    else if (!(rc = ckpt_glue_finish(cg))) {
        dist_comm_seconds(dh, &r.comm_total);
        rc = finish(&a, &j, &r, d);
        if (!rc)
            rc = prof_glue_finish(pg, &r, cfg);
        if (!rc && stop_hook_step(sh) >= 0)
            rc = stopped(cg, stop_hook_step(sh), rank);
    }
out:
    ckpt_glue_set_io(cg, NULL, NULL); /* the background threads stop calling into the profiler */
    prof_glue_free(pg, j.m);
    ckpt_glue_close(cg);
    stop_hook_close(sh);
    so_train_result_free(&r);
    job_free(&j);
    dist_close(dh);
    return rc;
}
