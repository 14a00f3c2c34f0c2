/* Max pooling (with the forward_training workspace that backward needs),
 * average pooling with count_include_pad=True (PyTorch's default; the graph
 * guarantees windows never leave the padded input, so the divisor is kh*kw
 * like oneDNN's avg_include_padding) and global average pooling. */
#include <stdlib.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

typedef struct {
    od_prim fwd, bwd;
    float *ws;                   /* max pooling workspace */
    dnnl_memory_t ws_mem;
} od_pool;

static int pool_create_alg(od_state *s, int node, dnnl_alg_kind_t alg, int kh, int kw, int sh,
                           int sw, int ph, int pw)
{
    od_pool *p = calloc(1, sizeof *p);
    if (!p)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = p;
    const so_node *nd = od_node(s, node);
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    dnnl_memory_desc_t d_any;
    od_md_4d(&d_any, s->m->batch, nd->out.c, nd->out.h, nd->out.w, dnnl_format_tag_any);
    dnnl_dims_t k = {kh, kw}, st = {sh, sw}, pad = {ph, pw};
    dnnl_pooling_desc_t pd;
    OD_CHECK(s, node, "pooling forward desc",
             dnnl_pooling_forward_desc_init(&pd, dnnl_forward_training, alg, &in->md, &d_any, st, k, pad, pad));
    int rc = od_prim_init(s, node, "pooling forward", &pd, 0, NULL, &p->fwd);
    dnnl_memory_desc_t dst = od_query_md(&p->fwd, dnnl_query_dst_md);
    if (!rc)
        rc = od_tensor_alloc(s, node, &dst);
    if (!rc && alg == dnnl_pooling_max) {
        dnnl_memory_desc_t ws = od_query_md(&p->fwd, dnnl_query_workspace_md);
        rc = od_mem_alloc(s, node, &ws, &p->ws, &p->ws_mem);
    }
    if (rc || !so_graph_needs_diff(s->g, node, 0))
        return rc;
    OD_CHECK(s, node, "pooling backward desc",
             dnnl_pooling_backward_desc_init(&pd, alg, &in->md, &t->md, st, k, pad, pad));
    return od_prim_init(s, node, "pooling backward", &pd, 0, p->fwd.pd, &p->bwd);
}

static int maxpool_create(od_state *s, int node)
{
    const so_attrs *a = &od_node(s, node)->a;
    return pool_create_alg(s, node, dnnl_pooling_max, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw);
}

static int avgpool_create(od_state *s, int node)
{
    const so_attrs *a = &od_node(s, node)->a;
    return pool_create_alg(s, node, dnnl_pooling_avg_include_padding, a->kh, a->kw, a->sh, a->sw,
                           a->ph, a->pw);
}

static int gap_create(od_state *s, int node)
{
    so_shape is = od_node(s, od_node(s, node)->inputs[0])->out;
    return pool_create_alg(s, node, dnnl_pooling_avg_exclude_padding, is.h, is.w, 1, 1, 0, 0);
}

/* (N,C,H,W) -> (N,C,OH,OW); the same training primitive serves eval. */
static int pool_forward(od_state *s, int node, int training)
{
    (void)training;
    od_pool *p = s->t[node].priv;
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, od_in(s, node, 0)->mem},
                            {DNNL_ARG_DST, s->t[node].mem},
                            {DNNL_ARG_WORKSPACE, p->ws_mem}};
    return od_exec(s, node, "pooling forward", &p->fwd, p->ws_mem ? 3 : 2, a);
}

static int pool_backward(od_state *s, int node)
{
    od_pool *p = s->t[node].priv;
    if (!p->bwd.p)
        return 0;
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, s->t[node].dmem},
                            {DNNL_ARG_DIFF_SRC, od_diff_target(s, node, 0)},
                            {DNNL_ARG_WORKSPACE, p->ws_mem}};
    int rc = od_exec(s, node, "pooling backward", &p->bwd, p->ws_mem ? 3 : 2, a);
    if (!rc)
        od_diff_finish(s, node, 0);
    return rc;
}

static void pool_destroy(void *priv)
{
    od_pool *p = priv;
    od_prim_fini(&p->fwd);
    od_prim_fini(&p->bwd);
    od_mem_free(&p->ws_mem, &p->ws);
    free(p);
}

const od_op od_op_maxpool = {maxpool_create, pool_forward, pool_backward, pool_destroy, NULL};
const od_op od_op_avgpool = {avgpool_create, pool_forward, pool_backward, pool_destroy, NULL};
const od_op od_op_gap = {gap_create, pool_forward, pool_backward, pool_destroy, NULL};
