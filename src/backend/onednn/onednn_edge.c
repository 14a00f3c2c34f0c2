/* Pipeline stage edges in the oneDNN backend. A tensor travels in the
 * layout its producer keeps it in (nChw16c, ...): the send node copies its
 * input's buffer as it is, the receiving stage's recv node was created with
 * that same layout (so_model.recv_layout), and the diffs come back the same
 * way, so no side reorders and both sides run the primitives one process
 * would: a pipeline computes the same bits as one process. */
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

typedef struct {
    float *data, *grad;          /* the bound buffers (bind_edge) */
} od_edge;

static int edge_priv(od_state *s, int node, od_edge **out)
{
    *out = calloc(1, sizeof **out);
    s->t[node].priv = *out;
    return *out ? 0 : so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
}

static int unbound(od_state *s, int node)
{
    return so_err(SO_EINVAL, "onednn: pipeline edge %s has no buffer bound", od_node(s, node)->name);
}

static void edge_destroy(void *priv) { free(priv); }

/* The sender's layout when it sent one that fits this node, else plain NCHW. */
static int recv_create(od_state *s, int node)
{
    od_edge *e;
    int rc = edge_priv(s, node, &e);
    dnnl_memory_desc_t md, plain;
    od_md_plain(s, node, &plain);
    md = plain;
    const void *desc = NULL;
    size_t len = 0;
    if (!rc && s->m->recv_layout)
        rc = s->m->recv_layout(s->m->recv_layout_ctx, node, &desc, &len);
    if (!rc && len) {
        if (len != sizeof md)
            return so_err(SO_EINVAL, "onednn: the layout sent for %s is not a oneDNN memory descriptor",
                          od_node(s, node)->name);
        memcpy(&md, desc, sizeof md);
        if (md.ndims != plain.ndims || memcmp(md.dims, plain.dims, sizeof md.dims[0] * (size_t)md.ndims) ||
            md.data_type != dnnl_f32)
            return so_err(SO_EINVAL, "onednn: the layout sent for %s has other dimensions", od_node(s, node)->name);
    }
    return rc ? rc : od_tensor_alloc(s, node, &md);
}

static int recv_forward(od_state *s, int node, int training)
{
    (void)training;
    od_edge *e = s->t[node].priv;
    if (!e->data)
        return unbound(s, node);
    memcpy(s->t[node].buf, e->data, s->t[node].bytes);
    return 0;
}

static int recv_backward(od_state *s, int node)
{
    od_edge *e = s->t[node].priv;
    if (!e->grad)
        return unbound(s, node);
    memcpy(e->grad, s->t[node].dbuf, s->t[node].bytes);
    return 0;
}

static int send_create(od_state *s, int node)
{
    od_edge *e;
    int rc = edge_priv(s, node, &e);
    return rc ? rc : od_tensor_alloc(s, node, &od_in(s, node, 0)->md);
}

static int send_forward(od_state *s, int node, int training)
{
    (void)training;
    od_edge *e = s->t[node].priv;
    if (!e->data)
        return unbound(s, node);
    memcpy(e->data, od_in(s, node, 0)->buf, od_in(s, node, 0)->bytes);
    return 0;
}

static int send_backward(od_state *s, int node)
{
    od_edge *e = s->t[node].priv;
    if (!so_graph_needs_diff(s->g, node, 0))
        return 0;
    if (!e->grad)
        return unbound(s, node);
    od_tensor *in = od_in(s, node, 0);
    od_vec_store(in->dbuf, e->grad, in->bytes / sizeof(float), so_graph_diff_accumulate(s->g, node, 0));
    return 0;
}

const od_op od_op_recv = {recv_create, recv_forward, recv_backward, edge_destroy, NULL};
const od_op od_op_send = {send_create, send_forward, send_backward, edge_destroy, NULL};

static so_op edge_op(const od_state *s, int node)
{
    return node >= 1 && node < s->n ? od_node(s, node)->op : SO_OP_INPUT;
}

size_t od_edge_bytes(void *state, int node)
{
    od_state *s = state;
    so_op op = edge_op(s, node);
    return op == SO_OP_RECV ? s->t[node].bytes : op == SO_OP_SEND ? od_in(s, node, 0)->bytes : 0;
}

size_t od_edge_layout(void *state, int node, void *buf, size_t len)
{
    od_state *s = state;
    if (edge_op(s, node) != SO_OP_SEND || len < sizeof(dnnl_memory_desc_t))
        return 0;
    memcpy(buf, &od_in(s, node, 0)->md, sizeof(dnnl_memory_desc_t));
    return sizeof(dnnl_memory_desc_t);
}

int od_bind_edge(void *state, int node, float *data, float *grad)
{
    od_state *s = state;
    so_op op = edge_op(s, node);
    if (op != SO_OP_RECV && op != SO_OP_SEND)
        return so_err(SO_EINVAL, "onednn: node %d is not a pipeline edge", node);
    od_edge *e = s->t[node].priv;
    if (data)
        e->data = data;
    if (grad)
        e->grad = grad;
    return 0;
}
