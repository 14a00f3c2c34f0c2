/* Reference data-movement ops: inverted dropout, flatten, add (2+ inputs) and
 * concat along channels. None has parameters; add may carry a fused ReLU. */
#include "ref_internal.h"
#include "scaleout/err.h"
#include "scaleout/rng.h"

static size_t total(const ref_state *s, int i) { return (size_t)s->batch * ref_numel(ref_node(s, i)->out); }

/* Training: draws one so_rng_uniform per element of the whole batch in NCHW
 * order from m->rng and keeps the element when u >= p, scaled by 1/(1-p), so
 * eval is the identity. The scales are kept for backward. */
int ref_dropout_forward(ref_state *s, int i, int training)
{
    const float *x = ref_in(s, i, 0);
    float *y = s->act[i], *scale = s->aux[i];
    size_t n = total(s, i);
    float p = ref_node(s, i)->a.p, keep = 1.0f / (1.0f - p);
    for (size_t k = 0; k < n; k++) {
        scale[k] = !training ? 1.0f : so_rng_uniform(&s->m->rng) >= p ? keep : 0.0f;
        y[k] = x[k] * scale[k];
    }
    return 0;
}

int ref_dropout_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    const float *dy = s->diff[i], *scale = s->aux[i];
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        dx[k] += dy[k] * scale[k];
    return 0;
}

/* NCHW (C,H,W) per sample is already (C*H*W) in CHW order: a plain copy. */
int ref_flatten_forward(ref_state *s, int i, int training)
{
    (void)training;
    memcpy(s->act[i], ref_in(s, i, 0), total(s, i) * sizeof(float));
    return 0;
}

int ref_flatten_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    size_t n = total(s, i);
    for (size_t k = 0; k < n; k++)
        dx[k] += s->diff[i][k];
    return 0;
}

/* y = sum of all inputs (same shape), then the fused ReLU if any. */
int ref_add_forward(ref_state *s, int i, int training)
{
    (void)training;
    const so_node *nd = ref_node(s, i);
    float *y = s->act[i];
    size_t n = total(s, i);
    memcpy(y, ref_in(s, i, 0), n * sizeof *y);
    for (int slot = 1; slot < nd->ninputs; slot++) {
        const float *x = ref_in(s, i, slot);
        for (size_t k = 0; k < n; k++)
            y[k] += x[k];
    }
    if (nd->a.relu)
        ref_relu_inplace(y, n);
    return 0;
}

/* Every input gets dy; slots in descending order, as so_graph_diff_accumulate
 * expects when the same tensor feeds several slots (x + x). */
int ref_add_backward(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    const float *dy = ref_out_diff(s, i);
    size_t n = total(s, i);
    for (int slot = nd->ninputs - 1; slot >= 0; slot--) {
        float *dx = ref_dx(s, i, slot);
        for (size_t k = 0; dx && k < n; k++)
            dx[k] += dy[k];
    }
    return 0;
}

/* Per sample, input `slot` (C_slot,H,W) lands at channel offset sum of the
 * earlier inputs' channels of y (C,H,W). */
int ref_concat_forward(ref_state *s, int i, int training)
{
    (void)training;
    const so_node *nd = ref_node(s, i);
    size_t plane = (size_t)nd->out.h * nd->out.w, yper = (size_t)nd->out.c * plane;
    size_t coff = 0;
    for (int slot = 0; slot < nd->ninputs; slot++) {
        size_t xper = (size_t)ref_in_shape(s, i, slot).c * plane;
        const float *x = ref_in(s, i, slot);
        for (int n = 0; n < s->batch; n++)
            memcpy(s->act[i] + n * yper + coff, x + n * xper, xper * sizeof(float));
        coff += xper;
    }
    return 0;
}

int ref_concat_backward(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    size_t plane = (size_t)nd->out.h * nd->out.w, yper = (size_t)nd->out.c * plane;
    size_t coff = 0;
    for (int slot = 0; slot < nd->ninputs; slot++)
        coff += (size_t)ref_in_shape(s, i, slot).c * plane;
    for (int slot = nd->ninputs - 1; slot >= 0; slot--) {
        size_t xper = (size_t)ref_in_shape(s, i, slot).c * plane;
        coff -= xper;
        float *dx = ref_dx(s, i, slot);
        for (int n = 0; dx && n < s->batch; n++)
            for (size_t k = 0; k < xper; k++)
                dx[n * xper + k] += s->diff[i][n * yper + coff + k];
    }
    return 0;
}

/* ---- pipeline edges: copies between the node and the bound plain buffers ---- */

static int edge_unbound(ref_state *s, int i, const float *buf)
{
    return buf ? 0 : so_err(SO_EINVAL, "ref backend: pipeline edge %s has no buffer bound", ref_node(s, i)->name);
}

int ref_recv_forward(ref_state *s, int i, int training)
{
    (void)training;
    int rc = edge_unbound(s, i, s->edge_data[i]);
    if (!rc)
        memcpy(s->act[i], s->edge_data[i], total(s, i) * sizeof(float));
    return rc;
}

int ref_recv_backward(ref_state *s, int i)
{
    int rc = edge_unbound(s, i, s->edge_grad[i]);
    if (!rc)
        memcpy(s->edge_grad[i], s->diff[i], total(s, i) * sizeof(float));
    return rc;
}

int ref_send_forward(ref_state *s, int i, int training)
{
    (void)training;
    int rc = edge_unbound(s, i, s->edge_data[i]);
    if (!rc)
        memcpy(s->edge_data[i], ref_in(s, i, 0), total(s, i) * sizeof(float));
    return rc;
}

int ref_send_backward(ref_state *s, int i)
{
    int rc = edge_unbound(s, i, s->edge_grad[i]);
    float *dx = rc ? NULL : ref_dx(s, i, 0);
    size_t n = total(s, i);
    for (size_t k = 0; dx && k < n; k++)
        dx[k] += s->edge_grad[i][k];
    return rc;
}
