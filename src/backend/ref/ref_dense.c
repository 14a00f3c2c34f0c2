/* Reference fully connected layer (PyTorch Linear on the flattened input):
 * x is (N,F) with F = C*H*W in CHW order, weight (OUT,F), bias (OUT), so
 * y = x W^T + b, optionally followed by the fused ReLU. */
#include "ref_internal.h"

/* Features of node i's input per sample. */
static int in_features(const ref_state *s, int i) { return (int)ref_numel(ref_in_shape(s, i, 0)); }

/* y is (N,OUT). The graph always gives dense a bias slice after the weight. */
int ref_dense_forward(ref_state *s, int i, int training)
{
    (void)training;
    const so_node *nd = ref_node(s, i);
    int f = in_features(s, i), out = nd->out.c;
    const float *x = ref_in(s, i, 0), *w = ref_params(s, i), *b = w + (size_t)out * f;
    float *y = s->act[i];
#pragma omp parallel for schedule(static) if ((double)s->batch * out * f > REF_PAR_WORK)
    for (int n = 0; n < s->batch; n++) {
        const float *xn = x + (size_t)n * f;
        for (int o = 0; o < out; o++) {
            const float *wo = w + (size_t)o * f;
            float sum = 0.0f;
            for (int k = 0; k < f; k++)
                sum += wo[k] * xn[k];
            y[(size_t)n * out + o] = sum + b[o];
        }
    }
    if (nd->a.relu)
        ref_relu_inplace(y, (size_t)s->batch * out);
    return 0;
}

/* dW[o] = sum_n dy[n][o] x[n], db[o] = sum_n dy[n][o]: one row per iteration. */
static void dense_bwd_weights(const ref_state *s, int f, int out, const float *x, const float *dy, float *dw)
{
    float *db = dw + (size_t)out * f;
#pragma omp parallel for schedule(static) if ((double)s->batch * out * f > REF_PAR_WORK)
    for (int o = 0; o < out; o++) {
        float *wo = dw + (size_t)o * f;
        for (int n = 0; n < s->batch; n++) {
            float d = dy[(size_t)n * out + o];
            const float *xn = x + (size_t)n * f;
            for (int k = 0; k < f; k++)
                wo[k] += d * xn[k];
            db[o] += d;
        }
    }
}

/* dx[n] += sum_o dy[n][o] W[o]: one sample per iteration. */
static void dense_bwd_data(const ref_state *s, int f, int out, const float *w, const float *dy, float *dx)
{
#pragma omp parallel for schedule(static) if ((double)s->batch * out * f > REF_PAR_WORK)
    for (int n = 0; n < s->batch; n++) {
        float *dxn = dx + (size_t)n * f;
        for (int o = 0; o < out; o++) {
            float d = dy[(size_t)n * out + o];
            const float *wo = w + (size_t)o * f;
            for (int k = 0; k < f; k++)
                dxn[k] += d * wo[k];
        }
    }
}

int ref_dense_backward(ref_state *s, int i)
{
    int f = in_features(s, i), out = ref_node(s, i)->out.c;
    const float *dy = ref_out_diff(s, i);
    dense_bwd_weights(s, f, out, ref_in(s, i, 0), dy, ref_dw(s, i));
    float *dx = ref_dx(s, i, 0);
    if (dx)
        dense_bwd_data(s, f, out, ref_params(s, i), dy, dx);
    return 0;
}
