/* The allreduce cost model of comm.h, without MPI: t = a alpha + n (b beta
 * + g gamma) per algorithm (one line, or size bands), the prediction and the
 * choice `auto` makes from a table, and the least-squares fits of alpha and
 * beta that `scaleout tune` makes from its measurements. Documented in
 * docs/COLLECTIVES.md. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/comm.h"
#include "scaleout/err.h"

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

/* The coefficients of one algorithm at one p, and gamma: t = a al + n (b be + g gamma). */
typedef struct {
    double a, b, g, gamma;
} model_coef;

static double line_time(const model_coef *m, double al, double be, double n)
{
    return m->a * al + n * (m->b * be + m->g * m->gamma);
}

/* The piecewise model of comm.h: the band holding n, and in the octave above
 * a band edge the straight line between the two bands' times at E and 2E. */
static double fit_time(const so_comm_fit *f, const model_coef *m, double n)
{
    if (f->nbands <= 0)
        return line_time(m, f->alpha, f->beta, n);
    int k = 0;
    while (k < f->nbands - 1 && n > (double)f->band[k].max_bytes)
        k++;
    const so_comm_band *hi = &f->band[k];
    if (k == 0)
        return line_time(m, hi->alpha, hi->beta, n);
    const so_comm_band *lo = &f->band[k - 1];
    double e = (double)lo->max_bytes, top = 2 * e < (double)hi->max_bytes ? 2 * e : (double)hi->max_bytes;
    if (n >= top || top <= e)
        return line_time(m, hi->alpha, hi->beta, n);
    double t0 = line_time(m, lo->alpha, lo->beta, e), t1 = line_time(m, hi->alpha, hi->beta, top);
    return t0 + (t1 - t0) * (n - e) / (top - e);
}

double so_comm_predict(so_allreduce_algo algo, size_t bytes, int p, int ranks_per_node,
                       const so_comm_tuning *t)
{
    so_comm_tuning builtin;
    if (!t) {
        so_comm_tuning_default(&builtin);
        t = &builtin;
    }
    if (algo == SO_ALLREDUCE_AUTO)
        algo = so_comm_select(bytes, p, ranks_per_node, t);
    if ((unsigned)algo >= SO_ALLREDUCE_AUTO)
        return INFINITY;
    model_coef m = {0, 0, 0, t->gamma};
    coef(algo, p, ranks_per_node, &m.a, &m.b, &m.g);
    return fit_time(&t->fit[algo], &m, (double)bytes);
}

so_allreduce_algo so_comm_select(size_t bytes, int p, int ranks_per_node, const so_comm_tuning *t)
{
    so_comm_tuning builtin;
    if (!t) {
        so_comm_tuning_default(&builtin);
        t = &builtin;
    }
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

/* ---- fit ------------------------------------------------------------------------------------ */

/* Weighted least squares of (al, be) over points [i0, i1): minimise
 * sum ((a al + n b be - y) / t)^2 with y = t - n g gamma (relative error, so
 * small and large sizes count alike), subject to al >= 0 and be >= be_min; a
 * parameter at its bound is clamped and the other refitted. fix_al >= 0 fixes
 * alpha (a band with one size keeps the alpha of the band below). */
static void fit_line(const model_coef *m, const size_t *bytes, const double *secs, int i0, int i1,
                     double fix_al, double be_min, double *al, double *be)
{
    double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
    for (int i = i0; i < i1; i++) {
        double wt = 1.0 / (secs[i] * secs[i]), x1 = m->a, x2 = (double)bytes[i] * m->b;
        double y = secs[i] - (double)bytes[i] * m->g * m->gamma;
        s11 += wt * x1 * x1;
        s12 += wt * x1 * x2;
        s22 += wt * x2 * x2;
        r1 += wt * x1 * y;
        r2 += wt * x2 * y;
    }
    double det = s11 * s22 - s12 * s12;
    if (fix_al >= 0) {
        *al = fix_al;
        *be = (r2 - s12 * fix_al) / s22;
    } else if (det > s11 * s22 * 1e-12) {
        *al = (r1 * s22 - r2 * s12) / det;
        *be = (s11 * r2 - s12 * r1) / det;
    } else { /* one size, or sizes too alike to separate the two */
        *al = -1;
    }
    if (fix_al < 0 && *al < 0) { /* beta explains everything */
        *al = 0;
        *be = r2 / s22;
    }
    if (!(*be >= be_min)) {
        *be = be_min;
        if (fix_al < 0)
            *al = (r1 - s12 * be_min) / s11;
    }
    if (!(*al >= 0))
        *al = 0;
}

int so_comm_fit_model(so_allreduce_algo algo, int p, int ranks_per_node, double gamma,
                      const size_t *bytes, const double *secs, int n, so_comm_fit *out)
{
    model_coef m = {0, 0, 0, gamma};
    coef(algo, p, ranks_per_node, &m.a, &m.b, &m.g);
    if (n < 2 || m.a <= 0 || m.b <= 0 || (unsigned)algo >= SO_ALLREDUCE_AUTO)
        return so_err(SO_EINVAL, "fit: need >= 2 sizes and p > 1");
    for (int i = 0; i < n; i++)
        if (!(secs[i] > 0 && isfinite(secs[i])))
            return so_err(SO_EINVAL, "fit: time %g at %zu bytes is not positive", secs[i], bytes[i]);
    memset(out, 0, sizeof *out);
    fit_line(&m, bytes, secs, 0, n, -1, 0, &out->alpha, &out->beta);
    out->valid = 1;
    return 0;
}

#define BAND_BETA_MIN 1e-13 /* s/B (10 TB/s): "beta > 0" without forcing a slope */

/* Sum of squared relative errors of f over the n points. */
static double rel_sse(const so_comm_fit *f, const model_coef *m, const size_t *bytes, const double *secs, int n)
{
    double sse = 0;
    for (int i = 0; i < n; i++) {
        double e = fit_time(f, m, (double)bytes[i]) / secs[i] - 1;
        sse += e * e;
    }
    return sse;
}

/* The bands for the edges selected by `mask` into f; -1 when a band gets too
 * few sizes. Raises a band's alpha where needed so that the time at 2E is
 * not below the lower band's time at E (the prediction never decreases). */
static int fit_mask(const model_coef *m, const size_t *bytes, const double *secs, int n, const uint64_t *edges,
                    int nedges, unsigned mask, so_comm_fit *f)
{
    int i0 = 0;
    f->nbands = 0;
    for (int e = 0; e <= nedges; e++) {
        int last = e == nedges;
        if (!last && !(mask >> e & 1))
            continue;
        uint64_t max = last ? UINT64_MAX : edges[e];
        int i1 = i0;
        while (i1 < n && (uint64_t)bytes[i1] <= max)
            i1++;
        int k = f->nbands, cnt = i1 - i0;
        if (cnt < 1 || (cnt < 2 && (!last || k == 0)) || k == SO_TUNING_MAX_BANDS)
            return -1;
        so_comm_band *b = &f->band[k];
        b->max_bytes = max;
        fit_line(m, bytes, secs, i0, i1, cnt < 2 ? f->band[k - 1].alpha : -1, BAND_BETA_MIN, &b->alpha, &b->beta);
        if (k > 0) {
            const so_comm_band *lo = &f->band[k - 1];
            double ed = (double)lo->max_bytes, top = 2 * ed < (double)max ? 2 * ed : (double)max;
            double t0 = line_time(m, lo->alpha, lo->beta, ed), t1 = line_time(m, b->alpha, b->beta, top);
            if (t1 < t0)
                b->alpha += (t0 - t1) / m->a;
        }
        f->nbands++;
        i0 = i1;
    }
    return 0;
}

int so_comm_fit_bands(so_allreduce_algo algo, int p, int ranks_per_node, double gamma,
                      const size_t *bytes, const double *secs, int n, const uint64_t *edges, int nedges,
                      so_comm_fit *out)
{
    int rc = so_comm_fit_model(algo, p, ranks_per_node, gamma, bytes, secs, n, out);
    if (rc)
        return rc;
    for (int i = 1; i < n; i++)
        if (bytes[i] <= bytes[i - 1])
            return so_err(SO_EINVAL, "fit: sizes must ascend");
    if (nedges > SO_TUNING_MAX_BANDS - 1)
        nedges = SO_TUNING_MAX_BANDS - 1;
    model_coef m = {0, 0, 0, gamma};
    coef(algo, p, ranks_per_node, &m.a, &m.b, &m.g);
    /* BIC: n ln(SSE / n) + ln(n) per parameter (2 per band); the floor keeps
     * exact (synthetic) fits from rewarding needless bands. */
    double floor = 1e-8, best = INFINITY;
    so_comm_fit cand = *out;
    for (unsigned mask = 0; mask < 1u << nedges; mask++) {
        if (fit_mask(&m, bytes, secs, n, edges, nedges, mask, &cand))
            continue;
        double mse = rel_sse(&cand, &m, bytes, secs, n) / n;
        double score = n * log(mse > floor ? mse : floor) + 2 * log((double)n) * cand.nbands;
        if (score < best - 1e-9) {
            best = score;
            out->nbands = cand.nbands;
            memcpy(out->band, cand.band, sizeof cand.band);
        }
    }
    if (out->nbands == 1) /* no split: the line says the same */
        out->nbands = 0;
    return 0;
}

