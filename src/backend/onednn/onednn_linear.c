/* Linear on the last dimension (GPT-2's c_attn, c_proj, c_fc and the LM
 * head) as three oneDNN matmuls over the plain rows of the activation, R =
 * batch x T rows of K features, weights W (N, K) read in place from the
 * flat parameters (tied: the embedding's token table):
 *   forward          Y (R,N)  = X (R,K) W^T + b      weights seen as (K,N) "ba"
 *   backward data    dX (R,K) = dY (R,N) W           (+= with a sum post-op)
 *   backward weights dW (N,K) = dY^T X               dY seen as (N,R) "ba";
 *                                                    += when micro-batches add
 * The bias gradient is a column sum of dY (onednn_seq.h's col_sums). No
 * weight copies: every layout is the flat one. An LM head whose only
 * consumer is the token loss keeps its gradient in its own output buffer
 * (the loss writes softmax - onehot over the logits): no second (R, Vp).
 * Under --precision bf16 the products run in BF16 (onednn_linear_bf16.c);
 * the bias gradient stays here, over the FP32 dY. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_gemm.h"
#include "backend/onednn/onednn_internal.h"
#include "backend/onednn/onednn_linear_bf16.h"
#include "backend/onednn/onednn_seq.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

typedef struct {
    int64_t R, K, N;
    od_prim fwd, bwd_data, bwd_w, bwd_w_add;
    dnnl_memory_t x, w, b, y;            /* forward operands over the node's buffers */
    dnnl_memory_t dy, wd, dx, dyt, dw;   /* backward operands */
    const od_seq_kernels *k;
    float *part;                         /* per-thread bias-gradient sums */
    int nthr;
    const od_gemm_kernels *gemm;         /* scaleout's GEMM (AVX2 and up), else the matmuls */
    od_linear_bf16 *bf16;                /* the BF16 products (--precision bf16), else NULL */
} od_linear;

static void md2(dnnl_memory_desc_t *md, int64_t a, int64_t b, dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {a, b};
    if (dnnl_memory_desc_init_by_tag(md, 2, d, dnnl_f32, tag) != dnnl_success)
        memset(md, 0, sizeof *md);
}

int od_linear_matmul(od_state *s, int node, const char *what, const dnnl_memory_desc_t *src,
                     const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst,
                     int sum, od_prim *out)
{
    dnnl_matmul_desc_t d;
    OD_CHECK(s, node, what, dnnl_matmul_desc_init(&d, src, wei, bias, dst));
    dnnl_primitive_attr_t a = NULL;
    int rc = od_attr(s, node, 0, sum, &a);
    if (rc)
        return rc;
    dnnl_status_t st = dnnl_primitive_desc_create(&out->pd, &d, a, s->eng, NULL);
    dnnl_primitive_attr_destroy(a);
    if (st != dnnl_success) {
        out->pd = NULL;
        return od_fail(s, node, what, st);
    }
    return od_prim_finish(s, node, what, out);
}

/* Offset of the weight: the node's own, or the tied embedding's token table. */
static size_t weight_off(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    return nd->a.tie ? od_node(s, nd->a.tie)->param_off : nd->param_off;
}

/* The logits of a token loss are written over by their gradient. */
static int diff_in_place(od_state *s, int node)
{
    int n = so_graph_size(s->g), users = 0, loss = 0;
    for (int j = node + 1; j < n; j++)
        for (int k = 0; k < od_node(s, j)->ninputs; k++)
            if (od_node(s, j)->inputs[k] == node) {
                users++;
                loss |= od_node(s, j)->op == SO_OP_TOKEN_XENT;
            }
    return users == 1 && loss;
}

static int create_fwd(od_state *s, int node, od_linear *l)
{
    const so_node *nd = od_node(s, node);
    dnnl_memory_desc_t x, w, b, y, plain;
    md2(&x, l->R, l->K, dnnl_ab);
    md2(&w, l->K, l->N, dnnl_ba);
    md2(&b, 1, l->N, dnnl_ab);
    md2(&y, l->R, l->N, dnnl_ab);
    od_md_plain(s, node, &plain);
    int rc = od_linear_matmul(s, node, "matmul forward", &x, &w, nd->a.bias ? &b : NULL, &y, 0, &l->fwd);
    if (!rc)
        rc = diff_in_place(s, node) ? od_tensor_alloc_inplace(s, node, &plain) : od_tensor_alloc(s, node, &plain);
    float *p = s->m->params; /* nothing is placed at build; linear_forward binds the weights again */
    size_t boff = nd->param_off + (nd->a.tie ? 0 : (size_t)(l->N * l->K));
    if (!rc)
        rc = od_mem_wrap(s, node, &x, od_in(s, node, 0)->buf, &l->x);
    if (!rc)
        rc = od_mem_wrap(s, node, &w, p + weight_off(s, node), &l->w);
    if (!rc && nd->a.bias)
        rc = od_mem_wrap(s, node, &b, p + boff, &l->b);
    if (!rc)
        rc = od_mem_wrap(s, node, &y, s->t[node].buf, &l->y);
    return rc;
}

static int create_bwd(od_state *s, int node, od_linear *l)
{
    dnnl_memory_desc_t dy, wd, dx, dyt, x, dw;
    md2(&dy, l->R, l->N, dnnl_ab);
    md2(&wd, l->N, l->K, dnnl_ab);
    md2(&dx, l->R, l->K, dnnl_ab);
    md2(&dyt, l->N, l->R, dnnl_ba);
    md2(&x, l->R, l->K, dnnl_ab);
    md2(&dw, l->N, l->K, dnnl_ab);
    int rc = od_mem_wrap(s, node, &dy, s->t[node].dbuf, &l->dy);
    if (!rc)
        rc = od_mem_wrap(s, node, &dyt, s->t[node].dbuf, &l->dyt);
    if (!rc)
        rc = od_mem_wrap(s, node, &dw, so_model_grads_at(s->m, weight_off(s, node)), &l->dw);
    if (!rc)
        rc = od_linear_matmul(s, node, "matmul backward weights", &dyt, &x, NULL, &dw, 0, &l->bwd_w);
    if (!rc)
        rc = od_linear_matmul(s, node, "matmul backward weights", &dyt, &x, NULL, &dw, 1, &l->bwd_w_add);
    if (rc || !so_graph_needs_diff(s->g, node, 0))
        return rc;
    rc = od_mem_wrap(s, node, &wd, so_model_params_at(s->m, weight_off(s, node)), &l->wd);
    if (!rc)
        rc = od_mem_wrap(s, node, &dx, od_in(s, node, 0)->dbuf, &l->dx);
    if (!rc)
        rc = od_linear_matmul(s, node, "matmul backward data", &dy, &wd, NULL, &dx,
                              so_graph_diff_accumulate(s->g, node, 0), &l->bwd_data);
    return rc;
}

static size_t bias_off(od_state *s, int node, const od_linear *l)
{
    const so_node *nd = od_node(s, node);
    return nd->param_off + (nd->a.tie ? 0 : (size_t)(l->N * l->K));
}

/* The BF16 products over the node's FP32 buffers. */
static int create_bf16(od_state *s, int node, od_linear *l)
{
    const so_node *nd = od_node(s, node);
    dnnl_memory_desc_t plain;
    od_md_plain(s, node, &plain);
    int rc = diff_in_place(s, node) ? od_tensor_alloc_inplace(s, node, &plain) : od_tensor_alloc(s, node, &plain);
    if (rc)
        return rc;
    int dx = so_graph_needs_diff(s->g, node, 0);
    od_linear_bf16_io io = {.R = l->R, .K = l->K, .N = l->N, .x = od_in(s, node, 0)->buf,
                            .w_off = weight_off(s, node), .has_bias = nd->a.bias != 0,
                            .bias_off = nd->a.bias ? bias_off(s, node, l) : 0,
                            .y = s->t[node].buf, .dy = s->t[node].dbuf, .dx = dx ? od_in(s, node, 0)->dbuf : NULL,
                            .dw_off = weight_off(s, node),
                            .dx_add = dx && so_graph_diff_accumulate(s->g, node, 0)};
    return od_linear_bf16_create(s, node, &io, &l->bf16);
}

static int linear_create(od_state *s, int node)
{
    od_linear *l = calloc(1, sizeof *l);
    if (!l)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = l;
    const so_node *nd = od_node(s, node);
    so_shape in = od_node(s, nd->inputs[0])->out;
    dnnl_memory_desc_t plain;
    od_md_plain(s, nd->inputs[0], &plain);
    if (!od_md_equal(&od_in(s, node, 0)->md, &plain))
        return so_err(SO_EUNSUP, "onednn: linear %s needs a plain (batch, T, C) input", nd->name);
    l->R = (int64_t)s->m->batch * in.c * in.h;
    l->K = in.w;
    l->N = nd->a.out;
    l->k = od_seq_pick();
    l->nthr = omp_get_max_threads();
    if (nd->a.bias && !(l->part = so_alloc((size_t)l->nthr * (size_t)l->N * sizeof(float))))
        return so_err(SO_ENOMEM, "out of memory for node %s", nd->name);
    if (s->m->precision == SO_PRECISION_BF16)
        return create_bf16(s, node, l);
    l->gemm = getenv("SCALEOUT_LINEAR_ONEDNN") ? NULL : od_gemm_pick();
    size_t work = l->gemm ? (size_t)l->nthr * od_gemm_work(l->gemm) * sizeof(float) : 0;
    if (work > s->wtmp_bytes)
        s->wtmp_bytes = work; /* the packing buffers: s->wtmp, allocated once all nodes are built */
    int rc = create_fwd(s, node, l);
    return rc ? rc : create_bwd(s, node, l);
}

/* The three products on scaleout's GEMM. */
static void gemm_forward(od_state *s, int node, od_linear *l)
{
    const so_node *nd = od_node(s, node);
    const float *w = so_model_params_at(s->m, weight_off(s, node));
    od_gemm_args g = {.ta = 0, .tb = 1, .M = (int)l->R, .N = (int)l->N, .K = (int)l->K,
                      .A = od_in(s, node, 0)->buf, .lda = (int)l->K, .B = w, .ldb = (int)l->K,
                      .C = s->t[node].buf, .ldc = (int)l->N,
                      .bias = nd->a.bias ? so_model_params_at(s->m, nd->param_off) + (nd->a.tie ? 0 : (size_t)(l->N * l->K)) : NULL};
    od_gemm(l->gemm, &g, s->wtmp, l->nthr);
}

static void gemm_backward(od_state *s, int node, od_linear *l)
{
    const float *w = so_model_params_at(s->m, weight_off(s, node)), *dy = s->t[node].dbuf;
    if (so_graph_needs_diff(s->g, node, 0)) {
        od_gemm_args d = {.ta = 0, .tb = 0, .M = (int)l->R, .N = (int)l->K, .K = (int)l->N, .A = dy,
                          .lda = (int)l->N, .B = w, .ldb = (int)l->K, .C = od_in(s, node, 0)->dbuf, .ldc = (int)l->K,
                          .add = so_graph_diff_accumulate(s->g, node, 0)};
        od_gemm(l->gemm, &d, s->wtmp, l->nthr);
    }
    od_gemm_args g = {.ta = 1, .tb = 0, .M = (int)l->N, .N = (int)l->K, .K = (int)l->R, .A = dy,
                      .lda = (int)l->N, .B = od_in(s, node, 0)->buf, .ldb = (int)l->K,
                      .C = so_model_grads_at(s->m, weight_off(s, node)), .ldc = (int)l->K, .add = s->m->accumulate_grads};
    od_gemm(l->gemm, &g, s->wtmp, l->nthr);
}

static int linear_forward(od_state *s, int node, int training)
{
    (void)training;
    od_linear *l = s->t[node].priv;
    if (l->bf16)
        return od_linear_bf16_forward(s, node, l->bf16);
    if (l->gemm) {
        gemm_forward(s, node, l);
        return 0;
    }
    const so_node *nd = od_node(s, node);
    int rc = od_mem_rebind(s, node, l->w, so_model_params_at(s->m, weight_off(s, node)));
    if (!rc && l->b)
        rc = od_mem_rebind(s, node, l->b,
                           so_model_params_at(s->m, nd->param_off) + (nd->a.tie ? 0 : (size_t)(l->N * l->K)));
    if (rc)
        return rc;
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, l->x}, {DNNL_ARG_WEIGHTS, l->w}, {DNNL_ARG_DST, l->y},
                            {DNNL_ARG_BIAS, l->b}};
    return od_exec(s, node, "matmul forward", &l->fwd, l->b ? 4 : 3, a);
}

/* db (=, or += across micro-batches) = column sums of dY, per-thread partials
 * summed in thread order. */
static void bias_grad(od_state *s, int node, od_linear *l)
{
    const so_node *nd = od_node(s, node);
    float *db = so_model_grads_at(s->m, nd->param_off) + (nd->a.tie ? 0 : (size_t)(l->N * l->K));
    size_t N = (size_t)l->N;
#pragma omp parallel num_threads(l->nthr)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t per = ((size_t)l->R + (size_t)nt - 1) / (size_t)nt, lo = per * (size_t)t;
        size_t hi = lo + per < (size_t)l->R ? lo + per : (size_t)l->R;
        float *acc = l->part + (size_t)t * N;
        memset(acc, 0, N * sizeof *acc);
        if (lo < hi)
            l->k->col_sums(s->t[node].dbuf, lo, hi, (int)N, acc);
    }
    for (size_t c = 0; c < N; c++) {
        float v = 0.0f;
        for (int t = 0; t < l->nthr; t++)
            v += l->part[(size_t)t * N + c];
        db[c] = s->m->accumulate_grads ? db[c] + v : v;
    }
}

static int linear_backward(od_state *s, int node)
{
    od_linear *l = s->t[node].priv;
    int rc = 0;
    if (l->bf16) {
        rc = od_linear_bf16_backward(s, node, l->bf16);
        if (!rc && l->part)
            bias_grad(s, node, l);
        return rc;
    }
    if (l->gemm) {
        gemm_backward(s, node, l);
        if (l->part)
            bias_grad(s, node, l);
        return 0;
    }
    if (l->bwd_data.p)
        rc = od_mem_rebind(s, node, l->wd, so_model_params_at(s->m, weight_off(s, node)));
    if (!rc && l->bwd_data.p) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, l->dy}, {DNNL_ARG_WEIGHTS, l->wd}, {DNNL_ARG_DST, l->dx}};
        rc = od_exec(s, node, "matmul backward data", &l->bwd_data, 3, a);
    }
    dnnl_exec_arg_t w[3] = {{DNNL_ARG_SRC, l->dyt}, {DNNL_ARG_WEIGHTS, l->x}, {DNNL_ARG_DST, l->dw}};
    if (!rc)
        rc = od_mem_rebind(s, node, l->dw, so_model_grads_at(s->m, weight_off(s, node)));
    if (!rc)
        rc = od_exec(s, node, "matmul backward weights", s->m->accumulate_grads ? &l->bwd_w_add : &l->bwd_w, 3, w);
    if (!rc && l->part)
        bias_grad(s, node, l);
    return rc;
}

static void linear_destroy(void *priv)
{
    od_linear *l = priv;
    od_prim_fini(&l->fwd);
    od_prim_fini(&l->bwd_data);
    od_prim_fini(&l->bwd_w);
    od_prim_fini(&l->bwd_w_add);
    dnnl_memory_t *mems[] = {&l->x, &l->w, &l->b, &l->y, &l->dy, &l->wd, &l->dx, &l->dyt, &l->dw};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        od_mem_free(mems[i], NULL);
    so_free(l->part);
    od_linear_bf16_destroy(l->bf16);
    free(l);
}

static void linear_invalidate(void *priv)
{
    od_linear_bf16_invalidate(((od_linear *)priv)->bf16);
}

const od_op od_op_linear = {linear_create, linear_forward, linear_backward, linear_destroy, linear_invalidate};
