/* Inverted dropout. The mask is drawn from m->rng in logical NCHW order (one
 * uniform per element of the whole batch, so it matches the ref backend draw
 * for draw) and reordered once per step into the activation's layout; then
 * forward and backward are plain elementwise products. Eval is a copy. */
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

typedef struct {
    float *plain, *mask;         /* mask in NCHW order / in the node's layout */
    dnnl_memory_t plain_mem, mask_mem;
    od_prim to_layout;
    size_t count;                /* batch * C * H * W */
} od_dropout;

static int dropout_create(od_state *s, int node)
{
    od_dropout *d = calloc(1, sizeof *d);
    if (!d)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = d;
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    so_shape o = od_node(s, node)->out;
    dnnl_memory_desc_t plain;
    od_md_plain(s, node, &plain);
    d->count = (size_t)s->m->batch * (size_t)o.c * (size_t)o.h * (size_t)o.w;
    int rc = od_tensor_alloc(s, node, &in->md);
    if (!rc)
        rc = od_mem_alloc(s, node, &plain, &d->plain, &d->plain_mem);
    if (!rc)
        rc = od_mem_alloc(s, node, &t->md, &d->mask, &d->mask_mem);
    if (!rc)
        rc = od_reorder_init(s, node, "dropout mask reorder", &plain, &t->md, 0, &d->to_layout);
    return rc;
}

/* Keeps an element when u >= p (probability 1-p) and scales it by 1/(1-p). */
static int dropout_forward(od_state *s, int node, int training)
{
    od_dropout *d = s->t[node].priv;
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    if (!training) {
        memcpy(t->buf, in->buf, t->bytes);
        return 0;
    }
    float p = od_node(s, node)->a.p, keep = 1.0f / (1.0f - p);
    for (size_t i = 0; i < d->count; i++)
        d->plain[i] = so_rng_uniform(&s->m->rng) < p ? 0.0f : keep;
    int rc = od_reorder_exec(s, node, "dropout mask reorder", &d->to_layout, d->plain_mem, d->mask_mem);
    if (rc)
        return rc;
    size_t n = t->bytes / sizeof(float);
    const float *x = in->buf, *mask = d->mask;
    float *y = t->buf;
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * mask[i];
    return 0;
}

static int dropout_backward(od_state *s, int node)
{
    od_dropout *d = s->t[node].priv;
    if (!so_graph_needs_diff(s->g, node, 0))
        return 0;
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    size_t n = t->bytes / sizeof(float);
    const float *dy = t->dbuf, *mask = d->mask;
    float *dx = in->dbuf;
    if (so_graph_diff_accumulate(s->g, node, 0)) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
        for (size_t i = 0; i < n; i++)
            dx[i] += dy[i] * mask[i];
    } else {
#pragma omp parallel for simd schedule(static) if (n > 32768)
        for (size_t i = 0; i < n; i++)
            dx[i] = dy[i] * mask[i];
    }
    return 0;
}

static void dropout_destroy(void *priv)
{
    od_dropout *d = priv;
    od_prim_fini(&d->to_layout);
    od_mem_free(&d->plain_mem, &d->plain);
    od_mem_free(&d->mask_mem, &d->mask);
    free(d);
}

const od_op od_op_dropout = {dropout_create, dropout_forward, dropout_backward, dropout_destroy, NULL};
