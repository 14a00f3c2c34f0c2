/* Standalone ReLU / tanh / sigmoid nodes and the in-place ReLU backward used
 * by ops with a fused ReLU. All use oneDNN's *_use_dst_for_bwd algorithms:
 * the backward reads the output, which every node keeps anyway. The output
 * keeps the input's layout. */
#include <stdlib.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

typedef struct {
    od_prim fwd, bwd;
} od_eltwise;

static dnnl_alg_kind_t eltwise_alg(so_op op)
{
    if (op == SO_OP_TANH)
        return dnnl_eltwise_tanh_use_dst_for_bwd;
    if (op == SO_OP_SIGMOID)
        return dnnl_eltwise_logistic_use_dst_for_bwd;
    return dnnl_eltwise_relu_use_dst_for_bwd;
}

/* Backward primitive on node's own md; fwd_pd is its forward hint. */
static int bwd_init(od_state *s, int node, dnnl_alg_kind_t alg, const_dnnl_primitive_desc_t fwd_pd,
                    od_prim *out)
{
    const dnnl_memory_desc_t *md = &s->t[node].md;
    dnnl_eltwise_desc_t bd;
    OD_CHECK(s, node, "eltwise backward desc", dnnl_eltwise_backward_desc_init(&bd, alg, md, md, 0.0f, 0.0f));
    return od_prim_init(s, node, "eltwise backward", &bd, 0, fwd_pd, out);
}

int od_relu_bwd_init(od_state *s, int node, od_prim *out)
{
    dnnl_eltwise_desc_t fd;
    dnnl_primitive_desc_t hint;
    OD_CHECK(s, node, "relu forward desc",
             dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, dnnl_eltwise_relu_use_dst_for_bwd,
                                            &s->t[node].md, 0.0f, 0.0f));
    OD_CHECK(s, node, "relu forward hint", dnnl_primitive_desc_create(&hint, &fd, NULL, s->eng, NULL));
    int rc = bwd_init(s, node, dnnl_eltwise_relu_use_dst_for_bwd, hint, out);
    dnnl_primitive_desc_destroy(hint);
    return rc;
}

/* diff = out > 0 ? diff : 0, in place on the node's own diff. */
int od_relu_bwd_exec(od_state *s, int node, const od_prim *p)
{
    od_tensor *t = &s->t[node];
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_DST, t->mem}, {DNNL_ARG_DIFF_DST, t->dmem}, {DNNL_ARG_DIFF_SRC, t->dmem}};
    return od_exec(s, node, "relu backward", p, 3, a);
}

static int eltwise_create(od_state *s, int node)
{
    od_eltwise *e = calloc(1, sizeof *e);
    if (!e)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = e;
    dnnl_alg_kind_t alg = eltwise_alg(od_node(s, node)->op);
    od_tensor *in = od_in(s, node, 0);
    dnnl_eltwise_desc_t fd;
    OD_CHECK(s, node, "eltwise forward desc",
             dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &in->md, 0.0f, 0.0f));
    int rc = od_prim_init(s, node, "eltwise forward", &fd, 0, NULL, &e->fwd);
    if (!rc)
        rc = od_tensor_alloc(s, node, &in->md);
    if (!rc && so_graph_needs_diff(s->g, node, 0))
        rc = bwd_init(s, node, alg, e->fwd.pd, &e->bwd);
    return rc;
}

static int eltwise_forward(od_state *s, int node, int training)
{
    (void)training;
    od_eltwise *e = s->t[node].priv;
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_SRC, od_in(s, node, 0)->mem}, {DNNL_ARG_DST, s->t[node].mem}};
    return od_exec(s, node, "eltwise forward", &e->fwd, 2, a);
}

static int eltwise_backward(od_state *s, int node)
{
    od_eltwise *e = s->t[node].priv;
    if (!e->bwd.p)
        return 0;
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_DST, s->t[node].mem},
                            {DNNL_ARG_DIFF_DST, s->t[node].dmem},
                            {DNNL_ARG_DIFF_SRC, od_diff_target(s, node, 0)}};
    int rc = od_exec(s, node, "eltwise backward", &e->bwd, 3, a);
    if (!rc)
        od_diff_finish(s, node, 0);
    return rc;
}

static void eltwise_destroy(void *priv)
{
    od_eltwise *e = priv;
    od_prim_fini(&e->fwd);
    od_prim_fini(&e->bwd);
    free(e);
}

const od_op od_op_eltwise = {eltwise_create, eltwise_forward, eltwise_backward, eltwise_destroy, NULL};
