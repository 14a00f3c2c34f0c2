/* The profiler's end-of-run exchanges (prof_gather.h): fixed-size figures
 * as world x fields arrays summed over the ranks (each rank fills its own
 * row), variable-size text through one gather of bytes to rank 0. */
#include "prof_gather.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prof_sched.h"
#include "scaleout/ckpt.h"
#include "scaleout/err.h"

/* v summed over the ranks in place (nothing to do on one). */
static int sum(const prof_ranks *r, double *v, int n) { return r->d && r->world > 1 ? r->d->sum(r->d->ctx, v, n) : 0; }
static int max(const prof_ranks *r, double *v, int n) { return r->d && r->world > 1 ? r->d->max(r->d->ctx, v, n) : 0; }

int prof_gather_totals(const prof_ranks *r, const so_prof *p, so_prof_totals *all)
{
    const int nf = SO_PROF_TOTALS_FIELDS + 1;
    double *v = calloc((size_t)r->world * nf, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    so_prof_totals mine;
    so_prof_get_totals(p, &mine);
    so_prof_totals_pack(&mine, v + (size_t)r->rank * nf);
    int rc = sum(r, v, r->world * nf);
    for (int k = 0; !rc && k < r->world; k++)
        so_prof_totals_unpack(v + (size_t)k * nf, &all[k]);
    free(v);
    return rc;
}

/* Steps of the per-step balance at most: the last ones. */
#define STEP_LB_MAX 20000

int prof_gather_step_balance(const prof_ranks *r, const so_prof *p, so_prof_pop *pop)
{
    long n;
    const double *u = so_prof_step_useful(p, &n);
    double least = -(double)n; /* max of -n = -(min n): ranks agree on the count */
    int rc = max(r, &least, 1);
    long m = (long)-least < STEP_LB_MAX ? (long)-least : STEP_LB_MAX;
    if (rc || m < 1)
        return rc;
    double *v = calloc((size_t)r->world * (size_t)m, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    memcpy(v + (size_t)r->rank * m, u + (n - m), (size_t)m * sizeof *v);
    rc = sum(r, v, (int)(r->world * m));
    if (!rc)
        so_prof_pop_steps(v, r->world, m, pop);
    free(v);
    return rc;
}

int prof_gather_io(const prof_ranks *r, so_prof *p, double *v)
{
    so_prof_io_total t[SO_PROF_IO_KINDS];
    int n = so_prof_io_totals(p, t, SO_PROF_IO_KINDS);
    memset(v, 0, 3 * SO_CKPT_IO_KINDS * sizeof *v);
    for (int k = 0; k < SO_CKPT_IO_KINDS; k++)
        for (int i = 0; i < n; i++)
            if (!strcmp(t[i].kind, so_ckpt_io_name((so_ckpt_io_kind)k))) {
                v[3 * k] = (double)t[i].count;
                v[3 * k + 1] = (double)t[i].bytes;
                v[3 * k + 2] = t[i].seconds;
            }
    return sum(r, v, 3 * SO_CKPT_IO_KINDS);
}

int prof_gather_text(const prof_ranks *r, int (*fn)(void *ctx, FILE *f), void *ctx, char **out, size_t *sizes)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return so_err(SO_ENOMEM, "out of memory");
    int rc = fn(ctx, f);
    if (fclose(f) && !rc)
        rc = so_err(SO_ENOMEM, "out of memory");
    *out = NULL;
    if (r->world == 1 || rc) {
        *out = buf;
        sizes[0] = len;
        return rc;
    }
#ifdef SCALEOUT_HAVE_MPI
    void *all = NULL;
    rc = so_comm_gather_bytes(dist_comm(r->dh), buf, len, 0, &all, sizes);
    *out = all;
#endif
    free(buf);
    return rc;
}

int prof_gather_sched_step(const prof_ranks *r, const so_prof *p, int skip, const so_prof_clock *clock, long *step,
                           double *ref)
{
    double v[2] = {r->rank == 0 ? (double)prof_sched_choose(p, skip) : 0, 0};
    int rc = sum(r, v, 1);
    *step = (long)v[0];
    double t0 = *step >= 0 ? prof_sched_step_start(p, *step) : NAN;
    v[1] = isfinite(t0) ? -so_prof_clock_map(clock, t0) : -1e300; /* the earliest start: a max of negatives */
    if (!rc)
        rc = max(r, v + 1, 1);
    *ref = -v[1];
    return rc;
}
