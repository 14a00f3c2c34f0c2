/* Each group's tuning table (the one `auto` uses, SCALEOUT_TUNING loaded on
 * first use) and the measuring harness `scaleout tune` and `scaleout bench`
 * share. The model itself is cost_model.c (no MPI), the text format
 * tune_text.c; documented in docs/COLLECTIVES.md. */
#include "comm_env.h"
#include "coll_internal.h"
#include "tune_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- each group's table ------------------------------------------------------------- */

int so_comm_set_tuning(so_comm *c, const so_comm_tuning *t)
{
    int rc = so_comm_check_idle(c); /* an async engine of c may be reading the table */
    if (rc)
        return rc;
    if (t)
        c->tuning = *t;
    else
        so_comm_tuning_default(&c->tuning);
    c->tuning_state = t ? 1 : 2;
    return 0;
}

/* Loads SCALEOUT_TUNING into c's table the first time. Only one thread runs
 * so_comm_* calls, and so_async_create loads it before its engine can read
 * it, so the lazy load does not race. */
const so_comm_tuning *so_comm_get_tuning(so_comm *c)
{
    if (c->tuning_state == 0) {
        const char *path = so_comm_env_get()->tuning_path;
        if (path && *path && so_comm_tuning_load(path, &c->tuning) == 0) {
            c->tuning_state = 1;
        } else {
            if (path && *path)
                so_log(SO_LOG_WARN, "ignoring SCALEOUT_TUNING=%s: %s", path, so_errmsg());
            so_comm_tuning_default(&c->tuning);
            c->tuning_state = 2;
        }
    }
    return &c->tuning;
}

so_allreduce_algo so_comm_auto_algo(so_comm *c, size_t bytes)
{
    return so_comm_select(bytes, c->size, c->topo.ranks_per_node, so_comm_get_tuning(c));
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
