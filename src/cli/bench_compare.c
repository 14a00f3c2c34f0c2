/* `scaleout bench compare A.json B.json ...`: the same metrics of benchmark
 * records side by side, each file's ratio to the first, and a flag where the
 * change is beyond the measured noise: the change (max(ratio, 1/ratio) - 1)
 * above either file's relative noise (3 standard errors of the median step
 * time from the raw timings, or the min-max spread of repeats) and above a
 * minimum (--threshold, 5%). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "jread.h"

#define MAX_FILES 16
#define MAX_METRICS 256

typedef struct {
    char name[96];
    double v, noise;   /* noise: relative spread of the measurement (0 if unknown) */
    int higher_better; /* 1: larger is better, 0: smaller is better, -1: informative only */
} metric;

typedef struct {
    const char *path;
    jv *doc;
    metric m[MAX_METRICS];
    int n;
} record;

static void add(record *r, const char *name, double v, double noise, int higher_better)
{
    if (r->n == MAX_METRICS || !isfinite(v))
        return;
    metric *m = &r->m[r->n++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->v = v;
    m->noise = noise;
    m->higher_better = higher_better;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Noise of the median of the timed entries of an array (skip the first):
 * three standard errors of the median, relative, with the standard deviation
 * estimated robustly from the interquartile range (sd ~ IQR / 1.349, SE of a
 * median ~ 1.2533 sd / sqrt(n)). Steps are treated as independent, so slow
 * drift between runs is not in it: that is what repeats measure. */
static double rel_noise(const jv *arr, int skip)
{
    if (!arr || arr->t != JV_ARR || arr->len - skip < 4)
        return 0;
    int n = 0;
    double *v = malloc((size_t)arr->len * sizeof *v);
    if (!v)
        return 0;
    int i = 0;
    for (const jv *k = arr->kid; k; k = k->next, i++)
        if (i >= skip && k->t == JV_NUM)
            v[n++] = k->num;
    double r = 0;
    if (n >= 4) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
        double iqr = v[(3 * n) / 4] - v[n / 4];
        r = med > 0 ? 3 * 1.2533 * (iqr / 1.349) / sqrt((double)n) / med : 0;
    }
    free(v);
    return r;
}

/* Mean of the timed entries of an array, or NAN. */
static double mean_of(const jv *arr, int skip)
{
    double s = 0;
    int n = 0, i = 0;
    for (const jv *k = arr && arr->t == JV_ARR ? arr->kid : NULL; k; k = k->next, i++)
        if (i >= skip && k->t == JV_NUM) {
            s += k->num;
            n++;
        }
    return n ? s / n : NAN;
}

static void train_metrics(record *r)
{
    const jv *d = r->doc;
    int skip = (int)jv_num(d, "results.warmup_steps", 0);
    double noise = rel_noise(jv_path(d, "raw.step_seconds"), skip);
    add(r, "total images/sec", jv_num(d, "results.total_images_per_sec", NAN), noise, 1);
    add(r, "step time median (ms)", 1e3 * jv_num(d, "results.step_seconds.median", NAN), noise, 0);
    add(r, "step time mean (ms)", 1e3 * jv_num(d, "results.step_seconds.mean", NAN), noise, 0);
    add(r, "step time sd (ms)", 1e3 * jv_num(d, "results.step_seconds.sd", NAN), 0, -1);
    for (int p = 0; p < BP_N; p++) {
        char name[96], path[64];
        snprintf(name, sizeof name, "%s per step (ms)", bench_phase_names[p]);
        snprintf(path, sizeof path, "raw.%s", bench_phase_names[p]);
        add(r, name, 1e3 * mean_of(jv_path(d, path), skip), rel_noise(jv_path(d, path), skip), -1);
    }
}

static void scaling_metrics(record *r)
{
    for (const jv *p = jv_path(r->doc, "points") ? jv_path(r->doc, "points")->kid : NULL; p; p = p->next) {
        char name[96];
        int np = (int)jv_num(p, "np", 0);
        double med = jv_num(p, "images_per_sec.median", NAN);
        double spread = med > 0 ? (jv_num(p, "images_per_sec.max", med) - jv_num(p, "images_per_sec.min", med)) / med : 0;
        snprintf(name, sizeof name, "np %d images/sec", np);
        add(r, name, med, spread, 1);
        snprintf(name, sizeof name, "np %d efficiency", np);
        add(r, name, jv_num(p, "efficiency", NAN), spread, 1);
    }
}

static void accuracy_metrics(record *r)
{
    const jv *d = r->doc;
    double noise = rel_noise(jv_path(d, "raw.step_seconds"), 10);
    add(r, "time to accuracy (s)", jv_num(d, "results.time_to_accuracy_seconds", NAN), noise, 0);
    add(r, "epochs", jv_num(d, "results.epochs", NAN), 0, -1);
    add(r, "images/sec", jv_num(d, "results.images_per_sec", NAN), noise, 1);
    add(r, "final accuracy", jv_num(d, "results.final_accuracy", NAN), 0, -1);
}

static void collective_metrics(record *r)
{
    for (const jv *p = jv_path(r->doc, "results") ? jv_path(r->doc, "results")->kid : NULL; p; p = p->next) {
        char name[96];
        double avg = jv_num(p, "avg_us", NAN), mn = jv_num(p, "min_us", avg);
        snprintf(name, sizeof name, "%s %.0f B (us)", jv_str(p, "algo", "?"), jv_num(p, "bytes", 0));
        add(r, name, avg, avg > 0 ? (avg - mn) / avg : 0, 0);
    }
}

static int load(record *r, const char *path)
{
    char err[600];
    r->path = path;
    if (!(r->doc = jv_load(path, err, sizeof err)))
        return cli_error("bench compare", CLI_USAGE, "%s", err);
    const char *kind = jv_str(r->doc, "kind", NULL);
    if (kind && !strcmp(kind, "train"))
        train_metrics(r);
    else if (kind && !strcmp(kind, "scaling"))
        scaling_metrics(r);
    else if (kind && !strcmp(kind, "accuracy"))
        accuracy_metrics(r);
    else if (jv_str(r->doc, "collective", NULL))
        collective_metrics(r);
    else
        return cli_error("bench compare", CLI_USAGE, "%s: not a scaleout benchmark record (no known \"kind\")", path);
    if (!r->n)
        return cli_error("bench compare", CLI_USAGE, "%s: no metrics found", path);
    return CLI_OK;
}

static const metric *find(const record *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->m[i].name, name))
            return &r->m[i];
    return NULL;
}

static const char *base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Prints the table; returns the number of flagged changes for the worse. */
static int table(const record *rs, int n, double threshold, int *flagged)
{
    int worse = 0;
    printf("%-28s", "metric");
    for (int f = 0; f < n; f++)
        printf(" %14.14s%s", base(rs[f].path), f ? "   ratio" : "");
    printf("   noise\n");
    for (int i = 0; i < rs[0].n; i++) {
        const metric *a = &rs[0].m[i];
        char flags[128] = "";
        double noise = a->noise;
        printf("%-28s %14.6g", a->name, a->v);
        for (int f = 1; f < n; f++) {
            const metric *b = find(&rs[f], a->name);
            if (!b) {
                printf(" %14s %7s", "-", "");
                continue;
            }
            double ratio = a->v != 0 ? b->v / a->v : NAN;
            double limit = fmax(threshold, fmax(a->noise, b->noise));
            noise = fmax(noise, b->noise);
            printf(" %14.6g %6.3fx", b->v, ratio);
            /* Symmetric: 2x slower and 2x faster are the same size of change. */
            double change = ratio > 0 ? fmax(ratio, 1 / ratio) - 1 : INFINITY;
            if (a->higher_better >= 0 && isfinite(ratio) && change > limit) {
                int better = a->higher_better ? ratio > 1 : ratio < 1;
                snprintf(flags + strlen(flags), sizeof flags - strlen(flags), " %s:%s", base(rs[f].path),
                         better ? "BETTER" : "WORSE");
                (*flagged)++;
                worse += !better;
            }
        }
        printf(" %6.1f%%%s\n", 100 * noise, flags);
    }
    return worse;
}

/* Names the configuration members that differ from the first file's: a
 * comparison across settings is reported as such, never silently. */
static void config_diff(const record *a, const record *b)
{
    char diff[512] = "";
    const jv *ca = jv_path(a->doc, "config");
    for (const jv *k = ca ? ca->kid : NULL; k; k = k->next) {
        const jv *o = jv_path(jv_path(b->doc, "config"), k->key);
        int same = o && o->t == k->t &&
                   (k->t == JV_STR ? !strcmp(k->str, o->str) : k->t == JV_NUM || k->t == JV_BOOL ? k->num == o->num : 1);
        if (!same && strlen(diff) + strlen(k->key) + 3 < sizeof diff)
            snprintf(diff + strlen(diff), sizeof diff - strlen(diff), "%s%s", *diff ? ", " : "", k->key);
    }
    if (*diff)
        printf("note: %s differs from %s in configuration: %s\n", base(b->path), base(a->path), diff);
}

int cmd_bench_compare(int argc, char **argv)
{
    float threshold = 0.05f;
    int fail = 0;
    const cli_opt opts[] = {
        {"threshold", OPT_FLOAT, &threshold, "X", "smallest relative change flagged, whatever the noise", 0, 10, NULL},
        {"fail-on-regression", OPT_FLAG, &fail, NULL, "exit 1 when a change for the worse is flagged", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    char **files = calloc((size_t)argc + 1, sizeof *files), **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nfiles, nrest;
    if (!files || !rest)
        return free(files), free(rest), cli_error("bench compare", CLI_FAIL, "out of memory");
    bench_split_args(argc, argv, opts, files, &nfiles, rest, &nrest);
    int rc = cli_parse("bench compare", "Compares benchmark records (A.json B.json ...): each against the first.",
                       opts, nrest, rest);
    if (!rc && (nfiles < 2 || nfiles > MAX_FILES))
        rc = cli_error("bench compare", CLI_USAGE, "need 2 to %d result files, got %d", MAX_FILES, nfiles);
    record *rs = rc ? NULL : calloc((size_t)nfiles, sizeof *rs);
    for (int f = 0; rs && !rc && f < nfiles; f++)
        rc = load(&rs[f], files[f]);
    if (!rc && rs) {
        const char *k0 = jv_str(rs[0].doc, "kind", "collective");
        for (int f = 1; !rc && f < nfiles; f++)
            if (strcmp(k0, jv_str(rs[f].doc, "kind", "collective")))
                rc = cli_error("bench compare", CLI_USAGE, "%s is a %s record but %s is a %s record", files[f],
                               jv_str(rs[f].doc, "kind", "collective"), files[0], k0);
    }
    if (!rc && rs) {
        for (int f = 1; f < nfiles; f++)
            config_diff(&rs[0], &rs[f]);
        int flagged = 0, worse = table(rs, nfiles, threshold, &flagged);
        printf("%d change(s) beyond the noise (flagged when max(ratio, 1/ratio) - 1 > max(%.0f%%, noise of either file)), "
               "%d for the worse\n", flagged, 100 * threshold, worse);
        rc = fail && worse ? CLI_FAIL : CLI_OK;
    }
    for (int f = 0; rs && f < nfiles; f++)
        jv_free(rs[f].doc);
    free(rs);
    free(files);
    free(rest);
    return rc == CLI_HELP ? CLI_OK : rc;
}
