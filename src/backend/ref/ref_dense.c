/* Reference fully connected layer (PyTorch Linear on the flattened input):
 * x is (N,F) with F = C*H*W in CHW order, weight (OUT,F), bias (OUT), so
 * y = x W^T + b, optionally followed by the fused ReLU. */
#include <string.h>

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

/* dW[o] += sum_n dy[n][o] x[n] for rows [r0, r1). */
static void dense_bwd_weights_rows(const ref_state *s, int f, int out, int r0, int r1, const float *x,
                                   const float *dy, float *dw_rows)
{
    for (int o = r0; o < r1; o++)
        for (int n = 0; n < s->batch; n++) {
            float d = dy[(size_t)n * out + o];
            for (int k = 0; k < f; k++)
                dw_rows[(size_t)(o - r0) * f + k] += d * x[(size_t)n * f + k];
        }
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

/* Rows [r0, r1) of a dense layer run in chunks (so_backend_ops.dense_chunk):
 * forward writes those outputs (the last chunk adds the bias and the ReLU);
 * backward, from the last chunk down, masks dy and writes db first, then
 * each chunk its rows of dW and its share of dx (cleared by the first).
 * A chunk's rows (and the last chunk's bias) are addressed from their own
 * offset: a sharded strategy may place each chunk's range elsewhere. */
static const float *chunk_rows(ref_state *s, int i, int r0, int f)
{
    return so_model_params_at(s->m, ref_node(s, i)->param_off + (size_t)r0 * f);
}

static void chunk_forward(ref_state *s, int i, int r0, int r1, int last)
{
    const so_node *nd = ref_node(s, i);
    int f = in_features(s, i), out = nd->out.c;
    const float *x = ref_in(s, i, 0), *w = chunk_rows(s, i, r0, f), *b = chunk_rows(s, i, out, f);
    float *y = s->act[i];
    for (int n = 0; n < s->batch; n++)
        for (int o = r0; o < r1; o++) {
            float sum = 0.0f;
            for (int k = 0; k < f; k++)
                sum += w[(size_t)(o - r0) * f + k] * x[(size_t)n * f + k];
            y[(size_t)n * out + o] = sum;
        }
    for (int n = 0; last && n < s->batch; n++)
        for (int o = 0; o < out; o++) {
            float v = y[(size_t)n * out + o] + b[o];
            y[(size_t)n * out + o] = nd->a.relu && v < 0.0f ? 0.0f : v;
        }
}

static void chunk_backward(ref_state *s, int i, int r0, int r1, int first)
{
    const so_node *nd = ref_node(s, i);
    int f = in_features(s, i), out = nd->out.c;
    float *dy = ref_out_diff(s, i), *dw = so_model_grads_at(s->m, nd->param_off + (size_t)r0 * f);
    float *db = so_model_grads_at(s->m, nd->param_off + (size_t)out * f);
    const float *x = ref_in(s, i, 0), *w = chunk_rows(s, i, r0, f), *y = s->act[i];
    for (size_t k = 0; first && nd->a.relu && k < (size_t)s->batch * out; k++)
        dy[k] = y[k] > 0.0f ? dy[k] : 0.0f;
    for (int o = first ? 0 : out; o < out; o++) {
        float sum = 0.0f;
        for (int n = 0; n < s->batch; n++)
            sum += dy[(size_t)n * out + o];
        db[o] = s->m->accumulate_grads ? db[o] + sum : sum;
    }
    if (!s->m->accumulate_grads)
        memset(dw, 0, (size_t)(r1 - r0) * f * sizeof *dw);
    dense_bwd_weights_rows(s, f, out, r0, r1, x, dy, dw);
    float *dx = so_graph_needs_diff(s->g, i, 0) ? s->diff[nd->inputs[0]] : NULL;
    if (dx && first && !so_graph_diff_accumulate(s->g, i, 0))
        memset(dx, 0, (size_t)s->batch * f * sizeof *dx);
    for (int n = 0; dx && n < s->batch; n++)
        for (int o = r0; o < r1; o++)
            for (int k = 0; k < f; k++)
                dx[(size_t)n * f + k] += dy[(size_t)n * out + o] * w[(size_t)(o - r0) * f + k];
}

int ref_dense_chunk(ref_state *s, int i, int k, int r0, int r1, int backward)
{
    int K = s->m->chunks[i];
    if (backward)
        chunk_backward(s, i, r0, r1, k == K - 1);
    else
        chunk_forward(s, i, r0, r1, k == K - 1);
    return 0;
}
