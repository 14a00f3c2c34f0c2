/* The measuring harness `scaleout tune` and `scaleout bench` share: a
 * collective timed over iterations after a barrier, and the local memcpy
 * bandwidth and float-sum cost (gamma) of the cost model. Above everything
 * it times: it runs the blocking calls of coll.c. */
#include "reduce.h"

#include "scaleout/err.h"
#include "scaleout/timer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
