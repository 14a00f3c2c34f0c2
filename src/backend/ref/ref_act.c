/* Reference activations: relu, tanh, sigmoid as separate nodes, plus the ReLU
 * that so_graph_fuse folds into conv/dense/batchnorm/add. Backward uses the
 * saved output (y), which determines each derivative. */
#include <math.h>

#include "ref_internal.h"

void ref_relu_inplace(float *y, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] = y[k] > 0.0f ? y[k] : 0.0f;
}

void ref_relu_mask(const float *y, float *dy, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!(y[k] > 0.0f))
            dy[k] = 0.0f;
}

float *ref_out_diff(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    if (nd->a.relu)
        ref_relu_mask(s->act[i], s->diff[i], (size_t)s->batch * ref_numel(nd->out));
    return s->diff[i];
}

/* Elements of node i's output over the whole batch. */
static size_t total(const ref_state *s, int i) { return (size_t)s->batch * ref_numel(ref_node(s, i)->out); }

int ref_relu_forward(ref_state *s, int i, int training)
{
    (void)training;
    const float *x = ref_in(s, i, 0);
    float *y = s->act[i];
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        y[k] = x[k] > 0.0f ? x[k] : 0.0f;
    return 0;
}

/* PyTorch's threshold_backward: the gradient passes where the output is > 0. */
int ref_relu_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    const float *y = s->act[i], *dy = s->diff[i];
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        dx[k] += y[k] > 0.0f ? dy[k] : 0.0f;
    return 0;
}

int ref_tanh_forward(ref_state *s, int i, int training)
{
    (void)training;
    const float *x = ref_in(s, i, 0);
    float *y = s->act[i];
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        y[k] = tanhf(x[k]);
    return 0;
}

/* d tanh(x) / dx = 1 - y^2. */
int ref_tanh_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    const float *y = s->act[i], *dy = s->diff[i];
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        dx[k] += dy[k] * (1.0f - y[k] * y[k]);
    return 0;
}

int ref_sigmoid_forward(ref_state *s, int i, int training)
{
    (void)training;
    const float *x = ref_in(s, i, 0);
    float *y = s->act[i];
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        y[k] = 1.0f / (1.0f + expf(-x[k]));
    return 0;
}

/* d sigmoid(x) / dx = y (1 - y). */
int ref_sigmoid_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    const float *y = s->act[i], *dy = s->diff[i];
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        dx[k] += dy[k] * y[k] * (1.0f - y[k]);
    return 0;
}
