/* Reference batch normalisation (PyTorch BatchNorm2d): training normalises
 * with the batch mean and biased variance of the n valid samples and updates
 * the running stats (running_var with the UNBIASED variance); eval uses the
 * running stats. Params [gamma C][beta C]; state m->bufs [mean C][var C]. */
#include <math.h>

#include "ref_internal.h"

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

/* Fills saved [mean C][invstd C] for node i: from the batch in training (and
 * updates the running stats), from the running stats in eval. */
static void bn_stats(ref_state *s, int i, int training)
{
    const so_node *nd = ref_node(s, i);
    so_shape sh = nd->out;
    float *mean = s->aux[i], *invstd = s->aux[i] + sh.c;
    float *rmean = s->m->bufs + nd->buf_off, *rvar = rmean + sh.c;
    double cnt = (double)s->n * sh.h * sh.w, mom = nd->a.momentum;
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
        double unbiased = cnt > 1.0 ? var * cnt / (cnt - 1.0) : var;
        rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mu);
        rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * unbiased);
    }
}

/* y is (N,C,H,W) = gamma (x - mean) invstd + beta over the whole batch; rows
 * >= n are padding and only normalised, never counted in the statistics. */
int ref_bn_forward(ref_state *s, int i, int training)
{
    const so_node *nd = ref_node(s, i);
    so_shape sh = nd->out;
    bn_stats(s, i, training);
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
    double cnt = (double)s->n * plane;
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

int ref_bn_backward(ref_state *s, int i)
{
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
