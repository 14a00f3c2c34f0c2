/* The allreduce cost model, the tuning table and its text format, the choice
 * `auto` makes, the least-squares fit of alpha/beta, and the timing helpers
 * `scaleout tune` and `scaleout bench` share. Documented in docs/COLLECTIVES.md. */
#include "coll_internal.h"
#include "tune_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- model ------------------------------------------------------------------------- */

static int ceil_lg(int p)
{
    int l = 0;
    while ((1 << l) < p)
        l++;
    return l;
}

/* Rabenseifner on p ranks, fold steps included. */
static void rab_coef(int p, double *a, double *b, double *g)
{
    int p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    double f = p != p2, l = ceil_lg(p2);
    *a = 2 * l + 2 * f;
    *b = 2.0 * (p2 - 1) / p2 + 2 * f;
    *g = (double)(p2 - 1) / p2 + f;
}

/* t = a alpha + n (b beta + g gamma) for algo on p ranks, q = ranks per node. */
static void coef(so_allreduce_algo algo, int p, int rpn, double *a, double *b, double *g)
{
    *a = *b = *g = 0;
    if (p <= 1)
        return;
    int p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    double f = p != p2, l2 = ceil_lg(p2), l = ceil_lg(p);
    switch (algo) {
    case SO_ALLREDUCE_RING:
        *a = 2.0 * (p - 1);
        *b = 2.0 * (p - 1) / p;
        *g = (double)(p - 1) / p;
        break;
    case SO_ALLREDUCE_RD:
        *a = *b = l2 + 2 * f;
        *g = l2 + f;
        break;
    case SO_ALLREDUCE_TREE:
        *a = *b = 2 * l;
        *g = l;
        break;
    case SO_ALLREDUCE_HIER: {
        int q = rpn > 0 && rpn < p ? rpn : p, nodes = (p + q - 1) / q;
        *a = 1; /* one flag barrier (small); chunks add per-byte cost, folded into beta */
        *b = 2.0 * (q - 1) / q;
        *g = (double)(q - 1) / q;
        if (nodes > 1) {
            double ra, rb, rg;
            rab_coef(nodes, &ra, &rb, &rg);
            *a += ra + 1;
            *b += rb + 1;
            *g += rg;
        }
        break;
    }
    default: /* mpi, rabenseifner: the libraries use halving/doubling at these sizes */
        rab_coef(p, a, b, g);
    }
}

void so_comm_tuning_default(so_comm_tuning *t)
{
    memset(t, 0, sizeof *t);
    t->version = 1;
    t->gamma = 1.0 / 8e9; /* ~8 GB/s of float sums from memory */
    /* Point-to-point steps through MPI on one node: ~2 us and ~4 GB/s per step
     * (Open MPI / MPICH shared-memory transport); the window: ~0.5 us, ~12 GB/s. */
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++)
        t->fit[a] = (so_comm_fit){2e-6, 1.0 / 4e9, 0};
    t->fit[SO_ALLREDUCE_MPI] = (so_comm_fit){1e-6, 1.0 / 3e9, 0};
    t->fit[SO_ALLREDUCE_HIER] = (so_comm_fit){0.5e-6, 1.0 / 12e9, 0};
}

/* ---- active table --------------------------------------------------------------------- */

static so_comm_tuning g_table;
static atomic_int g_state; /* 0: SCALEOUT_TUNING not looked at yet, 1: table set, 2: built-in */

int so_comm_set_tuning(const so_comm_tuning *t)
{
    if (t)
        g_table = *t;
    else
        so_comm_tuning_default(&g_table);
    atomic_store_explicit(&g_state, t ? 1 : 2, memory_order_release);
    return 0;
}

/* The active table; loads SCALEOUT_TUNING the first time. Only one thread
 * runs collectives at a time (comm.h), so the lazy load does not race. */
static const so_comm_tuning *active(void)
{
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (st == 0) {
        const char *path = getenv("SCALEOUT_TUNING");
        so_comm_tuning t;
        if (path && *path && so_comm_tuning_load(path, &t) == 0) {
            so_comm_set_tuning(&t);
        } else {
            if (path && *path)
                so_log(SO_LOG_WARN, "ignoring SCALEOUT_TUNING=%s: %s", path, so_errmsg());
            so_comm_set_tuning(NULL);
        }
    }
    return &g_table;
}

double so_comm_predict(so_allreduce_algo algo, size_t bytes, int p, int ranks_per_node,
                       const so_comm_tuning *t)
{
    if (!t)
        t = active();
    if (algo == SO_ALLREDUCE_AUTO)
        algo = so_comm_select(bytes, p, ranks_per_node, t);
    if ((unsigned)algo >= SO_ALLREDUCE_AUTO)
        return INFINITY;
    double a, b, g, n = (double)bytes;
    coef(algo, p, ranks_per_node, &a, &b, &g);
    return a * t->fit[algo].alpha + n * (b * t->fit[algo].beta + g * t->gamma);
}

so_allreduce_algo so_comm_select(size_t bytes, int p, int ranks_per_node, const so_comm_tuning *t)
{
    if (!t)
        t = active();
    if (t->nrules > 0 && t->p == p && t->ranks_per_node == ranks_per_node)
        for (int i = 0; i < t->nrules; i++)
            if ((uint64_t)bytes <= t->rule[i].max_bytes)
                return t->rule[i].algo;
    so_allreduce_algo best = SO_ALLREDUCE_MPI;
    double tbest = INFINITY;
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++) {
        double ta = so_comm_predict((so_allreduce_algo)a, bytes, p, ranks_per_node, t);
        if (ta < tbest) {
            tbest = ta;
            best = (so_allreduce_algo)a;
        }
    }
    return best;
}

so_allreduce_algo so_tuning_pick(size_t bytes, int p, int ranks_per_node)
{
    return so_comm_select(bytes, p, ranks_per_node, active());
}

/* ---- text format ------------------------------------------------------------------------ */

int so_comm_tuning_save(const so_comm_tuning *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return so_err(SO_EIO, "cannot write tuning file %s", path);
    fprintf(f, "scaleout-tuning v%d p=%d ranks_per_node=%d gamma=%.6e\n", t->version, t->p,
            t->ranks_per_node, t->gamma);
    fprintf(f, "# fit ALGO alpha=SECONDS beta=SECONDS_PER_BYTE   (model: docs/COLLECTIVES.md)\n");
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++)
        if (t->fit[a].valid)
            fprintf(f, "fit %s alpha=%.6e beta=%.6e\n", so_allreduce_algo_name((so_allreduce_algo)a),
                    t->fit[a].alpha, t->fit[a].beta);
    fprintf(f, "# MAX_BYTES ALGO: the first line with message bytes <= MAX_BYTES wins; * = no limit\n");
    for (int i = 0; i < t->nrules; i++) {
        const char *name = so_allreduce_algo_name(t->rule[i].algo);
        if (t->rule[i].max_bytes == UINT64_MAX)
            fprintf(f, "* %s\n", name);
        else
            fprintf(f, "%llu %s\n", (unsigned long long)t->rule[i].max_bytes, name);
    }
    if (fclose(f) != 0)
        return so_err(SO_EIO, "error writing tuning file %s", path);
    return 0;
}

/* One `fit` or rule line into t; SO_EFORMAT with the line number. */
static int parse_line(so_comm_tuning *t, char *line, const char *path, int ln)
{
    char name[32], lim[32];
    double al, be;
    so_allreduce_algo algo;
    if (sscanf(line, "fit %31s alpha=%lf beta=%lf", name, &al, &be) == 3) {
        if (so_allreduce_algo_parse(name, &algo) || algo == SO_ALLREDUCE_AUTO)
            return so_err(SO_EFORMAT, "%s:%d: unknown algorithm '%s'", path, ln, name);
        t->fit[algo] = (so_comm_fit){al, be, 1};
        return 0;
    }
    if (sscanf(line, "%31s %31s", lim, name) != 2)
        return so_err(SO_EFORMAT, "%s:%d: expected 'MAX_BYTES ALGO'", path, ln);
    if (so_allreduce_algo_parse(name, &algo) || algo == SO_ALLREDUCE_AUTO)
        return so_err(SO_EFORMAT, "%s:%d: unknown algorithm '%s'", path, ln, name);
    char *end;
    uint64_t max = strcmp(lim, "*") == 0 ? UINT64_MAX : strtoull(lim, &end, 10);
    if (max != UINT64_MAX && *end)
        return so_err(SO_EFORMAT, "%s:%d: bad byte limit '%s'", path, ln, lim);
    if (t->nrules == SO_TUNING_MAX_RULES || (t->nrules && max <= t->rule[t->nrules - 1].max_bytes))
        return so_err(SO_EFORMAT, "%s:%d: limits must ascend (at most %d lines)", path, ln,
                      SO_TUNING_MAX_RULES);
    t->rule[t->nrules].max_bytes = max;
    t->rule[t->nrules++].algo = algo;
    return 0;
}

int so_comm_tuning_load(const char *path, so_comm_tuning *t)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return so_err(SO_EIO, "cannot open tuning file %s", path);
    so_comm_tuning_default(t);
    char line[256];
    int rc = 0, ln = 0;
    if (!fgets(line, sizeof line, f) ||
        sscanf(line, "scaleout-tuning v%d p=%d ranks_per_node=%d gamma=%lf", &t->version, &t->p,
               &t->ranks_per_node, &t->gamma) != 4 || t->version != 1) {
        rc = so_err(SO_EFORMAT, "%s: not a scaleout-tuning v1 file", path);
        goto out;
    }
    for (ln = 2; fgets(line, sizeof line, f); ln++) {
        char *s = line + strspn(line, " \t");
        if (*s == '#' || *s == '\n' || *s == 0)
            continue;
        if ((rc = parse_line(t, s, path, ln)))
            goto out;
    }
out:
    fclose(f);
    return rc;
}

/* ---- fit ------------------------------------------------------------------------------------ */

int so_comm_fit_model(so_allreduce_algo algo, int p, int ranks_per_node, double gamma,
                      const size_t *bytes, const double *secs, int n, so_comm_fit *out)
{
    double a, b, g;
    coef(algo, p, ranks_per_node, &a, &b, &g);
    if (n < 2 || a <= 0 || b <= 0 || (unsigned)algo >= SO_ALLREDUCE_AUTO)
        return so_err(SO_EINVAL, "fit: need >= 2 sizes and p > 1");
    /* Minimise sum ((a al + n b be - y) / t)^2 with y = t - n g gamma. */
    double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
    for (int i = 0; i < n; i++) {
        double wt = 1.0 / (secs[i] * secs[i]), x1 = a, x2 = (double)bytes[i] * b;
        double y = secs[i] - (double)bytes[i] * g * gamma;
        s11 += wt * x1 * x1;
        s12 += wt * x1 * x2;
        s22 += wt * x2 * x2;
        r1 += wt * x1 * y;
        r2 += wt * x2 * y;
    }
    double det = s11 * s22 - s12 * s12, al = 0, be = 0;
    if (det > 0) {
        al = (r1 * s22 - r2 * s12) / det;
        be = (s11 * r2 - s12 * r1) / det;
    }
    /* A negative parameter means the other one explains everything: refit it alone. */
    if (det <= 0 || al < 0) {
        al = 0;
        be = r2 / s22;
    }
    if (be < 0) {
        be = 0;
        al = r1 / s11;
    }
    *out = (so_comm_fit){al > 0 ? al : 0, be > 0 ? be : 0, 1};
    return 0;
}

/* ---- timing ----------------------------------------------------------------------------- */

int so_comm_time_coll(so_comm *c, so_coll_kind kind, int algo, const float *send, float *recv,
                      size_t count, int root, int warmup, int iters, double *secs)
{
    int rc = 0;
    for (int i = 0; i < warmup && !rc; i++)
        rc = so_comm_coll(c, kind, algo, send, recv, count, SO_REDUCE_SUM, root);
    if (rc || (rc = so_comm_barrier(c)))
        return rc;
    double t0 = so_now();
    for (int i = 0; i < iters && !rc; i++)
        rc = so_comm_coll(c, kind, algo, send, recv, count, SO_REDUCE_SUM, root);
    *secs = (so_now() - t0) / (iters > 0 ? iters : 1);
    return rc;
}

double so_comm_memcpy_bw(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    double best = INFINITY;
    if (!a || !b)
        goto out;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int rep = 0; rep < 5; rep++) {
        double t0 = so_now();
        memcpy(rep & 1 ? a : b, rep & 1 ? b : a, bytes);
        double t = so_now() - t0;
        best = t < best ? t : best;
    }
out:
    free(a);
    free(b);
    return isfinite(best) && best > 0 ? (double)bytes / best : 0;
}

double so_comm_reduce_gamma(size_t bytes)
{
    size_t n = bytes / sizeof(float);
    float *a = calloc(n ? n : 1, sizeof *a), *b = calloc(n ? n : 1, sizeof *b);
    double best = INFINITY;
    if (!a || !b || !n)
        goto out;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = so_now();
        so_reduce_acc(a, b, n, SO_REDUCE_SUM);
        double t = so_now() - t0;
        best = t < best ? t : best;
    }
out:
    free(a);
    free(b);
    return isfinite(best) ? best / (double)(n ? n * sizeof(float) : 1) : 0;
}
