/* Layout plumbing ops: add (oneDNN sum, optional fused ReLU), channel concat
 * (oneDNN concat; backward reorders sub-memory views of the diff) and flatten
 * (a reorder from the blocked layout to plain NCHW, which is (C*H*W,1,1)).
 * Input diffs are reorders, so accumulation is a reorder sum post-op. */
#include <stdlib.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

/* ---- add ---- */

/* When every input shares the output's layout (the usual residual case)
 * add is one fused loop y = relu(x0 + x1 + ...) and backward copies or adds
 * the diff: a parallel memcpy beats oneDNN's generic same-layout reorder. */
typedef struct {
    int same;                    /* all inputs in the output's layout */
    od_prim sum;
    od_prim bwd[SO_MAX_INPUTS];  /* diff -> input slot's diff (write or add) */
} od_add;

static int add_create(od_state *s, int node)
{
    od_add *a = calloc(1, sizeof *a);
    if (!a)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = a;
    const so_node *nd = od_node(s, node);
    dnnl_memory_desc_t src[SO_MAX_INPUTS];
    float scales[SO_MAX_INPUTS];
    for (int k = 0; k < nd->ninputs; k++) {
        src[k] = od_in(s, node, k)->md;
        scales[k] = 1.0f;
    }
    a->same = 1;
    for (int k = 1; k < nd->ninputs; k++)
        a->same &= od_md_equal(&src[k], &src[0]);
    if (a->same)
        return od_tensor_alloc(s, node, &src[0]);
    /* The output takes the first input's layout; others are converted by sum. */
    dnnl_primitive_attr_t attr = NULL;
    int rc = od_attr(s, node, 0, 0, &attr);
    if (rc)
        return rc;
    dnnl_status_t st = dnnl_sum_primitive_desc_create(&a->sum.pd, &src[0], nd->ninputs, scales, src, attr, s->eng);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        a->sum.pd = NULL;
        return od_fail(s, node, "sum", st);
    }
    rc = od_prim_finish(s, node, "sum", &a->sum);
    if (!rc)
        rc = od_tensor_alloc(s, node, &src[0]);
    for (int k = 0; !rc && k < nd->ninputs; k++)
        if (so_graph_needs_diff(s->g, node, k))
            rc = od_reorder_init(s, node, "add backward reorder", &s->t[node].md, &src[k],
                                 so_graph_diff_accumulate(s->g, node, k), &a->bwd[k]);
    return rc;
}

static void relu_in_place(od_tensor *t)
{
    if (t->half)
        od_half_relu((uint16_t *)(void *)t->buf, t->bytes / sizeof(uint16_t));
    else
        od_vec_relu(t->buf, t->bytes / sizeof(float));
}

/* The same over BF16 tensors (onednn_half.c): each partial sum rounded. */
static void add_loop_half(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    od_tensor *t = &s->t[node];
    size_t n = t->bytes / sizeof(uint16_t);
    uint16_t *y = (uint16_t *)(void *)t->buf;
    int relu_now = nd->a.relu && nd->ninputs == 2;
    od_half_add2(y, (const uint16_t *)(void *)od_in(s, node, 0)->buf, (const uint16_t *)(void *)od_in(s, node, 1)->buf,
                 n, relu_now);
    for (int k = 2; k < nd->ninputs; k++)
        od_half_add(y, (const uint16_t *)(void *)od_in(s, node, k)->buf, n);
    if (nd->a.relu && !relu_now)
        relu_in_place(t);
}

/* y = x0 + x1 (+ ...), ReLU'd when fused; one pass over memory. */
static void add_loop(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    od_tensor *t = &s->t[node];
    if (t->half) {
        add_loop_half(s, node);
        return;
    }
    size_t n = t->bytes / sizeof(float);
    float *y = t->buf;
    const float *x0 = od_in(s, node, 0)->buf, *x1 = od_in(s, node, 1)->buf;
    if (nd->a.relu && nd->ninputs == 2) { /* two loops: a flag tested inside kept the loop scalar and branchy */
#pragma omp parallel for simd schedule(static) if (n > 32768)
        for (size_t i = 0; i < n; i++) {
            float v = x0[i] + x1[i];
            y[i] = v < 0.0f ? 0.0f : v;
        }
    } else {
#pragma omp parallel for simd schedule(static) if (n > 32768)
        for (size_t i = 0; i < n; i++)
            y[i] = x0[i] + x1[i];
    }
    for (int k = 2; k < nd->ninputs; k++)
        od_vec_add(y, od_in(s, node, k)->buf, n);
    if (nd->a.relu && nd->ninputs > 2)
        relu_in_place(t);
}

static int add_forward(od_state *s, int node, int training)
{
    (void)training;
    od_add *a = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    od_tensor *t = &s->t[node];
    if (a->same) {
        add_loop(s, node);
        return 0;
    }
    dnnl_exec_arg_t args[SO_MAX_INPUTS + 1];
    for (int k = 0; k < nd->ninputs; k++)
        args[k] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + k, od_in(s, node, k)->mem};
    args[nd->ninputs] = (dnnl_exec_arg_t){DNNL_ARG_DST, t->mem};
    int rc = od_exec(s, node, "sum", &a->sum, nd->ninputs + 1, args);
    if (!rc && nd->a.relu)
        relu_in_place(t);
    return rc;
}

/* Two same-layout inputs whose diffs this add writes first (every residual
 * add): the fused ReLU's mask and the hand-out in one pass, g = out > 0 ? d
 * : 0 stored straight into both. Mask in place, then a copy per input moved
 * the tensor 5 times through memory, this 4 (ResNet-50 b16's 56x56 adds:
 * 11 ms a backward). Plain loops over restrict pointers, so they vectorise. */
static void mask_to_pair(const float *restrict d, const float *restrict out, float *restrict d0,
                         float *restrict d1, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++) {
        float di = d[i], g = out[i] > 0.0f ? di : 0.0f; /* an unconditional load: a select, no branch */
        d0[i] = g;
        d1[i] = g;
    }
}

static void copy_to_pair(const float *restrict d, float *restrict d0, float *restrict d1, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++) {
        d0[i] = d[i];
        d1[i] = d[i];
    }
}

/* 1 when add_backward can hand the diff to both inputs in one pass. */
static int pair_store(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    if (nd->ninputs != 2 || od_in(s, node, 0)->dbuf == od_in(s, node, 1)->dbuf)
        return 0;
    for (int k = 0; k < 2; k++)
        if (!so_graph_needs_diff(s->g, node, k) || so_graph_diff_accumulate(s->g, node, k))
            return 0;
    return 1;
}

/* The element passes of add's backward on the tensors' storage type (BF16
 * loops in onednn_half.c): the diff to both inputs (masked by the fused
 * ReLU), the mask in place, one input's diff written or added. */
static void diff_to_pair(od_state *s, int node)
{
    od_tensor *t = &s->t[node];
    int relu = od_node(s, node)->a.relu;
    void *d0 = od_in(s, node, 0)->dbuf, *d1 = od_in(s, node, 1)->dbuf;
    if (t->half)
        od_half_to_pair((const uint16_t *)(void *)t->dbuf, (const uint16_t *)(void *)t->buf, d0, d1,
                        t->bytes / sizeof(uint16_t), relu);
    else if (relu)
        mask_to_pair(t->dbuf, t->buf, d0, d1, t->bytes / sizeof(float));
    else
        copy_to_pair(t->dbuf, d0, d1, t->bytes / sizeof(float));
}

static void relu_mask(od_tensor *t)
{
    if (t->half)
        od_half_relu_bwd((uint16_t *)(void *)t->dbuf, (const uint16_t *)(void *)t->buf, t->bytes / sizeof(uint16_t));
    else
        od_vec_relu_bwd(t->dbuf, t->buf, t->bytes / sizeof(float));
}

static void diff_store(od_tensor *in, const od_tensor *t, int add)
{
    if (t->half)
        od_half_store((uint16_t *)(void *)in->dbuf, (const uint16_t *)(void *)t->dbuf, t->bytes / sizeof(uint16_t), add);
    else
        od_vec_store(in->dbuf, t->dbuf, t->bytes / sizeof(float), add);
}

static int add_backward(od_state *s, int node)
{
    od_add *a = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    od_tensor *t = &s->t[node];
    if (a->same && pair_store(s, node)) {
        diff_to_pair(s, node);
        return 0;
    }
    if (nd->a.relu)
        relu_mask(t);
    int rc = 0;
    for (int k = nd->ninputs - 1; a->same && k >= 0; k--)
        if (so_graph_needs_diff(s->g, node, k))
            diff_store(od_in(s, node, k), t, so_graph_diff_accumulate(s->g, node, k));
    for (int k = nd->ninputs - 1; !a->same && !rc && k >= 0; k--)
        if (a->bwd[k].p)
            rc = od_reorder_exec(s, node, "add backward reorder", &a->bwd[k], t->dmem, od_in(s, node, k)->dmem);
    return rc;
}

static void add_destroy(void *priv)
{
    od_add *a = priv;
    od_prim_fini(&a->sum);
    for (int k = 0; k < SO_MAX_INPUTS; k++)
        od_prim_fini(&a->bwd[k]);
    free(a);
}

const od_op od_op_add = {add_create, add_forward, add_backward, add_destroy, NULL};

/* ---- concat ---- */

typedef struct {
    od_prim fwd;
    od_prim bwd[SO_MAX_INPUTS];
    dnnl_memory_t view[SO_MAX_INPUTS]; /* slot's channel range of the node's diff */
} od_concat;

/* Sub-memory descs of each input's channel range in dst; fails when a range
 * does not start on a layout block (e.g. 8 channels into nChw16c). */
static int concat_views(od_state *s, int node, const dnnl_memory_desc_t *dst, dnnl_memory_desc_t *sub)
{
    const so_node *nd = od_node(s, node);
    int64_t off = 0;
    for (int k = 0; k < nd->ninputs; k++) {
        so_shape is = od_node(s, nd->inputs[k])->out;
        dnnl_dims_t d = {s->m->batch, is.c, is.h, is.w}, o = {0, off, 0, 0};
        if (dnnl_memory_desc_init_submemory(&sub[k], dst, d, o) != dnnl_success)
            return -1;
        off += is.c;
    }
    return 0;
}

static int concat_pd(od_state *s, int node, const dnnl_memory_desc_t *dst, od_prim *out)
{
    const so_node *nd = od_node(s, node);
    dnnl_memory_desc_t src[SO_MAX_INPUTS];
    for (int k = 0; k < nd->ninputs; k++)
        src[k] = od_in(s, node, k)->md;
    dnnl_primitive_attr_t attr = NULL;
    int rc = od_attr(s, node, 0, 0, &attr);
    if (rc)
        return rc;
    dnnl_status_t st = dnnl_concat_primitive_desc_create(&out->pd, dst, nd->ninputs, 1, src, attr, s->eng);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        out->pd = NULL;
        return od_fail(s, node, "concat", st);
    }
    return 0;
}

static int concat_create(od_state *s, int node)
{
    od_concat *c = calloc(1, sizeof *c);
    if (!c)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = c;
    const so_node *nd = od_node(s, node);
    dnnl_memory_desc_t sub[SO_MAX_INPUTS], dst;
    int rc = concat_pd(s, node, NULL, &c->fwd);
    dst = od_query_md(&c->fwd, dnnl_query_dst_md);
    if (!rc && concat_views(s, node, &dst, sub)) {
        /* oneDNN's pick has blocks across input boundaries: use plain NCHW. */
        od_prim_fini(&c->fwd);
        od_md_plain(s, node, &dst);
        rc = concat_pd(s, node, &dst, &c->fwd);
        if (!rc && concat_views(s, node, &dst, sub))
            rc = od_fail(s, node, "concat sub-memory", dnnl_unimplemented);
    }
    if (!rc)
        rc = od_prim_finish(s, node, "concat", &c->fwd);
    if (!rc)
        rc = od_tensor_alloc(s, node, &dst);
    for (int k = 0; !rc && k < nd->ninputs; k++) {
        if (!so_graph_needs_diff(s->g, node, k))
            continue;
        rc = od_mem_wrap(s, node, &sub[k], s->t[node].dbuf, &c->view[k]);
        if (!rc)
            rc = od_reorder_init(s, node, "concat backward reorder", &sub[k], &od_in(s, node, k)->md,
                                 so_graph_diff_accumulate(s->g, node, k), &c->bwd[k]);
    }
    return rc;
}

static int concat_forward(od_state *s, int node, int training)
{
    (void)training;
    od_concat *c = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    dnnl_exec_arg_t args[SO_MAX_INPUTS + 1];
    for (int k = 0; k < nd->ninputs; k++)
        args[k] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + k, od_in(s, node, k)->mem};
    args[nd->ninputs] = (dnnl_exec_arg_t){DNNL_ARG_DST, s->t[node].mem};
    return od_exec(s, node, "concat", &c->fwd, nd->ninputs + 1, args);
}

static int concat_backward(od_state *s, int node)
{
    od_concat *c = s->t[node].priv;
    int rc = 0;
    for (int k = od_node(s, node)->ninputs - 1; !rc && k >= 0; k--)
        if (c->bwd[k].p)
            rc = od_reorder_exec(s, node, "concat backward reorder", &c->bwd[k], c->view[k],
                                 od_in(s, node, k)->dmem);
    return rc;
}

static void concat_destroy(void *priv)
{
    od_concat *c = priv;
    od_prim_fini(&c->fwd);
    for (int k = 0; k < SO_MAX_INPUTS; k++) {
        od_prim_fini(&c->bwd[k]);
        od_mem_free(&c->view[k], NULL);
    }
    free(c);
}

const od_op od_op_concat = {concat_create, concat_forward, concat_backward, concat_destroy, NULL};

/* ---- flatten ---- */

typedef struct {
    od_prim fwd, bwd;
    dnnl_memory_t view, dview;   /* node's buffers seen as plain (N,C,H,W) of the input */
} od_flatten;

static int flatten_create(od_state *s, int node)
{
    od_flatten *f = calloc(1, sizeof *f);
    if (!f)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = f;
    int in_node = od_node(s, node)->inputs[0];
    od_tensor *in = &s->t[in_node], *t = &s->t[node];
    dnnl_memory_desc_t plain_in, plain_out;
    od_md_plain(s, in_node, &plain_in);
    od_md_plain(s, node, &plain_out);
    int rc = od_tensor_alloc(s, node, &plain_out);
    if (!rc)
        rc = od_mem_wrap(s, node, &plain_in, t->buf, &f->view);
    if (!rc)
        rc = od_mem_wrap(s, node, &plain_in, t->dbuf, &f->dview);
    if (!rc)
        rc = od_reorder_init(s, node, "flatten reorder", &in->md, &plain_in, 0, &f->fwd);
    if (!rc && so_graph_needs_diff(s->g, node, 0))
        rc = od_reorder_init(s, node, "flatten backward reorder", &plain_in, &in->md,
                             so_graph_diff_accumulate(s->g, node, 0), &f->bwd);
    return rc;
}

static int flatten_forward(od_state *s, int node, int training)
{
    (void)training;
    od_flatten *f = s->t[node].priv;
    return od_reorder_exec(s, node, "flatten reorder", &f->fwd, od_in(s, node, 0)->mem, f->view);
}

static int flatten_backward(od_state *s, int node)
{
    od_flatten *f = s->t[node].priv;
    if (!f->bwd.p)
        return 0;
    return od_reorder_exec(s, node, "flatten backward reorder", &f->bwd, f->dview, od_in(s, node, 0)->dmem);
}

static void flatten_destroy(void *priv)
{
    od_flatten *f = priv;
    od_prim_fini(&f->fwd);
    od_prim_fini(&f->bwd);
    od_mem_free(&f->view, NULL);
    od_mem_free(&f->dview, NULL);
    free(f);
}

const od_op od_op_flatten = {flatten_create, flatten_forward, flatten_backward, flatten_destroy, NULL};
