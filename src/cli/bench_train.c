/* `scaleout bench train`: training throughput the way tf_cnn_benchmarks
 * measures it — warm-up steps, then timed steps; total images/sec = workers x
 * timed steps x per-worker batch / elapsed time after warm-up — through the
 * same job builder and trainer as `scaleout train`, alone or under mpirun. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "env.h"
#include "kernels.h"
#include "scaleout/err.h"
#include "scaleout/job.h"
#include "scaleout/timer.h"
#include "scaleout/zoo.h"

/* The flags: those that shape the job write into its configuration; the
 * rest are the benchmark's own (job_config derives the job's from them). */
typedef struct {
    so_job_config cfg;
    const char *json;
    int warmup, batches, display, no_pin, synthetic, no_overlap;
    float bucket_mb;
} bt_args;

static const char *const datasets[] = {"synthetic", "fashion-mnist", "mnist", "cifar10", "imagefolder", "tfrecord", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw", NULL};

#define SUMMARY                                                                                              \
    "Training throughput, tf_cnn_benchmarks style: --num-warmup-batches untimed steps, then --num-batches " \
    "timed ones; alone or under mpirun."

static int parse(bt_args *a, int argc, char **argv)
{
    *a = (bt_args){.warmup = 10, .batches = 100, .display = 10, .bucket_mb = 25};
    so_job_defaults(&a->cfg);
    a->cfg.model = "resnet20";
    a->cfg.batch = 32;
    a->cfg.dataset = a->cfg.data_dir = NULL; /* synthetic unless --data-dir (below) */
    const cli_opt opts[] = {
        {"model", OPT_STR, &a->cfg.model, "NAME", "model from the zoo (see `scaleout models`)", 0, -1, NULL},
        {"batch-size", OPT_INT, &a->cfg.batch, "N", "samples per step on each rank", 1, 1 << 20, NULL},
        {"synthetic", OPT_FLAG, &a->synthetic, NULL, "random data in memory (the default without --data-dir)", 0, -1, NULL},
        {"data-dir", OPT_STR, &a->cfg.data_dir, "DIR", "real data from DIR (--dataset; default: imagefolder or tfrecord when DIR is one, else fashion-mnist)", 0, -1, NULL},
        {"decode-threads", OPT_INT, &a->cfg.image.decode_threads, "N", "image data sets: decoding threads per rank", 1, 256, NULL},
        {"image-size", OPT_INT, &a->cfg.image.image_size, "S", "image data sets: crop side", 1, 4096, NULL},
        {"dataset", OPT_CHOICE, &a->cfg.dataset, "NAME", "data set", 0, -1, datasets},
        {"synthetic-samples", OPT_INT, &a->cfg.synthetic_samples, "N", "synthetic data set size (default 32 batches)", 0, 1 << 30, NULL},
        {"num-warmup-batches", OPT_INT, &a->warmup, "N", "untimed steps first", 0, 1 << 30, NULL},
        {"num-batches", OPT_INT, &a->batches, "N", "timed steps", 1, 1 << 30, NULL},
        {"display-every", OPT_INT, &a->display, "N", "print images/sec and loss every N timed steps (0 = never)", 0, 1 << 30, NULL},
        {"optimizer", OPT_CHOICE, &a->cfg.optimizer, "NAME", "optimizer", 0, -1, optimizers},
        {"lr", OPT_FLOAT, &a->cfg.lr, "X", "learning rate", 0, 1e6, NULL},
        {"momentum", OPT_FLOAT, &a->cfg.momentum, "X", "momentum", 0, 1, NULL},
        {"seed", OPT_LONG, &a->cfg.seed, "N", "random seed", 0, 9.2e18, NULL},
        {"threads", OPT_INT, &a->cfg.threads, "N", "compute threads per process", 1, 1024, NULL},
        {"no-pin", OPT_FLAG, &a->no_pin, NULL, "do not pin compute threads to cores", 0, -1, NULL},
        {"backend", OPT_CHOICE, &a->cfg.backend, "NAME", "compute backend", 0, -1, cli_backends},
        {"precision", OPT_CHOICE, &a->cfg.precision, "NAME", "compute precision: fp32, bf16 (native AVX-512 BF16 only), auto (bf16 where native)", 0, -1, cli_precisions},
        {"conv-algo", OPT_CHOICE, &a->cfg.conv_algo, "NAME", "convolution algorithm: auto (Winograd where faster), direct, winograd", 0, -1, cli_conv_algos},
        {"prefetch", OPT_INT, &a->cfg.prefetch, "N", "batches prepared ahead on a background thread", 0, 64, NULL},
        {"allreduce", OPT_STR, &a->cfg.allreduce, "ALGO", "allreduce algorithm for gradients", 0, -1, NULL},
        {"bucket-mb", OPT_FLOAT, &a->bucket_mb, "MB", "gradient bucket size in MiB", 0.001, 4096, NULL},
        {"no-overlap", OPT_FLAG, &a->no_overlap, NULL, "allreduce after backward instead of during it", 0, -1, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write the result record (docs/FORMATS.md)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    int rc = cli_parse("bench train", SUMMARY, opts, argc, argv);
    if (rc)
        return rc;
    if (a->synthetic && a->cfg.data_dir)
        return cli_error("bench train", CLI_USAGE, "--synthetic and --data-dir exclude each other");
    if (!a->cfg.dataset && a->cfg.data_dir) /* tf_cnn_benchmarks' --data_dir: ImageNet as it is stored */
        a->cfg.dataset = cli_image_kind(a->cfg.data_dir);
    if (!a->cfg.dataset)
        a->cfg.dataset = a->cfg.data_dir ? "fashion-mnist" : "synthetic";
    if (strcmp(a->cfg.dataset, "synthetic") && !a->cfg.data_dir)
        a->cfg.data_dir = "/usr/share/datasets/fashion-mnist";
    if (!strcmp(a->cfg.dataset, "synthetic") && a->cfg.data_dir)
        return cli_error("bench train", CLI_USAGE, "--data-dir needs a real --dataset, not synthetic");
    if (so_zoo_check(a->cfg.model))
        return cli_error("bench train", CLI_USAGE, "--model: %s (see `scaleout models`)", so_errmsg());
    return CLI_OK;
}

/* Display every --display-every timed steps (rank 0), tf_cnn style. */
typedef struct {
    const bt_args *a;
    bench_rec *rec;
    const so_model *m;
    int rank, world;
    long last_step;
    double last_t;
} display;

static void on_progress(void *arg, const so_progress *p)
{
    display *d = arg;
    if (p->done || d->rank != 0 || d->a->display <= 0)
        return;
    double h0 = so_now();
    bench_rec *r = d->rec;
    long timed = r->n - d->a->warmup;
    if (timed == 0) {
        d->last_step = r->n;
        d->last_t = r->t1[r->n - 1];
        printf("Done warm up (%d steps)\nStep\tImg/sec\ttotal_loss\n", d->a->warmup);
    } else if (timed > 0 && timed % d->a->display == 0) {
        long first = d->last_step ? d->last_step : 0;
        double t0 = d->last_step ? d->last_t : r->t0[0], el = r->t1[r->n - 1] - t0;
        double ips = el > 0 ? (double)(r->n - first) * d->a->cfg.batch * d->world / el : 0;
        /* No fflush: a terminal is line-buffered anyway, and into a pipe or file
         * a flush per line would be a system call (and a scheduling point)
         * inside the timed region. */
        printf("%ld\timages/sec: %.1f\t%.3f\n", timed, ips, d->m->loss);
        d->last_step = r->n;
        d->last_t = r->t1[r->n - 1];
    }
    r->overhead += so_now() - h0;
}

/* Results of one rank after the run; gathered to rank 0 (index rank*RF). */
enum { RF_IPS, RF_ELAPSED, RF_OVERHEAD, RF_STEPTIME, RF_N };

typedef struct {
    long timed;
    double elapsed, total_ips, overhead_fraction, phase[BP_N], other;
    bench_stats step;
    double *ranks;      /* world x RF_N */
} bt_result;

static int summarize(const bt_args *a, const bench_rec *r, const so_dist *d, bt_result *out)
{
    int world = d ? d->world : 1, rank = d ? d->rank : 0;
    long w = a->warmup, n = r->n;
    out->timed = n - w;
    if (out->timed <= 0 || r->err)
        return so_err(SO_EINVAL, "no timed steps were recorded (%ld steps, %ld warm-up)", n, w);
    double *st = malloc((size_t)out->timed * sizeof *st), sum = 0;
    if (!st)
        return so_err(SO_ENOMEM, "out of memory");
    for (long i = w; i < n; i++) {
        st[i - w] = r->t1[i] - r->t0[i];
        sum += st[i - w];
        for (int p = 0; p < BP_N; p++)
            out->phase[p] += r->phase[i * BP_N + p];
    }
    bench_stats_of(st, out->timed, &out->step);
    free(st);
    out->other = sum;
    for (int p = 0; p < BP_N; p++) {
        out->other -= out->phase[p];
        out->phase[p] = sum > 0 ? out->phase[p] / sum : 0;
    }
    out->other = sum > 0 ? out->other / sum : 0;
    double elapsed = r->t1[n - 1] - (w > 0 ? r->t1[w - 1] : r->t0[0]);
    out->overhead_fraction = sum > 0 ? r->overhead / (r->t1[n - 1] - r->t0[0]) : 0;
    if (!(out->ranks = calloc((size_t)world * RF_N, sizeof *out->ranks)))
        return so_err(SO_ENOMEM, "out of memory");
    double *mine = out->ranks + (size_t)rank * RF_N;
    mine[RF_IPS] = elapsed > 0 ? (double)out->timed * a->cfg.batch / elapsed : 0;
    mine[RF_ELAPSED] = elapsed;
    mine[RF_OVERHEAD] = out->overhead_fraction;
    mine[RF_STEPTIME] = out->step.median;
    if (d && d->sum(d->ctx, out->ranks, world * RF_N))
        return so_err(SO_EIO, "gathering the per-rank results failed");
    /* tf_cnn_benchmarks: every worker runs the same steps; the slowest rank's
     * elapsed time bounds the job, so it is the one divided by. */
    out->elapsed = 0;
    for (int k = 0; k < world; k++)
        if (out->ranks[k * RF_N + RF_ELAPSED] > out->elapsed)
            out->elapsed = out->ranks[k * RF_N + RF_ELAPSED];
    out->total_ips = out->elapsed > 0 ? (double)world * out->timed * a->cfg.batch / out->elapsed : 0;
    return 0;
}

static void print_result(const bt_args *a, const bt_result *s, int world)
{
    printf("----------------------------------------------------------------\n");
    printf("total images/sec: %.2f\n", s->total_ips);
    printf("----------------------------------------------------------------\n");
    printf("per-rank images/sec:");
    for (int k = 0; k < world; k++)
        printf(" %.1f", s->ranks[k * RF_N + RF_IPS]);
    printf("\nstep time: mean %.2f ms +/- %.2f ms (sd), median %.2f ms, min %.2f, max %.2f (%ld timed steps after %d warm-up)\n",
           s->step.mean * 1e3, s->step.sd * 1e3, s->step.median * 1e3, s->step.min * 1e3, s->step.max * 1e3,
           s->timed, a->warmup);
    printf("time share: data wait %.1f%%, forward %.1f%%, backward %.1f%%, exposed comm %.1f%%, optimizer %.1f%%, other %.1f%%\n",
           100 * s->phase[BP_DATA], 100 * s->phase[BP_FORWARD], 100 * s->phase[BP_BACKWARD], 100 * s->phase[BP_COMM],
           100 * s->phase[BP_OPTIMIZER], 100 * s->other);
    printf("benchmark overhead (timing hooks, display): %.3f%% of run time\n", 100 * s->overhead_fraction);
}

static void write_config(so_json *js, const bt_args *a, so_model *m, int world)
{
    so_json_obj_begin(js, "config");
    so_json_str(js, "model", a->cfg.model);
    so_json_str(js, "dataset", a->cfg.dataset);
    if (a->cfg.data_dir)
        so_json_str(js, "data_dir", a->cfg.data_dir);
    so_json_int(js, "synthetic_samples", a->cfg.synthetic_samples);
    so_json_str(js, "backend", a->cfg.backend);
    so_json_str(js, "conv_algo", a->cfg.conv_algo);
    so_json_int(js, "batch_size", a->cfg.batch);
    so_json_int(js, "global_batch_size", (int64_t)a->cfg.batch * world);
    so_json_int(js, "world_size", world);
    so_json_int(js, "num_warmup_batches", a->warmup);
    so_json_int(js, "num_batches", a->batches);
    so_json_int(js, "display_every", a->display);
    so_json_str(js, "optimizer", a->cfg.optimizer);
    so_json_num(js, "lr", a->cfg.lr);
    so_json_num(js, "momentum", a->cfg.momentum);
    so_json_int(js, "seed", a->cfg.seed);
    so_json_int(js, "threads", a->cfg.threads);
    so_json_bool(js, "pin", !a->no_pin);
    so_json_int(js, "prefetch", a->cfg.prefetch);
    so_json_str(js, "allreduce", a->cfg.allreduce);
    so_json_num(js, "bucket_mb", a->bucket_mb);
    so_json_bool(js, "overlap", !a->no_overlap);
    so_json_int(js, "parameters", (int64_t)m->nparams);
    so_json_num(js, "flops_per_sample", so_graph_flops(m->g));
    so_json_obj_end(js);
    kernels_conv_json(js, m, a->cfg.conv_algo);
}

static int write_json(const bt_args *a, so_model *m, const bench_rec *r, const bt_result *s, int world)
{
    FILE *f;
    so_json js;
    int rc = bench_json_begin("bench train", a->json, "train", &js, &f);
    if (rc)
        return rc;
    env_info e;
    env_collect(&e);
    write_config(&js, a, m, world);
    env_write_json(&js, &e, a->cfg.threads, !a->no_pin);
    so_json_obj_begin(&js, "results");
    so_json_num(&js, "total_images_per_sec", s->total_ips);
    so_json_num(&js, "elapsed_seconds", s->elapsed);
    so_json_int(&js, "timed_steps", s->timed);
    so_json_int(&js, "warmup_steps", a->warmup);
    bench_stats_json(&js, "step_seconds", &s->step);
    so_json_obj_begin(&js, "phase_share");
    for (int p = 0; p < BP_N; p++)
        so_json_num(&js, bench_phase_names[p], s->phase[p]);
    so_json_num(&js, "other", s->other);
    so_json_obj_end(&js);
    so_json_num(&js, "final_loss", m->loss);
    so_json_num(&js, "overhead_fraction", s->overhead_fraction);
    so_json_obj_end(&js);
    so_json_arr_begin(&js, "ranks");
    for (int k = 0; k < world; k++) {
        so_json_obj_begin(&js, NULL);
        so_json_int(&js, "rank", k);
        so_json_num(&js, "images_per_sec", s->ranks[k * RF_N + RF_IPS]);
        so_json_num(&js, "elapsed_seconds", s->ranks[k * RF_N + RF_ELAPSED]);
        so_json_num(&js, "step_seconds_median", s->ranks[k * RF_N + RF_STEPTIME]);
        so_json_num(&js, "overhead_fraction", s->ranks[k * RF_N + RF_OVERHEAD]);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    bench_raw_json(&js, r);
    return bench_json_end("bench train", a->json, &js, f);
}

/* The job this benchmark runs: the training path of `scaleout train`, with
 * warm-up and timed steps, no evaluation, and the recorder's hooks. */
static void job_config(const bt_args *a, const so_train_hooks *hooks, so_job_config *c)
{
    *c = a->cfg;
    c->pin_threads = !a->no_pin;
    c->steps = (long)a->warmup + a->batches;
    c->eval_every = -1;
    c->warmup_steps = a->warmup;
    c->bucket_mb = a->bucket_mb;
    c->overlap = !a->no_overlap;
    c->hooks = hooks;
    c->build_id = cli_git_commit();
}

static int run(const bt_args *a, so_job *j, bench_rec *rec)
{
    int rank = so_job_rank(j), world = so_job_world(j);
    so_model *m = so_job_model(j);
    display disp = {a, rec, m, rank, world, 0, 0};
    if (rank == 0)
        printf("bench train: %s, %d rank(s) x batch %d (global %d), %s data, %d warm-up + %d timed steps, %d thread(s)\n",
               a->cfg.model, world, a->cfg.batch, a->cfg.batch * world, a->cfg.dataset, a->warmup, a->batches, a->cfg.threads);
    so_train_result r;
    int rc = so_job_train(j, on_progress, &disp, &r);
    bt_result s = {0};
    if (rc || (rc = summarize(a, rec, so_job_dist(j), &s)))
        rc = cli_job_train_error("bench train", j, rc);
    else if (rank == 0) {
        print_result(a, &s, world);
        rc = a->json ? write_json(a, m, rec, &s, world) : CLI_OK;
    }
    free(s.ranks);
    so_train_result_free(&r);
    return rc;
}

int cmd_bench_train(int argc, char **argv)
{
    bt_args a;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    bench_rec rec;
    so_train_hooks hooks;
    if ((rc = bench_rec_init(&rec, &hooks)))
        return cli_error("bench train", cli_exit_code(rc), "%s", so_errmsg());
    so_job_config cfg;
    job_config(&a, &hooks, &cfg);
    so_job *j = NULL;
    rc = so_job_create(&cfg, &j);
    rc = rc ? cli_job_setup_error("bench train", j, rc) : run(&a, j, &rec);
    so_job_free(j);
    bench_rec_free(&rec);
    return rc;
}
