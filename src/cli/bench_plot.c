/* `scaleout bench plot FILE.json... -o DIR`: draws benchmark records with
 * gnuplot (no chart code here): scaling curves against ideal, throughput per
 * model, accuracy over time (one run, or each method of `bench tta`), and
 * the collective benchmark's latency / bus-bandwidth curves, each as PNG and SVG. Writes DIR/plots.gp and one .dat
 * file per chart, then runs gnuplot on them (they can be edited and rerun). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "jread.h"

typedef struct {
    const char *dir;
    FILE *gp;          /* the gnuplot script */
    const char *term;  /* gnuplot's PNG terminal */
    int charts, ntrain;
    char err[4400];
} plotter;

/* A file-name-safe copy of s (letters, digits, '-', '_', '.'). */
static void safe(char *dst, size_t len, const char *s)
{
    size_t i = 0;
    for (; s && *s && i + 1 < len; s++)
        dst[i++] = isalnum((unsigned char)*s) || *s == '-' || *s == '_' || *s == '.' ? *s : '_';
    dst[i] = 0;
}

static FILE *data_file(plotter *p, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        snprintf(p->err, sizeof p->err, "cannot write '%s'", path);
    return f;
}

/* Emits the lines that render the chart drawn by `body` to NAME.png and NAME.svg. */
static void chart(plotter *p, const char *name, const char *body)
{
    fprintf(p->gp, "\n# %s\nreset\nset terminal %s size 900,560 noenhanced font 'sans,11'\nset output '%s.png'\n%s\n"
                   "set terminal svg size 900,560 dynamic noenhanced font 'sans,11'\nset output '%s.svg'\nreplot\nunset output\n",
            name, p->term, name, body, name);
    p->charts++;
}

static int scaling_plot(plotter *p, const jv *d, int idx)
{
    char model[64], name[160], file[200], body[2048];
    safe(model, sizeof model, jv_str(d, "config.model", "model"));
    const char *mode = jv_str(d, "config.mode", "?");
    snprintf(name, sizeof name, "scaling-%s-%s-%d", model, !strcmp(mode, "strong") ? "strong" : "weak", idx);
    snprintf(file, sizeof file, "%s.dat", name);
    FILE *f = data_file(p, file);
    if (!f)
        return -1;
    const jv *pts = jv_path(d, "points");
    const jv *first = pts && pts->t == JV_ARR ? pts->kid : NULL;
    double np0 = first ? jv_num(first, "np", 1) : 1, ips0 = first ? jv_num(first, "images_per_sec.median", 0) : 0;
    fprintf(f, "# np median min max ideal efficiency global_batch\n");
    for (const jv *q = first; q; q = q->next) {
        double np = jv_num(q, "np", NAN);
        fprintf(f, "%g %g %g %g %g %g %g\n", np, jv_num(q, "images_per_sec.median", NAN),
                jv_num(q, "images_per_sec.min", NAN), jv_num(q, "images_per_sec.max", NAN), ips0 * np / np0,
                jv_num(q, "efficiency", NAN), jv_num(q, "global_batch_size", NAN));
    }
    fclose(f);
    snprintf(body, sizeof body,
             "set title '%s: %s scaling (%s batch %d)'\nset xlabel 'processes'\nset ylabel 'images/sec'\n"
             "set logscale x 2\nset logscale y 2\nset grid\nset key left top\nset xtics (", model, mode,
             !strcmp(mode, "strong") ? "global" : "per-rank", (int)jv_num(d, "config.batch_size", 0));
    for (const jv *q = first; q; q = q->next)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s%g", q == first ? "" : ", ", jv_num(q, "np", 0));
    snprintf(body + strlen(body), sizeof body - strlen(body),
             ")\nplot '%s' using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'measured (median, min-max)', \\\n"
             "     '%s' using 1:5 with lines dt 2 lw 2 title 'ideal (linear from the first point)', \\\n"
             "     '%s' using 1:2:(sprintf('%%.0f%%%%', 100*$6)) with labels offset 0,1.2 notitle",
             file, file, file);
    chart(p, name, body);
    return 0;
}

static int accuracy_plot(plotter *p, const jv *d, int idx)
{
    char model[64], name[160], file[200], body[1024];
    safe(model, sizeof model, jv_str(d, "config.model", "model"));
    snprintf(name, sizeof name, "accuracy-%s-%d", model, idx);
    snprintf(file, sizeof file, "%s.dat", name);
    FILE *f = data_file(p, file);
    if (!f)
        return -1;
    double t = 0;
    fprintf(f, "# epoch cumulative_train_seconds test_accuracy\n");
    const jv *eps = jv_path(d, "epochs");
    for (const jv *e = eps && eps->t == JV_ARR ? eps->kid : NULL; e; e = e->next) {
        t += jv_num(e, "seconds", 0);
        double acc = jv_num(e, "test_accuracy", NAN);
        if (isfinite(acc))
            fprintf(f, "%g %g %g\n", jv_num(e, "epoch", 0), t, acc);
    }
    fclose(f);
    snprintf(body, sizeof body,
             "set title '%s: test accuracy over training time (target %g)'\nset xlabel 'training seconds'\n"
             "set ylabel 'test accuracy'\nset grid\nset key right bottom\nset xrange [0:%g]\nset yrange [*:1]\n"
             "set offsets 0, 0, 0.02, 0.02\n"
             "plot '%s' using 2:3 with linespoints lw 2 pt 7 title 'test accuracy after each epoch', \\\n"
             "     %g with lines dt 2 lw 2 title 'target'",
             model, jv_num(d, "config.target", 0), t > 0 ? 1.05 * t : 1, file, jv_num(d, "config.target", 0));
    chart(p, name, body);
    return 0;
}

/* The run of a `bench tta` method to draw: the one whose time to the target
 * is nearest the method's median, or the first when none reached it. */
static const jv *tta_run_to_draw(const jv *m)
{
    const jv *runs = jv_path(m, "runs"), *best = runs && runs->t == JV_ARR ? runs->kid : NULL;
    double median = jv_num(m, "time_to_accuracy_seconds.median", NAN), gap = INFINITY;
    for (const jv *r = best; r && isfinite(median); r = r->next) {
        double t = jv_num(r, "time_to_accuracy_seconds", NAN);
        if (isfinite(t) && fabs(t - median) < gap) {
            gap = fabs(t - median);
            best = r;
        }
    }
    return best;
}

/* `bench tta`: test accuracy against training seconds, one curve per method. */
static int tta_plot(plotter *p, const jv *d, int idx)
{
    char name[32], body[8192];
    int by_loss = jv_path(d, "config.target_loss") != NULL;
    const char *what = by_loss ? "validation loss" : "test accuracy";
    double target = jv_num(d, by_loss ? "config.target_loss" : "config.target", 0), tmax = 0;
    snprintf(name, sizeof name, "tta-%d", idx);
    int at = snprintf(body, sizeof body,
                      "set title 'time to accuracy: %s over training time (target %g), median run of each "
                      "method'\nset xlabel 'training seconds'\nset ylabel '%s'\nset grid\n"
                      "set key right %s\nset yrange [*:%s]\nset offsets 0, 0, 0.02, 0.02\nplot ", what, target, what,
                      by_loss ? "top" : "bottom", by_loss ? "*" : "1");
    const jv *ms = jv_path(d, "methods");
    int k = 0;
    for (const jv *m = ms && ms->t == JV_ARR ? ms->kid : NULL; m; m = m->next, k++) {
        char method[64], file[256];
        safe(method, sizeof method, jv_str(m, "method", "method"));
        snprintf(file, sizeof file, "%s-%d-%s.dat", name, k, method);
        FILE *f = data_file(p, file);
        if (!f)
            return -1;
        const jv *run = tta_run_to_draw(m), *curve = run ? jv_path(run, "curve") : NULL;
        fprintf(f, "# epoch cumulative_train_seconds %s (seed %d)\n", by_loss ? "validation_loss" : "test_accuracy",
                (int)jv_num(run, "seed", 0));
        for (const jv *e = curve && curve->t == JV_ARR ? curve->kid : NULL; e; e = e->next) {
            double t = jv_num(e, "seconds", NAN), acc = jv_num(e, by_loss ? "test_loss" : "test_accuracy", NAN);
            if (isfinite(t) && isfinite(acc))
                fprintf(f, "%g %g %g\n", jv_num(e, "epoch", 0), t, acc);
            tmax = isfinite(t) && t > tmax ? t : tmax;
        }
        fclose(f);
        if (at > 0 && (size_t)at < sizeof body)
            at += snprintf(body + at, sizeof body - (size_t)at, "'%s' using 2:3 with linespoints lw 2 pt 7 title '%s', ",
                           file, jv_str(m, "method", "method"));
    }
    if (at > 0 && (size_t)at < sizeof body)
        snprintf(body + at, sizeof body - (size_t)at, "%g with lines dt 2 lw 2 title 'target'", target);
    if (at <= 0 || (size_t)at >= sizeof body) {
        snprintf(p->err, sizeof p->err, "%s: too many methods to draw in one chart", name);
        return -1;
    }
    char full[8400];
    snprintf(full, sizeof full, "set xrange [0:%g]\n%s", tmax > 0 ? 1.05 * tmax : 1, body);
    chart(p, name, full);
    return 0;
}

/* One chart for all train records: total images/sec per model and process count. */
static int train_rows(plotter *p, const jv *d, FILE *f)
{
    char model[64];
    safe(model, sizeof model, jv_str(d, "config.model", "model"));
    fprintf(f, "\"%s np%d b%d\" %g\n", model, (int)jv_num(d, "config.world_size", 1),
            (int)jv_num(d, "config.batch_size", 0), jv_num(d, "results.total_images_per_sec", NAN));
    p->ntrain++;
    return 0;
}

static void throughput_chart(plotter *p)
{
    char body[1024];
    snprintf(body, sizeof body,
             "set title 'training throughput per model (total images/sec, tf_cnn_benchmarks formula)'\n"
             "set ylabel 'images/sec'\nset logscale y 10\nset grid ytics\nset style fill solid 0.6 border -1\n"
             /* vertical labels: a whole zoo at np 1 and 2 is 30 bars, and slanted ones overlapped */
             "set boxwidth 0.7\nset xtics rotate by 90 right noenhanced font ',9'\nset yrange [1:*]\nunset key\n"
             "set offsets 0.5, 0.5, graph 0.1, 0\nset bmargin 10\nset rmargin 4\n"
             "plot 'throughput.dat' using 0:2:xtic(1) with boxes, \\\n"
             "     'throughput.dat' using 0:2:(sprintf('%%.0f', $2)) with labels rotate by 90 left offset 0,0.4 "
             "font ',8'");
    chart(p, "throughput", body);
}

/* Tics every 4x of the message sizes, labelled in binary units (4, 64, 1K, 16K...). */
static void size_tics(const jv *res, char *out, size_t len)
{
    double lo = INFINITY, hi = 0;
    for (const jv *r = res && res->t == JV_ARR ? res->kid : NULL; r; r = r->next) {
        double b = jv_num(r, "bytes", NAN);
        if (b > 0) {
            lo = fmin(lo, b);
            hi = fmax(hi, b);
        }
    }
    snprintf(out, len, "set xtics (");
    static const char *const unit[] = {"", "K", "M", "G"};
    int first = 1;
    for (double b = lo; isfinite(lo) && b <= hi && strlen(out) + 32 < len; b *= 4) {
        int u = 0;
        double v = b;
        while (v >= 1024 && u < 3) {
            v /= 1024;
            u++;
        }
        snprintf(out + strlen(out), len - strlen(out), "%s\"%g%s\" %.0f", first ? "" : ", ", v, unit[u], b);
        first = 0;
    }
    snprintf(out + strlen(out), len - strlen(out), ")");
    if (first)
        snprintf(out, len, "set xtics auto");
}

/* The collective benchmark's --json: latency and bus bandwidth per algorithm. */
static int collective_plot(plotter *p, const jv *d, int idx)
{
    char coll[64], name[160], file[200], body[2048];
    safe(coll, sizeof coll, jv_str(d, "collective", "coll"));
    int ranks = (int)jv_num(d, "ranks", 0);
    snprintf(name, sizeof name, "%s-np%d-%d", coll, ranks, idx);
    snprintf(file, sizeof file, "%s.dat", name);
    FILE *f = data_file(p, file);
    if (!f)
        return -1;
    /* One gnuplot data block per algorithm, in order of first appearance. */
    const jv *res = jv_path(d, "results");
    char algos[32][32];
    int nalgo = 0;
    for (const jv *r = res && res->t == JV_ARR ? res->kid : NULL; r; r = r->next) {
        const char *a = jv_str(r, "algo", "?");
        int k = 0;
        while (k < nalgo && strcmp(algos[k], a))
            k++;
        if (k == nalgo && nalgo < 32)
            safe(algos[nalgo++], sizeof algos[0], a);
    }
    for (int k = 0; k < nalgo; k++) {
        fprintf(f, "# %s: bytes avg_us busbw_gbs\n", algos[k]);
        for (const jv *r = res->kid; r; r = r->next) {
            char a[32];
            safe(a, sizeof a, jv_str(r, "algo", "?"));
            if (!strcmp(a, algos[k]))
                fprintf(f, "%g %g %g\n", jv_num(r, "bytes", NAN), jv_num(r, "avg_us", NAN),
                        jv_num(r, "busbw_gbs", NAN));
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
    char xtics[1024];
    size_tics(res, xtics, sizeof xtics);
    for (int which = 0; which < 2; which++) {
        snprintf(body, sizeof body,
                 "set title '%s on %d ranks: %s'\nset xlabel 'message size (bytes)'\nset ylabel '%s'\n"
                 "set logscale x 2\n%s\n%s\nset grid\nset key left top\nplot ",
                 coll, ranks, which ? "bus bandwidth" : "latency", which ? "bus bandwidth (GB/s)" : "time (us)",
                 which ? "unset logscale y" : "set logscale y 10", xtics);
        for (int k = 0; k < nalgo; k++)
            snprintf(body + strlen(body), sizeof body - strlen(body), "%s'%s' index %d using 1:%d with linespoints "
                     "lw 2 title '%s'", k ? ", \\\n     " : "", file, k, which ? 3 : 2, algos[k]);
        char cname[200];
        snprintf(cname, sizeof cname, "%s-%s", name, which ? "bandwidth" : "latency");
        if (nalgo)
            chart(p, cname, body);
    }
    return 0;
}

static int run_gnuplot(const char *dir)
{
    const char *gp = getenv("GNUPLOT");
    gp = gp && *gp ? gp : "gnuplot";
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (chdir(dir))
            _exit(126);
        execlp(gp, gp, "plots.gp", (char *)NULL);
        fprintf(stderr, "scaleout bench plot: cannot run %s: %s (install gnuplot-nox)\n", gp, strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* pngcairo renders best; the libgd `png` terminal is the fallback. */
static const char *png_terminal(void)
{
    const char *gp = getenv("GNUPLOT");
    char cmd[512];
    gp = gp && *gp ? gp : "gnuplot";
    if (strchr(gp, '\''))
        return "png";
    snprintf(cmd, sizeof cmd, "'%s' -e 'set terminal pngcairo' >/dev/null 2>&1", gp);
    return system(cmd) == 0 ? "pngcairo" : "png";
}

static int plot_file(plotter *p, const char *path, int idx, FILE *thr)
{
    jv *d = jv_load(path, p->err, sizeof p->err);
    if (!d)
        return -1;
    const char *kind = jv_str(d, "kind", "");
    int rc = 0;
    if (!strcmp(kind, "scaling"))
        rc = scaling_plot(p, d, idx);
    else if (!strcmp(kind, "train"))
        rc = train_rows(p, d, thr);
    else if (!strcmp(kind, "accuracy"))
        rc = accuracy_plot(p, d, idx);
    else if (!strcmp(kind, "tta"))
        rc = tta_plot(p, d, idx);
    else if (jv_str(d, "collective", NULL))
        rc = collective_plot(p, d, idx);
    else {
        snprintf(p->err, sizeof p->err, "%s: not a scaleout benchmark record", path);
        rc = -1;
    }
    jv_free(d);
    return rc;
}

static int plot_all(plotter *p, char **files, int n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/plots.gp", p->dir);
    if (!(p->gp = fopen(path, "w")))
        return cli_error("bench plot", CLI_USAGE, "-o: cannot write '%s'", path);
    fprintf(p->gp, "# Written by `scaleout bench plot`; run in this directory: gnuplot plots.gp\n");
    FILE *thr = data_file(p, "throughput.dat");
    int rc = thr ? 0 : -1;
    if (thr)
        fprintf(thr, "# label total_images_per_sec\n");
    for (int i = 0; !rc && i < n; i++)
        rc = plot_file(p, files[i], i + 1, thr);
    if (thr)
        fclose(thr);
    if (!rc && p->ntrain)
        throughput_chart(p);
    if (fclose(p->gp) && !rc) {
        snprintf(p->err, sizeof p->err, "error writing '%s'", path);
        rc = -1;
    }
    if (rc)
        return cli_error("bench plot", CLI_USAGE, "%s", p->err);
    return CLI_OK;
}

int cmd_bench_plot(int argc, char **argv)
{
    const char *dir = NULL;
    const cli_opt opts[] = {
        {"output", OPT_STR, &dir, "DIR", "directory for the PNG/SVG files, data and plots.gp (-o; created)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {{"-o", "--output"}, {NULL, NULL}};
    cli_short_aliases(argc, argv, aliases);
    char **files = calloc((size_t)argc + 1, sizeof *files), **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nfiles = 0, nrest = 0, rc;
    if (!files || !rest)
        return free(files), free(rest), cli_error("bench plot", CLI_FAIL, "out of memory");
    bench_split_args(argc, argv, opts, files, &nfiles, rest, &nrest);
    rc = cli_parse("bench plot", "Draws benchmark records (FILE.json...) as PNG and SVG with gnuplot.", opts, nrest,
                   rest);
    if (!rc && !dir)
        rc = cli_error("bench plot", CLI_USAGE, "-o DIR is required");
    if (!rc && !nfiles)
        rc = cli_error("bench plot", CLI_USAGE, "no result files given");
    if (!rc && strchr(dir, '\''))
        rc = cli_error("bench plot", CLI_USAGE, "-o: '%s' contains a quote", dir);
    if (!rc && mkdir(dir, 0755) && errno != EEXIST)
        rc = cli_error("bench plot", CLI_USAGE, "-o: cannot create '%s': %s", dir, strerror(errno));
    plotter p = {.dir = dir, .term = rc ? "png" : png_terminal()};
    if (!rc)
        rc = plot_all(&p, files, nfiles);
    if (!rc) {
        int st = run_gnuplot(dir);
        if (st)
            rc = cli_error("bench plot", CLI_FAIL, "gnuplot failed (exit %d) on %s/plots.gp", st, dir);
        else
            printf("wrote %d chart(s) as PNG and SVG to %s (data and plots.gp alongside)\n", p.charts, dir);
    }
    free(files);
    free(rest);
    return rc == CLI_HELP ? CLI_OK : rc;
}
