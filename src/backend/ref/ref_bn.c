/* Reference batch normalisation (PyTorch BatchNorm2d): training normalises
 * with the batch mean and biased variance of the n valid samples and updates
 * the running stats (running_var with the UNBIASED variance); eval uses the
 * running stats. Params [gamma C][beta C]; state m->bufs [mean C][var C].
 * Synchronised (m->bn_allsum set): the statistics and the two backward sums
 * are taken over the global batch, as torch.nn.SyncBatchNorm does. */
#include <math.h>
#include <stdlib.h>

#include "ref_internal.h"
#include "scaleout/err.h"

/* Batch mean and biased variance of channel c over the first n samples of x
 * (N,C,H,W), in double so the reference does not lose digits. */
static void channel_stats(const float *x, int n, so_shape sh, int c, double *mean, double *var)
{
    size_t plane = (size_t)sh.h * sh.w;
    double sum = 0.0, sq = 0.0;
    for (int s = 0; s < n; s++) {
        const float *p = x + ((size_t)s * sh.c + c) * plane;
        for (size_t k = 0; k < plane; k++)
            sum += p[k];
    }
    double cnt = (double)n * (double)plane;
    *mean = sum / cnt;
    for (int s = 0; s < n; s++) {
        const float *p = x + ((size_t)s * sh.c + c) * plane;
        for (size_t k = 0; k < plane; k++)
            sq += (p[k] - *mean) * (p[k] - *mean);
    }
    *var = sq / cnt;
}

/* Sums of (x - shift) and of its square over the valid rows of channel c. */
static void channel_shifted_sums(const float *x, int n, so_shape sh, int c, double shift, double *s1, double *s2)
{
    size_t plane = (size_t)sh.h * sh.w;
    double a = 0.0, b = 0.0;
    for (int s = 0; s < n; s++) {
        const float *p = x + ((size_t)s * sh.c + c) * plane;
        for (size_t k = 0; k < plane; k++) {
            double d = (double)p[k] - shift;
            a += d;
            b += d * d;
        }
    }
    *s1 = a;
    *s2 = b;
}

static void update_running(const so_node *nd, float *rmean, float *rvar, int c, double mu, double var, double cnt)
{
    double mom = nd->a.momentum, unbiased = cnt > 1.0 ? var * cnt / (cnt - 1.0) : var;
    rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mu);
    rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * unbiased);
}

/* Global-batch statistics: one allsum of [sum x C][sum x^2 C][count], in
 * double so E[x^2] - E[x]^2 keeps its digits. */
static int bn_stats_sync(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    so_shape sh = nd->out;
    int nc = sh.c;
    float *mean = s->aux[i], *invstd = s->aux[i] + nc;
    float *rmean = s->m->bufs + nd->buf_off, *rvar = rmean + nc;
    double *v = malloc((2 * (size_t)nc + 1) * sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory for synchronised batchnorm");
    for (int c = 0; c < nc; c++)
        channel_shifted_sums(ref_in(s, i, 0), s->n, sh, c, 0.0, &v[c], &v[nc + c]);
    v[2 * nc] = (double)s->n * sh.h * sh.w;
    int rc = s->m->bn_allsum(s->m->bn_allsum_arg, v, 2 * nc + 1);
    double cnt = v[2 * nc];
    for (int c = 0; !rc && c < nc; c++) {
        double mu = v[c] / cnt, var = v[nc + c] / cnt - mu * mu;
        var = var > 0 ? var : 0;
        mean[c] = (float)mu;
        invstd[c] = (float)(1.0 / sqrt(var + nd->a.eps));
        update_running(nd, rmean, rvar, c, mu, var, cnt);
    }
    s->aux[i][2 * nc] = (float)cnt;
    free(v);
    return rc;
}

/* Fills saved [mean C][invstd C][count] for node i: from the batch in
 * training (and updates the running stats), from the running stats in eval. */
static int bn_stats(ref_state *s, int i, int training)
{
    const so_node *nd = ref_node(s, i);
    so_shape sh = nd->out;
    if (training && s->m->bn_allsum)
        return bn_stats_sync(s, i);
    float *mean = s->aux[i], *invstd = s->aux[i] + sh.c;
    float *rmean = s->m->bufs + nd->buf_off, *rvar = rmean + sh.c;
    double cnt = (double)s->n * sh.h * sh.w;
    s->aux[i][2 * sh.c] = (float)cnt;
    /* Channels are independent; ~10 flops per element, hence the lower bar. */
#pragma omp parallel for schedule(static) if (cnt * sh.c > REF_PAR_WORK / 8)
    for (int c = 0; c < sh.c; c++) {
        if (!training) {
            mean[c] = rmean[c];
            invstd[c] = (float)(1.0 / sqrt((double)rvar[c] + nd->a.eps));
            continue;
        }
        double mu, var;
        channel_stats(ref_in(s, i, 0), s->n, sh, c, &mu, &var);
        mean[c] = (float)mu;
        invstd[c] = (float)(1.0 / sqrt(var + nd->a.eps));
        update_running(nd, rmean, rvar, c, mu, var, cnt);
    }
    return 0;
}

/* y is (N,C,H,W) = gamma (x - mean) invstd + beta over the whole batch; rows
 * >= n are padding and only normalised, never counted in the statistics. */
int ref_bn_forward(ref_state *s, int i, int training)
{
    const so_node *nd = ref_node(s, i);
    so_shape sh = nd->out;
    int rc = bn_stats(s, i, training);
    if (rc)
        return rc;
    const float *x = ref_in(s, i, 0), *gamma = ref_params(s, i), *beta = gamma + sh.c;
    const float *mean = s->aux[i], *invstd = s->aux[i] + sh.c;
    size_t plane = (size_t)sh.h * sh.w;
    for (int n = 0; n < s->batch; n++)
        for (int c = 0; c < sh.c; c++) {
            size_t off = ((size_t)n * sh.c + c) * plane;
            float scale = gamma[c] * invstd[c], shift = beta[c] - mean[c] * scale;
            for (size_t k = 0; k < plane; k++)
                s->act[i][off + k] = x[off + k] * scale + shift;
        }
    if (nd->a.relu)
        ref_relu_inplace(s->act[i], (size_t)s->batch * ref_numel(sh));
    return 0;
}

/* Sums over the valid samples of channel c: dbeta = sum dy, dgamma = sum dy xhat. */
static void channel_grads(const ref_state *s, int i, int c, const float *dy, double *dbeta, double *dgamma)
{
    so_shape sh = ref_node(s, i)->out;
    size_t plane = (size_t)sh.h * sh.w;
    const float *x = ref_in(s, i, 0);
    float mean = s->aux[i][c], invstd = s->aux[i][sh.c + c];
    double db = 0.0, dg = 0.0;
    for (int n = 0; n < s->n; n++) {
        size_t off = ((size_t)n * sh.c + c) * plane;
        for (size_t k = 0; k < plane; k++) {
            db += dy[off + k];
            dg += (double)dy[off + k] * (x[off + k] - mean) * invstd;
        }
    }
    *dbeta = db;
    *dgamma = dg;
}

/* dx of channel c. Training: the statistics depend on x, so
 * dx = gamma invstd (dy - dbeta/cnt - xhat dgamma/cnt); eval: gamma invstd dy.
 * Padding rows get no gradient (their dy is 0 anyway). */
static void channel_dx(const ref_state *s, int i, int c, const float *dy, double dbeta, double dgamma, float *dx)
{
    so_shape sh = ref_node(s, i)->out;
    size_t plane = (size_t)sh.h * sh.w;
    const float *x = ref_in(s, i, 0), *gamma = ref_params(s, i);
    float mean = s->aux[i][c], invstd = s->aux[i][sh.c + c];
    double cnt = s->aux[i][2 * sh.c]; /* samples x plane, over all ranks when synchronised */
    double mdb = s->training ? dbeta / cnt : 0.0, mdg = s->training ? dgamma / cnt : 0.0;
    double k0 = (double)gamma[c] * invstd;
    for (int n = 0; n < s->n; n++) {
        size_t off = ((size_t)n * sh.c + c) * plane;
        for (size_t k = 0; k < plane; k++) {
            double xhat = (double)(x[off + k] - mean) * invstd;
            dx[off + k] += (float)(k0 * (dy[off + k] - mdb - xhat * mdg));
        }
    }
}

/* Synchronised backward: the local sums become the parameter gradients (the
 * gradient allreduce averages them like any other), and their global totals
 * give dx, as in torch.nn.SyncBatchNorm. */
static int bn_backward_sync(ref_state *s, int i)
{
    so_shape sh = ref_node(s, i)->out;
    int nc = sh.c;
    const float *dy = ref_out_diff(s, i);
    float *dw = ref_dw(s, i), *dx = ref_dx(s, i, 0);
    double *v = malloc(2 * (size_t)nc * sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory for synchronised batchnorm");
    for (int c = 0; c < nc; c++) {
        channel_grads(s, i, c, dy, &v[c], &v[nc + c]);
        dw[c] += (float)v[nc + c];
        dw[nc + c] += (float)v[c];
    }
    int rc = s->m->bn_allsum(s->m->bn_allsum_arg, v, 2 * nc);
    for (int c = 0; !rc && dx && c < nc; c++)
        channel_dx(s, i, c, dy, v[c], v[nc + c], dx);
    free(v);
    return rc;
}

int ref_bn_backward(ref_state *s, int i)
{
    if (s->training && s->m->bn_allsum)
        return bn_backward_sync(s, i);
    so_shape sh = ref_node(s, i)->out;
    int nc = sh.c;
    const float *dy = ref_out_diff(s, i);
    float *dw = ref_dw(s, i), *dx = ref_dx(s, i, 0);
    /* Channels are independent: each writes its own gradients and dx planes. */
#pragma omp parallel for schedule(static) if ((double)s->n * ref_numel(sh) > REF_PAR_WORK / 8)
    for (int c = 0; c < nc; c++) {
        double dbeta, dgamma;
        channel_grads(s, i, c, dy, &dbeta, &dgamma);
        dw[c] += (float)dgamma;
        dw[nc + c] += (float)dbeta;
        if (dx)
            channel_dx(s, i, c, dy, dbeta, dgamma, dx);
    }
    return 0;
}
