/* `scaleout bench scaling`: a strong or weak scaling sweep. Launches `scaleout
 * bench train` children under mpirun (with the flags scripts/mpirun-flags.sh
 * would add) or srun, interleaving the repeats of all process counts so slow
 * drift of the machine hits every point alike, and reports medians, min-max,
 * speedup and scaling efficiency against the smallest process count. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
#define MAX_ARGS 128

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

/* Open MPI's mpiexec needs --allow-run-as-root as root and --oversubscribe
 * beyond the core count; MPICH's Hydra needs neither (scripts/mpirun-flags.sh). */
static int is_open_mpi(const char *launcher)
{
    char cmd[600], line[256];
    snprintf(cmd, sizeof cmd, "'%s' --version 2>&1", launcher);
    FILE *p = strchr(launcher, '\'') ? NULL : popen(cmd, "r");
    int yes = 0;
    while (p && fgets(line, sizeof line, p))
        yes |= strstr(line, "Open MPI") || strstr(line, "OpenMPI") || strstr(line, "OpenRTE");
    if (p)
        pclose(p);
    return yes;
}

typedef struct {
    char *argv[MAX_ARGS];
    int n;
    char buf[8][64];
    int nbuf;
} argvec;

static void add(argvec *v, const char *s)
{
    if (v->n < MAX_ARGS - 1)
        v->argv[v->n++] = (char *)s;
    v->argv[v->n] = NULL;
}

static void addf(argvec *v, int x)
{
    if (v->nbuf < 8) {
        snprintf(v->buf[v->nbuf], sizeof v->buf[0], "%d", x);
        add(v, v->buf[v->nbuf++]);
    }
}

/* The child's command line: launcher, its flags, then `scaleout bench train`. */
static void child_argv(const sc_args *a, int np, int batch, const char *self, const char *json, char *extra,
                       int ompi, argvec *v)
{
    if (!strcmp(a->launcher, "srun")) {
        add(v, "srun");
        add(v, "-n");
    } else {
        const char *l = getenv("MPIEXEC");
        add(v, l && *l ? l : "mpiexec");
        if (ompi && geteuid() == 0)
            add(v, "--allow-run-as-root");
        if (ompi && np > sysconf(_SC_NPROCESSORS_ONLN))
            add(v, "--oversubscribe");
        add(v, "-np");
    }
    addf(v, np);
    for (char *t = extra ? strtok(extra, " \t") : NULL; t; t = strtok(NULL, " \t"))
        add(v, t);
    const char *fixed[] = {self, "bench", "train", "--model", a->model, "--backend", a->backend, "--conv-algo",
                           a->conv_algo, "--dataset", a->dataset, "--display-every", "0", "--json", json, NULL};
    for (int i = 0; fixed[i]; i++)
        add(v, fixed[i]);
    add(v, "--batch-size");
    addf(v, batch);
    add(v, "--num-batches");
    addf(v, a->batches);
    add(v, "--num-warmup-batches");
    addf(v, a->warmup);
    add(v, "--threads");
    addf(v, a->threads);
    if (a->synthetic_n) {
        add(v, "--synthetic-samples");
        addf(v, a->synthetic_n);
    }
}

/* Runs argv with stdout and stderr into log; returns the exit status (or -1). */
static int spawn(char **argv, const char *log)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

typedef struct {
    int np, batch;
    double ips[1000], step_median[1000];
    bench_stats s;
    double speedup, efficiency;
} point;

static void tail_log(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[512], last[3][512] = {"", "", ""};
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        snprintf(last[n++ % 3], sizeof last[0], "%s", line);
    for (int i = n > 3 ? n - 3 : 0; i < n; i++)
        fprintf(stderr, "  | %s", last[i % 3]);
    if (f)
        fclose(f);
}

static int one_run(const sc_args *a, point *p, int r, const char *dir, const char *self, int ompi)
{
    char json[4096], log[4096], extra[1024], err[512];
    if (snprintf(json, sizeof json, "%s/np%d-run%d.json", dir, p->np, r + 1) >= (int)sizeof json ||
        snprintf(log, sizeof log, "%s/np%d-run%d.log", dir, p->np, r + 1) >= (int)sizeof log)
        return cli_error("bench scaling", CLI_USAGE, "directory name too long: '%s'", dir);
    snprintf(extra, sizeof extra, "%s", a->launcher_args ? a->launcher_args : "");
    argvec v = {.n = 0};
    child_argv(a, p->np, p->batch, self, json, extra, ompi, &v);
    int st = spawn(v.argv, log);
    if (st) {
        fprintf(stderr, "scaleout bench scaling: np=%d run %d failed (exit %d), log %s:\n", p->np, r + 1, st, log);
        tail_log(log);
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
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return cli_error("bench scaling", CLI_FAIL, "cannot find the scaleout executable (/proc/self/exe)");
    self[n] = 0;
    const char *l = getenv("MPIEXEC");
    int ompi = !strcmp(a->launcher, "mpirun") && is_open_mpi(l && *l ? l : "mpiexec");
    int strong = !strcmp(a->mode, "strong");
    for (int i = 0; i < a->nnp; i++)
        pts[i] = (point){.np = a->np[i], .batch = strong ? a->batch / a->np[i] : a->batch};
    printf("bench scaling: %s %s scaling over %s processes, %d run(s) each (interleaved)\n", a->model, a->mode,
           a->np_list, a->repeat);
    for (int r = 0; r < a->repeat; r++)
        for (int i = 0; i < a->nnp; i++)
            if (one_run(a, &pts[i], r, dir, self, ompi))
                return CLI_FAIL;
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
