/* `scaleout bench scaling`: a strong or weak scaling sweep. Launches `scaleout
 * bench train` children under mpirun (with the flags scripts/mpirun-flags.sh
 * would add) or srun, interleaving the repeats of all process counts so slow
 * drift of the machine hits every point alike, and reports medians, min-max,
 * speedup and scaling efficiency against the smallest process count. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "env.h"
#include "kernels.h"
#include "jread.h"
#include "scaleout/err.h"
#include "scaleout/zoo.h"

#define MAX_NP 32

typedef struct {
    const char *model, *np_list, *mode, *launcher, *launcher_args, *json, *backend, *dataset, *keep;
    const char *conv_algo;
    int batch, repeat, warmup, batches, threads, synthetic_n;
    int np[MAX_NP], nnp;
} sc_args;

static const char *const modes[] = {"strong", "weak", NULL};
static const char *const launchers[] = {"mpirun", "srun", NULL};
static const char *const datasets[] = {"synthetic", "fashion-mnist", "mnist", "cifar10", NULL};

/* "1,2,4,8": positive, strictly increasing, at most MAX_NP. */
static int parse_np(sc_args *a)
{
    const char *s = a->np_list;
    a->nnp = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 1 || v > 4096 || (*end && *end != ','))
            return cli_error("bench scaling", CLI_USAGE, "--np: '%s' is not a list of process counts like 1,2,4,8",
                             a->np_list);
        if (a->nnp == MAX_NP)
            return cli_error("bench scaling", CLI_USAGE, "--np: more than %d process counts", MAX_NP);
        if (a->nnp && v <= a->np[a->nnp - 1])
            return cli_error("bench scaling", CLI_USAGE, "--np: '%s' must be strictly increasing", a->np_list);
        a->np[a->nnp++] = (int)v;
        s = *end ? end + 1 : end;
        if (*end && !*s)
            return cli_error("bench scaling", CLI_USAGE, "--np: '%s' ends with a comma", a->np_list);
    }
    return a->nnp ? CLI_OK : cli_error("bench scaling", CLI_USAGE, "--np: empty list");
}

static int parse(sc_args *a, int argc, char **argv)
{
    *a = (sc_args){.model = "resnet20", .mode = "weak", .launcher = "mpirun", .backend = "onednn", .conv_algo = "auto",
                   .dataset = "synthetic", .batch = 0, .repeat = 3, .warmup = 10, .batches = 100, .threads = 1};
    const cli_opt opts[] = {
        {"model", OPT_STR, &a->model, "NAME", "model from the zoo", 0, -1, NULL},
        {"np", OPT_STR, &a->np_list, "LIST", "process counts, e.g. 1,2,4,8 (required)", 0, -1, NULL},
        {"mode", OPT_CHOICE, &a->mode, "MODE", "strong: fixed global batch; weak: fixed per-rank batch", 0, -1, modes},
        {"batch-size", OPT_INT, &a->batch, "N", "global batch (strong, default 64) or per-rank batch (weak, default 32)", 1, 1 << 20, NULL},
        {"repeat", OPT_INT, &a->repeat, "R", "runs per process count (interleaved)", 1, 1000, NULL},
        {"num-warmup-batches", OPT_INT, &a->warmup, "N", "untimed steps per run", 0, 1 << 30, NULL},
        {"num-batches", OPT_INT, &a->batches, "N", "timed steps per run", 1, 1 << 30, NULL},
        {"threads", OPT_INT, &a->threads, "N", "compute threads per process", 1, 1024, NULL},
        {"backend", OPT_CHOICE, &a->backend, "NAME", "compute backend", 0, -1, cli_backends},
        {"conv-algo", OPT_CHOICE, &a->conv_algo, "NAME", "convolution algorithm: auto (Winograd where faster), direct, winograd", 0, -1, cli_conv_algos},
        {"dataset", OPT_CHOICE, &a->dataset, "NAME", "data set of the runs", 0, -1, datasets},
        {"synthetic-samples", OPT_INT, &a->synthetic_n, "N", "synthetic data set size", 0, 1 << 30, NULL},
        {"launcher", OPT_CHOICE, &a->launcher, "NAME", "how to start the processes", 0, -1, launchers},
        {"launcher-args", OPT_STR, &a->launcher_args, "\"ARGS\"", "extra launcher arguments (split at spaces)", 0, -1, NULL},
        {"keep", OPT_STR, &a->keep, "DIR", "keep every run's result file and log in DIR", 0, -1, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write the sweep record (docs/FORMATS.md)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    int rc = cli_parse("bench scaling", "Strong or weak scaling sweep: launches `bench train` for every process count.",
                       opts, argc, argv);
    if (rc)
        return rc;
    if (!a->np_list)
        return cli_error("bench scaling", CLI_USAGE, "--np is required (e.g. --np 1,2,4,8)");
    if ((rc = parse_np(a)))
        return rc;
    if (so_zoo_check(a->model))
        return cli_error("bench scaling", CLI_USAGE, "--model: %s (see `scaleout models`)", so_errmsg());
    int strong = !strcmp(a->mode, "strong");
    if (!a->batch)
        a->batch = strong ? 64 : 32;
    for (int i = 0; strong && i < a->nnp; i++)
        if (a->batch % a->np[i])
            return cli_error("bench scaling", CLI_USAGE,
                             "--batch-size %d (global, strong scaling) is not divisible by %d processes", a->batch,
                             a->np[i]);
    return CLI_OK;
}

/* The child's command line: the launcher, then `scaleout bench train`. */
static void child_argv(const sc_args *a, int np, int batch, const char *json, bench_launcher *l, bench_argv *v)
{
    bench_launch_argv(l, np, v);
    const char *fixed[] = {"bench", "train", "--model", a->model, "--backend", a->backend, "--conv-algo",
                           a->conv_algo, "--dataset", a->dataset, "--display-every", "0", "--json", json, NULL};
    for (int i = 0; fixed[i]; i++)
        bench_argv_add(v, fixed[i]);
    bench_argv_add(v, "--batch-size");
    bench_argv_addf(v, "%.0f", batch);
    bench_argv_add(v, "--num-batches");
    bench_argv_addf(v, "%.0f", a->batches);
    bench_argv_add(v, "--num-warmup-batches");
    bench_argv_addf(v, "%.0f", a->warmup);
    bench_argv_add(v, "--threads");
    bench_argv_addf(v, "%.0f", a->threads);
    if (a->synthetic_n) {
        bench_argv_add(v, "--synthetic-samples");
        bench_argv_addf(v, "%.0f", a->synthetic_n);
    }
}

typedef struct {
    int np, batch;
    double ips[1000], step_median[1000];
    bench_stats s;
    double speedup, efficiency;
} point;

static int one_run(const sc_args *a, point *p, int r, const char *dir, bench_launcher *l)
{
    char json[4096], log[4096], err[512];
    if (snprintf(json, sizeof json, "%s/np%d-run%d.json", dir, p->np, r + 1) >= (int)sizeof json ||
        snprintf(log, sizeof log, "%s/np%d-run%d.log", dir, p->np, r + 1) >= (int)sizeof log)
        return cli_error("bench scaling", CLI_USAGE, "directory name too long: '%s'", dir);
    bench_argv v = {.n = 0};
    child_argv(a, p->np, p->batch, json, l, &v);
    int st = bench_spawn(v.argv, log);
    if (st) {
        fprintf(stderr, "scaleout bench scaling: np=%d run %d failed (exit %d), log %s:\n", p->np, r + 1, st, log);
        bench_tail_log(log);
        return CLI_FAIL;
    }
    jv *res = jv_load(json, err, sizeof err);
    if (!res)
        return cli_error("bench scaling", CLI_FAIL, "%s", err);
    p->ips[r] = jv_num(res, "results.total_images_per_sec", 0);
    p->step_median[r] = jv_num(res, "results.step_seconds.median", 0);
    jv_free(res);
    if (!a->keep) {
        unlink(json);
        unlink(log);
    }
    printf("  np %d, run %d/%d: %.1f images/sec\n", p->np, r + 1, a->repeat, p->ips[r]);
    return CLI_OK;
}

static void print_table(const sc_args *a, const point *pts)
{
    printf("\n%s scaling, %s, %d warm-up + %d timed steps per run, median of %d run(s)\n", a->mode, a->model,
           a->warmup, a->batches, a->repeat);
    printf("%9s %14s %12s %30s %8s %10s\n", "processes", "per-rank batch", "global batch",
           "images/sec (median, min-max)", "speedup", "efficiency");
    for (int i = 0; i < a->nnp; i++) {
        const point *p = &pts[i];
        char ips[64];
        snprintf(ips, sizeof ips, "%.1f (%.1f-%.1f)", p->s.median, p->s.min, p->s.max);
        printf("%9d %14d %12d %30s %7.2fx %9.1f%%\n", p->np, p->batch, p->batch * p->np, ips, p->speedup,
               100 * p->efficiency);
    }
}

static int write_json(const sc_args *a, const point *pts)
{
    FILE *f;
    so_json js;
    int rc = bench_json_begin("bench scaling", a->json, "scaling", &js, &f);
    if (rc)
        return rc;
    env_info e;
    env_collect(&e);
    so_json_obj_begin(&js, "config");
    so_json_str(&js, "model", a->model);
    so_json_str(&js, "mode", a->mode);
    so_json_arr_begin(&js, "np");
    for (int i = 0; i < a->nnp; i++)
        so_json_int(&js, NULL, a->np[i]);
    so_json_arr_end(&js);
    so_json_int(&js, "batch_size", a->batch);
    so_json_int(&js, "repeat", a->repeat);
    so_json_int(&js, "num_warmup_batches", a->warmup);
    so_json_int(&js, "num_batches", a->batches);
    so_json_int(&js, "threads", a->threads);
    so_json_str(&js, "backend", a->backend);
    so_json_str(&js, "conv_algo", a->conv_algo);
    so_json_str(&js, "dataset", a->dataset);
    so_json_str(&js, "launcher", a->launcher);
    so_json_str(&js, "launcher_args", a->launcher_args ? a->launcher_args : "");
    so_json_obj_end(&js);
    env_write_json(&js, &e, a->threads, 1);
    so_json_arr_begin(&js, "points");
    for (int i = 0; i < a->nnp; i++) {
        const point *p = &pts[i];
        so_json_obj_begin(&js, NULL);
        so_json_int(&js, "np", p->np);
        so_json_int(&js, "batch_size", p->batch);
        so_json_int(&js, "global_batch_size", (int64_t)p->batch * p->np);
        bench_stats_json(&js, "images_per_sec", &p->s);
        so_json_num(&js, "speedup", p->speedup);
        so_json_num(&js, "efficiency", p->efficiency);
        so_json_arr_begin(&js, "runs");
        for (int r = 0; r < a->repeat; r++) {
            so_json_obj_begin(&js, NULL);
            so_json_num(&js, "images_per_sec", p->ips[r]);
            so_json_num(&js, "step_seconds_median", p->step_median[r]);
            so_json_obj_end(&js);
        }
        so_json_arr_end(&js);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    return bench_json_end("bench scaling", a->json, &js, f);
}

static int sweep(const sc_args *a, point *pts, const char *dir)
{
    bench_launcher *l = malloc(sizeof *l);
    if (!l || bench_launcher_init(l, a->launcher, a->launcher_args)) {
        free(l);
        return cli_error("bench scaling", CLI_FAIL, "cannot find the scaleout executable (/proc/self/exe)");
    }
    int strong = !strcmp(a->mode, "strong");
    for (int i = 0; i < a->nnp; i++)
        pts[i] = (point){.np = a->np[i], .batch = strong ? a->batch / a->np[i] : a->batch};
    printf("bench scaling: %s %s scaling over %s processes, %d run(s) each (interleaved)\n", a->model, a->mode,
           a->np_list, a->repeat);
    for (int r = 0; r < a->repeat; r++)
        for (int i = 0; i < a->nnp; i++)
            if (one_run(a, &pts[i], r, dir, l)) {
                free(l);
                return CLI_FAIL;
            }
    free(l);
    for (int i = 0; i < a->nnp; i++) {
        bench_stats_of(pts[i].ips, a->repeat, &pts[i].s);
        pts[i].speedup = pts[0].s.median > 0 ? pts[i].s.median / pts[0].s.median : 0;
        pts[i].efficiency = pts[i].speedup * a->np[0] / a->np[i];
    }
    print_table(a, pts);
    return a->json ? write_json(a, pts) : CLI_OK;
}

int cmd_bench_scaling(int argc, char **argv)
{
    sc_args a;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    char tmp[4096];
    const char *td = getenv("TMPDIR");
    if (a.keep)
        snprintf(tmp, sizeof tmp, "%s", a.keep);
    else
        snprintf(tmp, sizeof tmp, "%s/scaleout-scaling-XXXXXX", td && *td ? td : "/tmp");
    if (a.keep ? (mkdir(tmp, 0755) && errno != EEXIST) : !mkdtemp(tmp))
        return cli_error("bench scaling", CLI_USAGE, "cannot create the directory '%s'", tmp);
    point *pts = calloc((size_t)a.nnp, sizeof *pts);
    if (!pts)
        return cli_error("bench scaling", CLI_FAIL, "out of memory");
    rc = sweep(&a, pts, tmp);
    free(pts);
    if (!a.keep && rc == CLI_OK)
        rmdir(tmp);
    return rc;
}
