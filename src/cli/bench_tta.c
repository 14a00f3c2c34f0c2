/* `scaleout bench tta`: time to accuracy of communication methods side by
 * side. Launches `scaleout bench accuracy` under mpirun or srun for every
 * method (a --compress or a --sync method) and seed, interleaved (seed after
 * seed, every method within a seed) so the machine's drift hits all alike,
 * and reports per method the median time to the target (a test accuracy, or
 * a validation loss for token data) against the first method's, the figure
 * at a fixed epoch and the bytes each step sends. The
 * link is whatever the launcher's ranks talk over (docs/COMPRESSION.md runs
 * it on shared memory and on emulated nodes). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "env.h"
#include "jread.h"
#include "scaleout/compress.h"
#include "scaleout/err.h"
#include "scaleout/sync.h"

#define CMD "bench tta"
#define MAX_METHODS 16
#define MAX_SEEDS 32
#define MAX_EPOCHS 256

typedef enum { TTA_BASELINE, TTA_COMPRESS, TTA_SYNC } tta_kind;

/* One run: one method, one seed. */
typedef struct {
    int seed, reached, epochs, threads;
    double tta;                       /* seconds to the target, NAN when not reached */
    double images_per_sec, final_metric; /* the last evaluation's accuracy (or validation loss) */
    double bytes_per_step;            /* what a rank sent per step (NAN: the method does not count it) */
    double dense_bytes_per_step;      /* the same gradients uncompressed (compress methods; else NAN) */
    char picked[32];                  /* --compress auto's choice ("" otherwise) */
    int ncurve;
    double curve_s[MAX_EPOCHS];       /* cumulative training seconds after each epoch */
    double curve_acc[MAX_EPOCHS];     /* test accuracy (validation loss under --target-loss) after each epoch */
} tta_run;

typedef struct {
    char name[64];
    tta_kind kind;
    tta_run runs[MAX_SEEDS];
    int reached;
    bench_stats tta, acc_at;          /* over the runs that reached the target / that ran at_epoch epochs */
    double speedup;                   /* first method's median TTA / this one's (0 when either is unknown) */
    double bytes_per_step, ratio;     /* medians; NAN when not counted */
} tta_method;

typedef struct {
    const char *methods_list, *seeds_list, *launcher, *launcher_args, *json, *keep;
    float target, target_loss;        /* one of them is -1 */
    int np, at_epoch;
    char **child;                     /* the arguments after "--", for every `bench accuracy` run */
    int nchild;
    tta_method methods[MAX_METHODS];
    int nmethods, seeds[MAX_SEEDS], nseeds;
} tta_args;

static const char *const launchers[] = {"mpirun", "srun", NULL};

/* Which flag a method entry goes to: "none" and "sync" are the baseline
 * (synchronous, uncompressed); a --sync method by its name; else --compress. */
static int classify(const char *text, tta_kind *kind)
{
    so_sync_spec ss;
    so_compress_spec cs;
    if (!strcmp(text, "none") || !strcmp(text, "sync"))
        *kind = TTA_BASELINE;
    else if (so_sync_parse(text, &ss) == 0)
        *kind = TTA_SYNC;
    else if (so_compress_parse(text, &cs) == 0)
        *kind = TTA_COMPRESS;
    else
        return cli_error(CMD, CLI_USAGE, "--methods: '%s' is neither a --compress nor a --sync method "
                         "(docs/COMPRESSION.md)", text);
    return CLI_OK;
}

static int parse_methods(tta_args *a)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", a->methods_list) >= (int)sizeof buf)
        return cli_error(CMD, CLI_USAGE, "--methods: the list is too long");
    const char *s = buf;
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (!len || len >= sizeof a->methods[0].name)
            return cli_error(CMD, CLI_USAGE, "--methods: '%s' has an empty or overlong entry", a->methods_list);
        if (a->nmethods == MAX_METHODS)
            return cli_error(CMD, CLI_USAGE, "--methods: more than %d methods", MAX_METHODS);
        tta_method *m = &a->methods[a->nmethods++];
        memcpy(m->name, s, len);
        m->name[len] = 0;
        if (classify(m->name, &m->kind))
            return CLI_USAGE;
        for (int i = 0; i + 1 < a->nmethods; i++)
            if (!strcmp(a->methods[i].name, m->name))
                return cli_error(CMD, CLI_USAGE, "--methods: '%s' is listed twice", m->name);
        s += len + (comma != NULL);
        if (comma && !*s)
            return cli_error(CMD, CLI_USAGE, "--methods: '%s' ends with a comma", a->methods_list);
    }
    return a->nmethods ? CLI_OK : cli_error(CMD, CLI_USAGE, "--methods: empty list");
}

static int parse_seeds(tta_args *a)
{
    const char *s = a->seeds_list;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > 2147483647L || (*end && *end != ','))
            return cli_error(CMD, CLI_USAGE, "--seeds: '%s' is not a list of seeds like 1,2,3", a->seeds_list);
        if (a->nseeds == MAX_SEEDS)
            return cli_error(CMD, CLI_USAGE, "--seeds: more than %d seeds", MAX_SEEDS);
        a->seeds[a->nseeds++] = (int)v;
        s = *end ? end + 1 : end;
        if (*end && !*s)
            return cli_error(CMD, CLI_USAGE, "--seeds: '%s' ends with a comma", a->seeds_list);
    }
    return a->nseeds ? CLI_OK : cli_error(CMD, CLI_USAGE, "--seeds: empty list");
}

/* The flags every run sets itself may not come after "--". */
static int check_child(const tta_args *a)
{
    static const char *const own[] = {"--seed", "--target", "--target-loss", "--compress", "--sync", "--json",
                                      "--mllog", NULL};
    for (int i = 0; i < a->nchild; i++)
        for (int k = 0; own[k]; k++) {
            size_t n = strlen(own[k]);
            if (!strncmp(a->child[i], own[k], n) && (!a->child[i][n] || a->child[i][n] == '='))
                return cli_error(CMD, CLI_USAGE, "'%s' after -- : each run sets it (use --methods, --seeds, "
                                 "--target)", a->child[i]);
        }
    return CLI_OK;
}

static int parse(tta_args *a, int argc, char **argv)
{
    int dash = argc;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            dash = i;
            break;
        }
    a->child = argv + (dash < argc ? dash + 1 : argc);
    a->nchild = dash < argc ? argc - dash - 1 : 0;
    const cli_opt opts[] = {
        {"methods", OPT_STR, &a->methods_list, "LIST", "methods to compare, the first the reference: none, a --compress "
         "or a --sync method, e.g. none,fp16,topk:0.01,powersgd:4,local:8 (required)", 0, -1, NULL},
        {"seeds", OPT_STR, &a->seeds_list, "LIST", "seeds, one run of every method each", 0, -1, NULL},
        {"target", OPT_FLOAT, &a->target, "ACC", "test accuracy to reach, in (0, 1] (this or --target-loss)", 0, 1,
         NULL},
        {"target-loss", OPT_FLOAT, &a->target_loss, "L", "validation loss to reach instead (--dataset tokens)", 0, 1e6,
         NULL},
        {"np", OPT_INT, &a->np, "N", "processes of every run", 1, 4096, NULL},
        {"at-epoch", OPT_INT, &a->at_epoch, "E", "report the accuracy after epoch E", 1, MAX_EPOCHS, NULL},
        {"launcher", OPT_CHOICE, &a->launcher, "NAME", "how to start the processes", 0, -1, launchers},
        {"launcher-args", OPT_STR, &a->launcher_args, "\"ARGS\"", "extra launcher arguments (split at spaces)", 0, -1,
         NULL},
        {"keep", OPT_STR, &a->keep, "DIR", "keep every run's result file, MLLOG and log in DIR", 0, -1, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write the comparison record (docs/FORMATS.md)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    int rc = cli_parse(CMD, "Time to accuracy of communication methods: runs `bench accuracy` for every method and "
                       "seed (interleaved); options after -- go to every run (model, data, batch, optimizer, "
                       "--max-epochs).", opts, dash, argv);
    if (rc)
        return rc;
    if (!a->methods_list)
        return cli_error(CMD, CLI_USAGE, "--methods is required (e.g. --methods none,fp16,local:8)");
    if ((a->target > 0) == (a->target_loss > 0))
        return cli_error(CMD, CLI_USAGE, "one of --target (in (0, 1]) and --target-loss (above 0) is required");
    if ((rc = parse_methods(a)) || (rc = parse_seeds(a)))
        return rc;
    return check_child(a);
}

/* The run's command line: the launcher, `bench accuracy`, the method's flag,
 * the seed, the target, then the user's arguments after "--". */
static void child_argv(const tta_args *a, const tta_method *m, int seed, const char *json, const char *mllog,
                       bench_launcher *l, bench_argv *v)
{
    bench_launch_argv(l, a->np, v);
    bench_argv_add(v, "bench");
    bench_argv_add(v, "accuracy");
    if (m->kind != TTA_BASELINE) {
        bench_argv_add(v, m->kind == TTA_SYNC ? "--sync" : "--compress");
        bench_argv_add(v, m->name);
    }
    bench_argv_add(v, "--seed");
    bench_argv_addf(v, "%.0f", seed);
    bench_argv_add(v, a->target_loss > 0 ? "--target-loss" : "--target");
    bench_argv_addf(v, "%.9g", a->target_loss > 0 ? a->target_loss : a->target);
    bench_argv_add(v, "--json");
    bench_argv_add(v, json);
    bench_argv_add(v, "--mllog");
    bench_argv_add(v, mllog);
    for (int i = 0; i < a->nchild; i++)
        bench_argv_add(v, a->child[i]);
}

static double num_or_nan(const jv *res, const char *path)
{
    const jv *x = jv_path(res, path);
    return x && x->t == JV_NUM ? x->num : NAN;
}

/* The run's figures from its `bench accuracy` record. */
static void read_run(const jv *res, int by_loss, tta_run *r)
{
    const jv *reached = jv_path(res, "results.reached");
    r->reached = reached && reached->t == JV_BOOL && reached->num != 0;
    r->tta = r->reached ? num_or_nan(res, "results.time_to_accuracy_seconds") : NAN;
    r->epochs = (int)jv_num(res, "results.epochs", 0);
    r->threads = (int)jv_num(res, "config.threads", 1);
    r->images_per_sec = jv_num(res, "results.images_per_sec", 0);
    r->final_metric = jv_num(res, by_loss ? "results.final_loss" : "results.final_accuracy", 0);
    r->bytes_per_step = num_or_nan(res, "results.compress_bytes_per_step");
    if (isnan(r->bytes_per_step))
        r->bytes_per_step = num_or_nan(res, "results.sync_bytes_per_step");
    r->dense_bytes_per_step = num_or_nan(res, "results.dense_bytes_per_step");
    snprintf(r->picked, sizeof r->picked, "%s", jv_str(res, "results.compress_auto.picked", ""));
    const jv *eps = jv_path(res, "epochs");
    double t = 0;
    r->ncurve = 0;
    for (const jv *e = eps && eps->t == JV_ARR ? eps->kid : NULL; e && r->ncurve < MAX_EPOCHS; e = e->next) {
        t += jv_num(e, "seconds", 0);
        r->curve_s[r->ncurve] = t;
        r->curve_acc[r->ncurve++] = jv_num(e, by_loss ? "test_loss" : "test_accuracy", NAN);
    }
}

static int one_run(const tta_args *a, tta_method *m, int si, const char *dir, bench_launcher *l)
{
    char json[4096], mllog[4096], log[4096], base[4200], err[512];
    char safe[64];
    snprintf(safe, sizeof safe, "%s", m->name);
    for (char *c = safe; *c; c++)
        if (*c == ':' || *c == '/')
            *c = '_';
    snprintf(base, sizeof base, "%s/%s-seed%d", dir, safe, a->seeds[si]);
    if (snprintf(json, sizeof json, "%s.json", base) >= (int)sizeof json ||
        snprintf(mllog, sizeof mllog, "%s.mllog", base) >= (int)sizeof mllog ||
        snprintf(log, sizeof log, "%s.log", base) >= (int)sizeof log)
        return cli_error(CMD, CLI_USAGE, "directory name too long: '%s'", dir);
    bench_argv v = {.n = 0};
    child_argv(a, m, a->seeds[si], json, mllog, l, &v);
    int st = bench_spawn(v.argv, log);
    if (st) {
        fprintf(stderr, "scaleout %s: %s, seed %d failed (exit %d), log %s:\n", CMD, m->name, a->seeds[si], st, log);
        bench_tail_log(log);
        return CLI_FAIL;
    }
    jv *res = jv_load(json, err, sizeof err);
    if (!res)
        return cli_error(CMD, CLI_FAIL, "%s", err);
    tta_run *r = &m->runs[si];
    r->seed = a->seeds[si];
    read_run(res, a->target_loss > 0, r);
    jv_free(res);
    if (!a->keep) {
        unlink(json);
        unlink(mllog);
        unlink(log);
    }
    double target = a->target_loss > 0 ? a->target_loss : a->target;
    if (r->reached)
        printf("  %s, seed %d: %.4f reached in %.3g s (%d epochs)\n", m->name, r->seed, target, r->tta, r->epochs);
    else
        printf("  %s, seed %d: %.4f not reached in %d epochs (last %.4f)\n", m->name, r->seed, target, r->epochs,
               r->final_metric);
    return CLI_OK;
}

/* Medians over the seeds; the speed-up against the first method. */
static void summarise(tta_args *a)
{
    for (int k = 0; k < a->nmethods; k++) {
        tta_method *m = &a->methods[k];
        double t[MAX_SEEDS], acc[MAX_SEEDS], bytes[MAX_SEEDS], ratio[MAX_SEEDS];
        int nt = 0, na = 0, nb = 0, nr = 0;
        for (int i = 0; i < a->nseeds; i++) {
            const tta_run *r = &m->runs[i];
            if (r->reached && isfinite(r->tta))
                t[nt++] = r->tta;
            if (r->ncurve >= a->at_epoch && isfinite(r->curve_acc[a->at_epoch - 1]))
                acc[na++] = r->curve_acc[a->at_epoch - 1];
            if (isfinite(r->bytes_per_step))
                bytes[nb++] = r->bytes_per_step;
            if (isfinite(r->bytes_per_step) && isfinite(r->dense_bytes_per_step) && r->bytes_per_step > 0)
                ratio[nr++] = r->dense_bytes_per_step / r->bytes_per_step;
        }
        m->reached = nt;
        bench_stats_of(t, nt, &m->tta);
        bench_stats_of(acc, na, &m->acc_at);
        bench_stats s;
        bench_stats_of(bytes, nb, &s);
        m->bytes_per_step = nb ? s.median : NAN;
        bench_stats_of(ratio, nr, &s);
        m->ratio = nr ? s.median : NAN;
    }
    const tta_method *ref = &a->methods[0];
    for (int k = 0; k < a->nmethods; k++) {
        tta_method *m = &a->methods[k];
        m->speedup = ref->reached && m->reached && m->tta.median > 0 ? ref->tta.median / m->tta.median : 0;
    }
}

static void print_table(const tta_args *a)
{
    const tta_method *ref = &a->methods[0];
    int by_loss = a->target_loss > 0;
    printf("\ntime to %.4g %s, %d processes, %d seed(s), median (min-max) over the runs that reached it\n",
           by_loss ? a->target_loss : a->target, by_loss ? "validation loss" : "test accuracy", a->np, a->nseeds);
    printf("%-18s %7s %24s %9s %10s %9s %12s %7s  %s\n", "method", "reached", "seconds to target", "vs first",
           by_loss ? "loss @ ep" : "acc @ ep", "vs first", "bytes/step", "ratio", "picked");
    for (int k = 0; k < a->nmethods; k++) {
        const tta_method *m = &a->methods[k];
        char reached[16], tta[64], sp[16], acc[16], dacc[16], bytes[24], ratio[16];
        snprintf(reached, sizeof reached, "%d/%d", m->reached, a->nseeds);
        if (m->reached)
            snprintf(tta, sizeof tta, "%.3g (%.3g-%.3g)", m->tta.median, m->tta.min, m->tta.max);
        else
            snprintf(tta, sizeof tta, "-");
        snprintf(sp, sizeof sp, m->speedup > 0 ? "%.2fx" : "-", m->speedup);
        snprintf(acc, sizeof acc, m->acc_at.n ? "%.4f" : "-", m->acc_at.median);
        snprintf(dacc, sizeof dacc, m->acc_at.n && ref->acc_at.n ? "%+.4f" : "-",
                 m->acc_at.median - ref->acc_at.median);
        snprintf(bytes, sizeof bytes, isfinite(m->bytes_per_step) ? "%.0f" : "-", m->bytes_per_step);
        snprintf(ratio, sizeof ratio, isfinite(m->ratio) ? "%.1fx" : "-", m->ratio);
        printf("%-18s %7s %24s %9s %10s %9s %12s %7s  %s\n", m->name, reached, tta, sp, acc, dacc, bytes, ratio,
               m->runs[0].picked[0] ? m->runs[0].picked : "");
    }
    printf("(%s after epoch %d; bytes/step: what a rank sends, where the method counts it)\n",
           by_loss ? "loss @ ep: validation loss" : "acc @ ep: test accuracy", a->at_epoch);
}

static void json_num_or_null(so_json *js, const char *key, double v)
{
    if (isfinite(v))
        so_json_num(js, key, v);
    else
        so_json_null(js, key);
}

static void json_run(so_json *js, const tta_run *r, int by_loss)
{
    so_json_obj_begin(js, NULL);
    so_json_int(js, "seed", r->seed);
    so_json_bool(js, "reached", r->reached);
    json_num_or_null(js, "time_to_accuracy_seconds", r->tta);
    so_json_int(js, "epochs", r->epochs);
    so_json_num(js, "final_metric", r->final_metric);
    so_json_num(js, "images_per_sec", r->images_per_sec);
    json_num_or_null(js, "bytes_per_step", r->bytes_per_step);
    if (r->picked[0])
        so_json_str(js, "compress_auto_picked", r->picked);
    so_json_arr_begin(js, "curve");
    for (int e = 0; e < r->ncurve; e++) {
        so_json_obj_begin(js, NULL);
        so_json_int(js, "epoch", e + 1);
        so_json_num(js, "seconds", r->curve_s[e]);
        json_num_or_null(js, by_loss ? "test_loss" : "test_accuracy", r->curve_acc[e]);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
    so_json_obj_end(js);
}

static int write_json(const tta_args *a)
{
    static const char *const kinds[] = {"baseline", "compress", "sync"};
    FILE *f;
    so_json js;
    int rc = bench_json_begin(CMD, a->json, "tta", &js, &f);
    if (rc)
        return rc;
    env_info e;
    env_collect(&e);
    so_json_obj_begin(&js, "config");
    so_json_num(&js, a->target_loss > 0 ? "target_loss" : "target", a->target_loss > 0 ? a->target_loss : a->target);
    so_json_int(&js, "np", a->np);
    so_json_int(&js, "at_epoch", a->at_epoch);
    so_json_arr_begin(&js, "seeds");
    for (int i = 0; i < a->nseeds; i++)
        so_json_int(&js, NULL, a->seeds[i]);
    so_json_arr_end(&js);
    so_json_str(&js, "launcher", a->launcher);
    so_json_str(&js, "launcher_args", a->launcher_args ? a->launcher_args : "");
    so_json_arr_begin(&js, "run_args");
    for (int i = 0; i < a->nchild; i++)
        so_json_str(&js, NULL, a->child[i]);
    so_json_arr_end(&js);
    so_json_obj_end(&js);
    env_write_json(&js, &e, a->methods[0].runs[0].threads, 1);
    so_json_arr_begin(&js, "methods");
    for (int k = 0; k < a->nmethods; k++) {
        const tta_method *m = &a->methods[k];
        so_json_obj_begin(&js, NULL);
        so_json_str(&js, "method", m->name);
        so_json_str(&js, "flag", kinds[m->kind]);
        so_json_int(&js, "reached", m->reached);
        bench_stats_json(&js, "time_to_accuracy_seconds", &m->tta);
        json_num_or_null(&js, "speedup", m->speedup > 0 ? m->speedup : NAN);
        bench_stats_json(&js, a->target_loss > 0 ? "loss_at_epoch" : "accuracy_at_epoch", &m->acc_at);
        json_num_or_null(&js, "bytes_per_step", m->bytes_per_step);
        json_num_or_null(&js, "compression_ratio", m->ratio);
        so_json_arr_begin(&js, "runs");
        for (int i = 0; i < a->nseeds; i++)
            json_run(&js, &m->runs[i], a->target_loss > 0);
        so_json_arr_end(&js);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    return bench_json_end(CMD, a->json, &js, f);
}

static int sweep(tta_args *a, const char *dir)
{
    bench_launcher *l = malloc(sizeof *l);
    if (!l || bench_launcher_init(l, a->launcher, a->launcher_args)) {
        free(l);
        return cli_error(CMD, CLI_FAIL, "cannot find the scaleout executable (/proc/self/exe)");
    }
    printf("%s: %d method(s) x %d seed(s), %d processes each, target %s %.4g (interleaved)\n", CMD, a->nmethods,
           a->nseeds, a->np, a->target_loss > 0 ? "loss" : "accuracy", a->target_loss > 0 ? a->target_loss : a->target);
    int rc = CLI_OK;
    for (int i = 0; !rc && i < a->nseeds; i++)
        for (int k = 0; !rc && k < a->nmethods; k++)
            rc = one_run(a, &a->methods[k], i, dir, l);
    free(l);
    if (rc)
        return rc;
    summarise(a);
    print_table(a);
    return a->json ? write_json(a) : CLI_OK;
}

int cmd_bench_tta(int argc, char **argv)
{
    tta_args *a = calloc(1, sizeof *a);
    if (!a)
        return cli_error(CMD, CLI_FAIL, "out of memory");
    a->seeds_list = "1,2,3"; /* field by field: a compound literal of this size would sit on the stack */
    a->launcher = "mpirun";
    a->np = 2;
    a->at_epoch = 1;
    a->target = -1;
    a->target_loss = -1;
    int rc = parse(a, argc, argv);
    if (rc) {
        free(a);
        return rc == CLI_HELP ? CLI_OK : rc;
    }
    char tmp[4096];
    const char *td = getenv("TMPDIR");
    if (a->keep)
        snprintf(tmp, sizeof tmp, "%s", a->keep);
    else
        snprintf(tmp, sizeof tmp, "%s/scaleout-tta-XXXXXX", td && *td ? td : "/tmp");
    if (a->keep ? (mkdir(tmp, 0755) && errno != EEXIST) : !mkdtemp(tmp))
        rc = cli_error(CMD, CLI_USAGE, "cannot create the directory '%s'", tmp);
    else
        rc = sweep(a, tmp);
    if (!a->keep && rc == CLI_OK)
        rmdir(tmp);
    free(a);
    return rc;
}
