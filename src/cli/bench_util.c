/* The per-step recorder behind `bench train` and `bench accuracy`: the
 * trainer's span hook stores every step's start, end and phase times, so
 * warm-up steps can be left out afterwards and the raw timings written out.
 * The hook's own cost is timed too (reported as benchmark overhead). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/test_hooks.h"
#include "bench.h"
#include "cli.h"
#include "scaleout/err.h"
#include "scaleout/timer.h"

const char *const bench_phase_names[BP_N] = {"data_wait", "forward", "backward", "comm_exposed", "optimizer"};

static int grow(bench_rec *r, long step)
{
    if (step < r->cap)
        return 0;
    long cap = r->cap ? r->cap : 256;
    while (cap <= step)
        cap *= 2;
    double *t0 = realloc(r->t0, (size_t)cap * sizeof *t0);
    if (t0)
        r->t0 = t0;
    double *t1 = t0 ? realloc(r->t1, (size_t)cap * sizeof *t1) : NULL;
    if (t1)
        r->t1 = t1;
    double *ph = t1 ? realloc(r->phase, (size_t)cap * BP_N * sizeof *ph) : NULL;
    if (!ph)
        return -1;
    r->phase = ph;
    memset(ph + r->cap * BP_N, 0, (size_t)(cap - r->cap) * BP_N * sizeof *ph);
    r->cap = cap;
    return 0;
}

static void slow_down(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    nanosleep(&ts, NULL);
}

void bench_rec_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1)
{
    bench_rec *r = arg;
    double h0 = so_now();
    (void)id;
    /* The trainer reports STEP (and EVAL) spans after counting the step, so
     * their step number is one past the step the other phases reported. */
    if (kind == SO_SPAN_STEP || kind == SO_SPAN_EVAL)
        step--;
    if (step < 0 || r->err || grow(r, step)) {
        r->err = 1;
        return;
    }
    double *ph = r->phase + step * BP_N, d = t1 - t0;
    switch (kind) {
    case SO_SPAN_DATA:
        ph[BP_DATA] += d;
        if (step < r->slow_steps) {
            r->overhead += so_now() - h0;
            slow_down(r->slow_ms); /* lands in this step's forward time: the test hook */
            return;
        }
        break;
    case SO_SPAN_FORWARD: ph[BP_FORWARD] += d; break;
    case SO_SPAN_BACKWARD: ph[BP_BACKWARD] += d; break;
    case SO_SPAN_COMM_WAIT: ph[BP_COMM] += d; break;
    case SO_SPAN_OPTIMIZER: ph[BP_OPTIMIZER] += d; break;
    case SO_SPAN_STEP:
        r->t0[step] = t0;
        r->t1[step] = t1;
        if (step + 1 > r->n)
            r->n = step + 1;
        break;
    default: break;
    }
    r->overhead += so_now() - h0;
}

int bench_rec_init(bench_rec *r, so_train_hooks *hooks)
{
    memset(r, 0, sizeof *r);
    memset(hooks, 0, sizeof *hooks);
    hooks->arg = r;
    hooks->span = bench_rec_span;
    const char *s = so_test_hook("SCALEOUT_BENCH_TEST_SLOW_STEPS");
    r->slow_ms = 100;
    if (s && *s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (*end == ':')
            r->slow_ms = strtod(end + 1, &end);
        if (*end || n < 0 || !(r->slow_ms >= 0 && r->slow_ms < 1e6))
            return so_err(SO_EINVAL, "SCALEOUT_BENCH_TEST_SLOW_STEPS: '%s' is not N or N:MS", s);
        r->slow_steps = (int)n;
    }
    return grow(r, 0) ? so_err(SO_ENOMEM, "out of memory for step timings") : 0;
}

void bench_rec_free(bench_rec *r)
{
    free(r->t0);
    free(r->t1);
    free(r->phase);
    memset(r, 0, sizeof *r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_stats_of(const double *v, long n, bench_stats *s)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    if (n <= 0)
        return;
    double *c = malloc((size_t)n * sizeof *c), sum = 0, sq = 0;
    for (long i = 0; i < n; i++)
        sum += v[i];
    s->mean = sum / n;
    for (long i = 0; i < n; i++)
        sq += (v[i] - s->mean) * (v[i] - s->mean);
    s->sd = n > 1 ? sqrt(sq / (n - 1)) : 0;
    if (!c) { /* statistics without the order ones rather than nothing */
        s->median = s->min = s->max = s->mean;
        return;
    }
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    s->median = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    s->min = c[0];
    s->max = c[n - 1];
    free(c);
}

void bench_stats_json(so_json *js, const char *key, const bench_stats *s)
{
    so_json_obj_begin(js, key);
    so_json_int(js, "n", s->n);
    so_json_num(js, "mean", s->mean);
    so_json_num(js, "sd", s->sd);
    so_json_num(js, "median", s->median);
    so_json_num(js, "min", s->min);
    so_json_num(js, "max", s->max);
    so_json_obj_end(js);
}

/* One array per line: thousands of numbers stay readable. */
static void flat_array(so_json *js, const char *key, const bench_rec *r, int phase)
{
    int pretty = js->pretty;
    so_json_arr_begin(js, key);
    js->pretty = 0;
    for (long i = 0; i < r->n; i++)
        so_json_num(js, NULL, phase < 0 ? r->t1[i] - r->t0[i] : r->phase[i * BP_N + phase]);
    so_json_arr_end(js);
    js->pretty = pretty;
}

void bench_raw_json(so_json *js, const bench_rec *r)
{
    so_json_obj_begin(js, "raw");
    flat_array(js, "step_seconds", r, -1);
    for (int p = 0; p < BP_N; p++)
        flat_array(js, bench_phase_names[p], r, p);
    so_json_obj_end(js);
}

int bench_json_begin(const char *cmd, const char *path, const char *kind, so_json *js, FILE **f)
{
    if (!(*f = fopen(path, "w")))
        return cli_error(cmd, CLI_USAGE, "--json: cannot write '%s'", path);
    so_json_init(js, *f, 1);
    so_json_obj_begin(js, NULL);
    so_json_str(js, "schema", "scaleout-bench-1");
    so_json_str(js, "kind", kind);
    return CLI_OK;
}

int bench_json_end(const char *cmd, const char *path, so_json *js, FILE *f)
{
    so_json_obj_end(js);
    if (fclose(f) != 0)
        return cli_error(cmd, CLI_FAIL, "--json: error writing '%s'", path);
    return CLI_OK;
}

void bench_split_args(int argc, char **argv, const void *opts_, char **files, int *nfiles, char **rest, int *nrest)
{
    const cli_opt *opts = opts_;
    *nfiles = *nrest = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0 && strcmp(argv[i], "-h") != 0) {
            files[(*nfiles)++] = argv[i];
            continue;
        }
        rest[(*nrest)++] = argv[i];
        const char *name = argv[i] + 2;
        if (strchr(name, '='))
            continue;
        for (const cli_opt *o = opts; o->name; o++)
            if (!strcmp(o->name, name) && o->type != OPT_FLAG && i + 1 < argc)
                rest[(*nrest)++] = argv[++i];
    }
}
