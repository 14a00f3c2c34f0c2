/* Dense layer (PyTorch Linear on the flattened input) as a oneDNN inner
 * product that consumes the producer's blocked 4-D activation directly: the
 * flat (out, C*H*W) weights are (out, C, H, W) in OIHW order, so the same
 * cached-reorder scheme as convolution applies and no flatten copy is needed.
 * Output: (N, out) plain, seen as (N, out, 1, 1) NCHW by consumers.
 * Large layers on a blocked source (VGG's 400 MB fc6) instead copy the small
 * activation to plain NCHW and keep the weights in the flat layout: no cached
 * weight reorder and no staged weight gradient, 800 MB less for VGG-16. */
#include <stdlib.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

typedef struct {
    od_prim fwd, bwd_data, bwd_w, relu_bwd;
    od_wcache w_fwd, w_bwd;
    int w_bwd_shared;
    dnnl_memory_t bias, dst2, ddst2; /* dst2/ddst2: 2-D views of the node's buffers */
    od_gradw gw;
    float *db;
    dnnl_memory_t db_mem;
    od_prim x_to_plain, dx_to_blocked; /* copy_src only */
    float *x, *dx;
    dnnl_memory_t x_mem, dx_mem;
    int chunked;                     /* run by rows (dense_chunk), no primitives */
    od_tobf16 src_h, ddst_h;         /* --precision bf16 (a copy_src layer's x is BF16 itself) */
} od_dense;

typedef struct {
    dnnl_memory_desc_t w_any, w_user, b, d2;
    dnnl_memory_desc_t w_in;  /* what fwd and bwd_data read: w_any, BF16 under --precision bf16 */
    dnnl_memory_desc_t src;   /* the input's md, or its plain copy (FP32) */
    dnnl_memory_desc_t src_in; /* what the primitives read: src, BF16 under --precision bf16 */
    int copy_src;
    size_t wcount;
} dense_geom;

/* Weights above this many floats are not worth a second, blocked copy. */
#define DENSE_COPY_SRC_FLOATS (1u << 20)

static void dense_geometry(od_state *s, int node, dense_geom *dg)
{
    const so_node *nd = od_node(s, node);
    so_shape is = od_node(s, nd->inputs[0])->out;
    dnnl_dims_t d2 = {s->m->batch, nd->a.out};
    /* On a plain source (LeNet's, after the direct convolution and plain max
     * pooling) oneDNN's own weight choice costs two reorders per step (ihwo
     * for gemm:jit, blocked for brgemm); gemm:jit on the OIHW user layout needs
     * none, and LeNet's three dense layers take less than half the time. */
    dnnl_memory_desc_t plain;
    od_md_plain(s, nd->inputs[0], &plain);
    int plain_src = od_md_equal(&od_in(s, node, 0)->md, &plain);
    dg->wcount = (size_t)nd->a.out * (size_t)is.c * (size_t)is.h * (size_t)is.w;
    dg->copy_src = !plain_src && dg->wcount >= DENSE_COPY_SRC_FLOATS;
    dg->src = dg->copy_src ? plain : od_in(s, node, 0)->md;
    od_md_4d(&dg->w_any, nd->a.out, is.c, is.h, is.w,
             plain_src || dg->copy_src ? dnnl_oihw : dnnl_format_tag_any);
    od_md_4d(&dg->w_user, nd->a.out, is.c, is.h, is.w, dnnl_oihw);
    od_md_1d(&dg->b, nd->a.out);
    dnnl_memory_desc_init_by_tag(&dg->d2, 2, d2, dnnl_f32, dnnl_nc);
    /* BF16 (autocast): source, weights and diff_dst BF16; dst, diff_weights
     * and bias FP32, diff_src as the source is stored (FP32, or BF16 after a
     * BF16 tensor, onednn_half.c). Not for chunked layers (create_chunked). */
    dnnl_data_type_t lo = od_bf16(s) ? dnnl_bf16 : dnnl_f32;
    dg->w_in = od_md_as(&dg->w_any, lo);
    dg->src_in = od_md_as(&dg->src, lo);
}

static int create_copies(od_state *s, int node, od_dense *d, const dense_geom *dg)
{
    od_tensor *in = od_in(s, node, 0);
    /* The plain copy is the BF16 conversion too under --precision bf16. */
    int rc = od_mem_alloc(s, node, &dg->src_in, &d->x, &d->x_mem);
    if (!rc)
        rc = od_reorder_init(s, node, "dense source copy", &in->md, &dg->src_in, 0, &d->x_to_plain);
    if (rc || !so_graph_needs_diff(s->g, node, 0))
        return rc;
    rc = od_mem_alloc(s, node, &dg->src, &d->dx, &d->dx_mem);
    if (!rc)
        rc = od_reorder_init(s, node, "dense diff copy", &dg->src, &in->md, 0, &d->dx_to_blocked);
    return rc;
}

static int create_fwd(od_state *s, int node, od_dense *d, const dense_geom *dg)
{
    const so_node *nd = od_node(s, node);
    od_tensor *t = &s->t[node];
    dnnl_inner_product_desc_t ip;
    OD_CHECK(s, node, "inner product forward desc",
             dnnl_inner_product_forward_desc_init(&ip, dnnl_forward_training, &dg->src_in, &dg->w_in,
                                                  &dg->b, &dg->d2));
    int rc = od_prim_init(s, node, "inner product forward", &ip, nd->a.relu, NULL, &d->fwd);
    dnnl_memory_desc_t plain, w = od_query_md(&d->fwd, dnnl_query_weights_md);
    od_md_plain(s, node, &plain);
    if (!rc)
        rc = od_tensor_alloc(s, node, &plain);
    if (!rc)
        rc = od_mem_wrap(s, node, &dg->d2, t->buf, &d->dst2);
    if (!rc)
        rc = od_mem_wrap(s, node, &dg->d2, t->dbuf, &d->ddst2);
    if (!rc)
        rc = od_wcache_init(s, node, &dg->w_user, nd->param_off, &w, &d->w_fwd);
    if (!rc)
        rc = od_mem_wrap(s, node, &dg->b, so_model_params_at(s->m, nd->param_off) + dg->wcount, &d->bias);
    if (!rc && dg->copy_src)
        rc = create_copies(s, node, d, dg);
    else if (!rc && od_bf16(s) && !od_in(s, node, 0)->half)
        rc = od_tobf16_init(s, node, &od_in(s, node, 0)->md, OD_H16_SRC, &d->src_h);
    return rc;
}

static int create_bwd(od_state *s, int node, od_dense *d, const dense_geom *dg)
{
    const so_node *nd = od_node(s, node);
    dnnl_memory_desc_t ddst = od_md_as(&dg->d2, dg->src_in.data_type);
    dnnl_inner_product_desc_t ip;
    OD_CHECK(s, node, "inner product backward weights desc",
             dnnl_inner_product_backward_weights_desc_init(&ip, &dg->src_in, &dg->w_any, &dg->b, &ddst));
    int rc = od_prim_init(s, node, "inner product backward weights", &ip, 0, d->fwd.pd, &d->bwd_w);
    dnnl_memory_desc_t dw = od_query_md(&d->bwd_w, dnnl_query_diff_weights_md);
    if (!rc)
        rc = od_gradw_init(s, node, &dw, &dg->w_user, nd->param_off, &d->gw);
    if (!rc)
        rc = od_mem_alloc(s, node, &dg->b, &d->db, &d->db_mem);
    if (!rc && nd->a.relu)
        rc = od_relu_bwd_init(s, node, &d->relu_bwd);
    if (!rc && od_bf16(s))
        rc = od_tobf16_init(s, node, &dg->d2, OD_H16_DIFF, &d->ddst_h);
    if (rc || !so_graph_needs_diff(s->g, node, 0))
        return rc;
    OD_CHECK(s, node, "inner product backward data desc",
             dnnl_inner_product_backward_data_desc_init(&ip, &dg->src, &dg->w_in, &ddst));
    rc = od_prim_init(s, node, "inner product backward data", &ip, 0, d->fwd.pd, &d->bwd_data);
    if (rc)
        return rc;
    dnnl_memory_desc_t wf = od_query_md(&d->fwd, dnnl_query_weights_md);
    dnnl_memory_desc_t wb = od_query_md(&d->bwd_data, dnnl_query_weights_md);
    d->w_bwd_shared = od_md_equal(&wf, &wb);
    if (!d->w_bwd_shared)
        rc = od_wcache_init(s, node, &dg->w_user, nd->param_off, &wb, &d->w_bwd);
    return rc;
}

/* A layer run in row chunks (so_model.chunks) needs no primitive: the
 * output and its diff plain (N, out), the source and its diff as plain
 * copies that GEMMs read and write by rows. */
static int create_chunked(od_state *s, int node, od_dense *d, dense_geom *dg)
{
    dnnl_memory_desc_t plain;
    od_md_plain(s, node, &plain);
    od_md_plain(s, od_node(s, node)->inputs[0], &dg->src);
    dg->src_in = dg->src; /* FP32 even under --precision bf16: the chunks run sgemm */
    int rc = od_tensor_alloc(s, node, &plain);
    if (!rc)
        rc = create_copies(s, node, d, dg);
    d->chunked = 1;
    return rc;
}

static int dense_create(od_state *s, int node)
{
    od_dense *d = calloc(1, sizeof *d);
    if (!d)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = d;
    dense_geom dg;
    dense_geometry(s, node, &dg);
    if (s->m->chunks && s->m->chunks[node] > 1)
        return create_chunked(s, node, d, &dg);
    int rc = create_fwd(s, node, d, &dg);
    if (!rc)
        rc = create_bwd(s, node, d, &dg);
    return rc;
}

/* The source the primitives read: the input, its plain copy, or (BF16)
 * its conversion in the shared staging. */
static int dense_source(od_state *s, int node, od_dense *d, dnnl_memory_t *x)
{
    *x = od_in(s, node, 0)->mem;
    if (d->x) {
        *x = d->x_mem;
        return od_reorder_exec(s, node, "dense source copy", &d->x_to_plain, od_in(s, node, 0)->mem, d->x_mem);
    }
    return d->src_h.mem ? od_tobf16_exec(s, node, &d->src_h, od_in(s, node, 0)->mem, x) : 0;
}

/* (N, C,H,W any layout) x (out, C*H*W)^T + b -> (N, out). */
static int dense_forward(od_state *s, int node, int training)
{
    (void)training;
    od_dense *d = s->t[node].priv;
    if (d->chunked)
        return so_err(SO_EINVAL, "node %s runs in chunks, not whole", od_node(s, node)->name);
    dnnl_memory_t w, x = NULL;
    int rc = od_bias_rebind(s, node, d->bias);
    if (!rc)
        rc = od_wcache_get(s, node, &d->w_fwd, &w);
    if (!rc)
        rc = dense_source(s, node, d, &x);
    if (rc)
        return rc;
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, x},
                            {DNNL_ARG_WEIGHTS, w},
                            {DNNL_ARG_BIAS, d->bias},
                            {DNNL_ARG_DST, d->dst2}};
    return od_exec(s, node, "inner product forward", &d->fwd, 4, a);
}

static int dense_backward(od_state *s, int node)
{
    od_dense *d = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    dnnl_memory_t dy = d->ddst2;
    int rc = 0;
    if (d->relu_bwd.p)
        rc = od_relu_bwd_exec(s, node, &d->relu_bwd);
    if (!rc && d->ddst_h.mem) /* after the ReLU's mask */
        rc = od_tobf16_exec(s, node, &d->ddst_h, d->ddst2, &dy);
    if (!rc && d->bwd_data.p) {
        dnnl_memory_t w;
        rc = od_wcache_get(s, node, d->w_bwd_shared ? &d->w_fwd : &d->w_bwd, &w);
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, dy},
                                {DNNL_ARG_WEIGHTS, w},
                                {DNNL_ARG_DIFF_SRC, d->dx ? d->dx_mem : od_diff_target(s, node, 0)}};
        if (!rc)
            rc = od_exec(s, node, "inner product backward data", &d->bwd_data, 3, a);
        if (!rc && d->dx)
            rc = od_reorder_exec(s, node, "dense diff copy", &d->dx_to_blocked, d->dx_mem, od_diff_target(s, node, 0));
        if (!rc)
            od_diff_finish(s, node, 0);
    }
    dnnl_memory_t dw = NULL, x = d->x ? d->x_mem : od_in(s, node, 0)->mem;
    if (!rc)
        rc = od_gradw_target(s, node, &d->gw, &dw);
    if (!rc && d->src_h.mem) /* converted again: the staging is shared (onednn_bf16.c) */
        rc = od_tobf16_exec(s, node, &d->src_h, od_in(s, node, 0)->mem, &x);
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, x},
                            {DNNL_ARG_DIFF_DST, dy},
                            {DNNL_ARG_DIFF_WEIGHTS, dw},
                            {DNNL_ARG_DIFF_BIAS, d->db_mem}};
    if (!rc)
        rc = od_exec(s, node, "inner product backward weights", &d->bwd_w, 4, a);
    if (!rc)
        rc = od_gradw_store(s, node, &d->gw);
    if (!rc)
        od_vec_store(so_model_grads_at(s->m, nd->param_off) + nd->nparam - (size_t)nd->a.out, d->db,
                     (size_t)nd->a.out, s->m->accumulate_grads);
    return rc;
}

/* Forward of rows [r0, r1): y[:, r0:r1] = x W[r0:r1]^T (x (N, in) plain,
 * y (N, out)); the last chunk adds the bias and applies the ReLU. A chunk's
 * rows and the bias are addressed from their own offsets: a sharded
 * strategy places each chunk's range (its unit) in a buffer of its own. */
static int chunk_forward(od_state *s, int node, int k, int r0, int r1)
{
    od_dense *d = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    dnnl_dim_t N = s->m->batch, out = nd->a.out, in = (dnnl_dim_t)((nd->nparam - (size_t)out) / (size_t)out);
    const float *w = so_model_params_at(s->m, nd->param_off + (size_t)r0 * in);
    float *y = s->t[node].buf;
    if (k == 0) {
        int rc = od_reorder_exec(s, node, "dense source copy", &d->x_to_plain, od_in(s, node, 0)->mem, d->x_mem);
        if (rc)
            return rc;
        OD_CHECK(s, node, "stream wait", dnnl_stream_wait(s->strm));
    }
    OD_CHECK(s, node, "chunk gemm forward",
             dnnl_sgemm('N', 'T', N, r1 - r0, in, 1.0f, d->x, in, w, in, 0.0f, y + r0, out));
    if (k < s->m->chunks[node] - 1)
        return 0;
    const float *b = so_model_params_at(s->m, nd->param_off + (size_t)out * in);
#pragma omp parallel for schedule(static) if (N * out > 32768)
    for (dnnl_dim_t n = 0; n < N; n++)
        for (dnnl_dim_t o = 0; o < out; o++) {
            float v = y[n * out + o] + b[o];
            y[n * out + o] = nd->a.relu && v < 0.0f ? 0.0f : v;
        }
    return 0;
}

/* The first backward chunk (the last rows): the ReLU's mask on dy, and the
 * bias gradient db = sum_n dy[n]. */
static void chunk_backward_head(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    dnnl_dim_t N = s->m->batch, out = nd->a.out;
    float *dy = s->t[node].dbuf, *db = so_model_grads_at(s->m, nd->param_off + nd->nparam - (size_t)out);
    const float *y = s->t[node].buf;
    if (nd->a.relu)
        for (dnnl_dim_t i = 0; i < N * out; i++)
            dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    for (dnnl_dim_t o = 0; o < out; o++) {
        float sum = 0.0f;
        for (dnnl_dim_t n = 0; n < N; n++)
            sum += dy[n * out + o];
        db[o] = s->m->accumulate_grads ? db[o] + sum : sum;
    }
}

/* Backward of rows [r0, r1): dW[r0:r1] = dy[:, r0:r1]^T x, and dx gets
 * dy[:, r0:r1] W[r0:r1] (written by the first chunk, K-1, added by the
 * others, delivered to the input's diff after chunk 0). */
static int chunk_backward(od_state *s, int node, int k, int r0, int r1)
{
    od_dense *d = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    dnnl_dim_t N = s->m->batch, out = nd->a.out, in = (dnnl_dim_t)((nd->nparam - (size_t)out) / (size_t)out);
    const float *w = so_model_params_at(s->m, nd->param_off + (size_t)r0 * in), *dy = s->t[node].dbuf;
    float *dw = so_model_grads_at(s->m, nd->param_off + (size_t)r0 * in);
    int K = s->m->chunks[node];
    if (k == K - 1)
        chunk_backward_head(s, node);
    OD_CHECK(s, node, "chunk gemm weights",
             dnnl_sgemm('T', 'N', r1 - r0, in, N, 1.0f, dy + r0, out, d->x, in, s->m->accumulate_grads ? 1.0f : 0.0f,
                        dw, in));
    if (!d->dx)
        return 0;
    OD_CHECK(s, node, "chunk gemm data",
             dnnl_sgemm('N', 'N', N, in, r1 - r0, 1.0f, dy + r0, out, w, in, k == K - 1 ? 0.0f : 1.0f,
                        d->dx, in));
    if (k > 0)
        return 0;
    int rc = od_reorder_exec(s, node, "dense diff copy", &d->dx_to_blocked, d->dx_mem, od_diff_target(s, node, 0));
    if (!rc)
        od_diff_finish(s, node, 0);
    return rc;
}

int od_dense_chunk(od_state *s, int node, int k, int r0, int r1, int backward)
{
    od_dense *d = s->t[node].priv;
    if (!d || !d->chunked)
        return so_err(SO_EINVAL, "node %s was not built to run in chunks", od_node(s, node)->name);
    return backward ? chunk_backward(s, node, k, r0, r1) : chunk_forward(s, node, k, r0, r1);
}

static void dense_destroy(void *priv)
{
    od_dense *d = priv;
    od_prim_fini(&d->fwd);
    od_prim_fini(&d->bwd_data);
    od_prim_fini(&d->bwd_w);
    od_prim_fini(&d->relu_bwd);
    od_wcache_fini(&d->w_fwd);
    od_wcache_fini(&d->w_bwd);
    od_mem_free(&d->bias, NULL);
    od_mem_free(&d->dst2, NULL);
    od_mem_free(&d->ddst2, NULL);
    od_gradw_fini(&d->gw);
    od_mem_free(&d->db_mem, &d->db);
    od_prim_fini(&d->x_to_plain);
    od_prim_fini(&d->dx_to_blocked);
    od_mem_free(&d->x_mem, &d->x);
    od_mem_free(&d->dx_mem, &d->dx);
    od_tobf16_fini(&d->src_h);
    od_tobf16_fini(&d->ddst_h);
    free(d);
}

static void dense_invalidate(void *priv)
{
    od_dense *d = priv;
    od_wcache_invalidate(&d->w_fwd);
    od_wcache_invalidate(&d->w_bwd);
}

const od_op od_op_dense = {dense_create, dense_forward, dense_backward, dense_destroy, dense_invalidate};
