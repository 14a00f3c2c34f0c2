/* Timed blocking collectives (prof_dist.h): each wrapper notes the clock,
 * calls the job's so_dist and records what moved and for which use
 * (metrics, parameters, batchnorm statistics). */
#include "prof_dist.h"

#include "scaleout/timer.h"

static double now(const prof_dist *t) { return prof_clock_skew(t->test, t->rank, so_now()); }

static void record(prof_dist *t, const char *coll, so_prof_use use, size_t bytes, double t0, double t1)
{
    so_prof_comm_event e = {coll, "mpi", use, bytes, -1, t0, t0, t1};
    so_prof_comm(t->p, &e);
}

static int grad_submit(void *ctx, float *buf, size_t count, int bucket)
{
    prof_dist *t = ctx;
    return t->inner->grad_submit(t->inner->ctx, buf, count, bucket);
}

static int grad_wait(void *ctx, double *waited)
{
    prof_dist *t = ctx;
    return t->inner->grad_wait(t->inner->ctx, waited);
}

/* A reduction of metrics (the job's sum or max), timed. */
static int metrics(prof_dist *t, int (*reduce)(void *, double *, int), double *v, int n)
{
    double t0 = now(t);
    int rc = reduce(t->inner->ctx, v, n);
    record(t, "allreduce", SO_PROF_USE_METRICS, (size_t)n * sizeof *v, t0, now(t));
    return rc;
}

static int sum(void *ctx, double *v, int n) { return metrics(ctx, ((prof_dist *)ctx)->inner->sum, v, n); }
static int max(void *ctx, double *v, int n) { return metrics(ctx, ((prof_dist *)ctx)->inner->max, v, n); }

static int bcast(void *ctx, float *buf, size_t count)
{
    prof_dist *t = ctx;
    double t0 = now(t);
    int rc = t->inner->bcast(t->inner->ctx, buf, count);
    record(t, "bcast", SO_PROF_USE_PARAMS, count * sizeof *buf, t0, now(t));
    return rc;
}

static int allsum(void *ctx, double *v, size_t count)
{
    prof_dist *t = ctx;
    double t0 = now(t);
    int rc = t->inner->allsum(t->inner->ctx, v, count);
    record(t, "allreduce", SO_PROF_USE_BATCHNORM, count * sizeof *v, t0, now(t));
    return rc;
}

static double cost(void *ctx, size_t bytes)
{
    prof_dist *t = ctx;
    return t->inner->cost(t->inner->ctx, bytes);
}

static void *buf_alloc(void *ctx, size_t bytes)
{
    prof_dist *t = ctx;
    return t->inner->buf_alloc(t->inner->ctx, bytes);
}

static void buf_free(void *ctx, void *p)
{
    prof_dist *t = ctx;
    t->inner->buf_free(t->inner->ctx, p);
}

const so_dist *prof_dist_wrap(prof_dist *t, so_prof *p, const prof_clock_test *test, int rank, const so_dist *d)
{
    if (!d)
        return d;
    *t = (prof_dist){.inner = d, .p = p, .test = test, .rank = rank};
    t->dist = (so_dist){.rank = d->rank, .world = d->world, .ctx = t, .grad_submit = grad_submit,
                        .grad_wait = grad_wait, .sum = sum, .max = max, .bcast = bcast,
                        .allsum = d->allsum ? allsum : NULL, .cost = d->cost ? cost : NULL,
                        .buf_alloc = d->buf_alloc ? buf_alloc : NULL, .buf_free = d->buf_free ? buf_free : NULL,
                        .group = d->group};
    return &t->dist;
}
