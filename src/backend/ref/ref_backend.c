/* The reference backend ("--backend ref"): state, buffer planning, input and
 * output copies and the per-op dispatch. Kernels are plain C loops on NCHW
 * float tensors in ref_*.c; they are the ground truth the oneDNN backend is
 * compared against, so clarity wins over speed everywhere. */
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

/* Kernel table indexed by op; SO_OP_INPUT never runs. */
static const struct {
    ref_fwd_fn fwd;
    ref_bwd_fn bwd;
} kernels[SO_OP_COUNT] = {
    [SO_OP_DENSE] = {ref_dense_forward, ref_dense_backward},
    [SO_OP_CONV] = {ref_conv_forward, ref_conv_backward},
    [SO_OP_MAXPOOL] = {ref_maxpool_forward, ref_maxpool_backward},
    [SO_OP_AVGPOOL] = {ref_avgpool_forward, ref_avgpool_backward},
    [SO_OP_GAP] = {ref_gap_forward, ref_gap_backward},
    [SO_OP_RELU] = {ref_relu_forward, ref_relu_backward},
    [SO_OP_TANH] = {ref_tanh_forward, ref_tanh_backward},
    [SO_OP_SIGMOID] = {ref_sigmoid_forward, ref_sigmoid_backward},
    [SO_OP_BATCHNORM] = {ref_bn_forward, ref_bn_backward},
    [SO_OP_DROPOUT] = {ref_dropout_forward, ref_dropout_backward},
    [SO_OP_FLATTEN] = {ref_flatten_forward, ref_flatten_backward},
    [SO_OP_ADD] = {ref_add_forward, ref_add_backward},
    [SO_OP_CONCAT] = {ref_concat_forward, ref_concat_backward},
    [SO_OP_SOFTMAX_XENT] = {ref_loss_forward, ref_loss_backward},
    [SO_OP_RECV] = {ref_recv_forward, ref_recv_backward},
    [SO_OP_SEND] = {ref_send_forward, ref_send_backward},
    [SO_OP_EMBED] = {ref_embed_forward, ref_embed_backward},
    [SO_OP_LAYERNORM] = {ref_layernorm_forward, ref_layernorm_backward},
    [SO_OP_LINEAR] = {ref_linear_forward, ref_linear_backward},
    [SO_OP_ATTENTION] = {ref_attention_forward, ref_attention_backward},
    [SO_OP_GELU] = {ref_gelu_forward, ref_gelu_backward},
    [SO_OP_TOKEN_XENT] = {ref_token_loss_forward, ref_token_loss_backward},
};

float *ref_dx(ref_state *s, int i, int slot)
{
    if (!so_graph_needs_diff(s->g, i, slot))
        return NULL;
    const so_node *nd = ref_node(s, i);
    float *dx = s->diff[nd->inputs[slot]];
    if (!so_graph_diff_accumulate(s->g, i, slot))
        memset(dx, 0, (size_t)s->batch * ref_numel(ref_in_shape(s, i, slot)) * sizeof *dx);
    return dx;
}

float *ref_dw(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    float *dw = so_model_grads_at(s->m, nd->param_off);
    if (!s->m->accumulate_grads)
        memset(dw, 0, nd->nparam * sizeof *dw);
    return dw;
}

static void ref_destroy(void *state)
{
    ref_state *s = state;
    if (!s)
        return;
    int nn = so_graph_size(s->g);
    for (int i = 0; i < nn; i++) {
        if (s->act)
            so_free(s->act[i]);
        if (s->diff)
            so_free(s->diff[i]);
        if (s->aux)
            so_free(s->aux[i]);
        if (s->argmax)
            so_free(s->argmax[i]);
        if (s->kv)
            so_free(s->kv[i]);
    }
    free(s->kv);
    free(s->act);
    free(s->diff);
    free(s->aux);
    free(s->argmax);
    free(s->edge_data);
    free(s->edge_grad);
    for (int j = 0; j < SO_MAX_INPUTS; j++)
        so_free(s->acc_scratch[j]);
    so_free(s->labels);
    free(s);
}

/* Per-node scratch sizes: dropout keeps its scales, batchnorm and layernorm
 * their statistics, attention its rows (ref_internal.h); 0 for the rest
 * (maxpool's argmax is allocated apart). */
static size_t aux_floats(const ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    if (nd->op == SO_OP_DROPOUT)
        return (size_t)s->batch * ref_numel(nd->out);
    if (nd->op == SO_OP_BATCHNORM)
        return 2 * (size_t)nd->out.c + 1; /* mean, invstd, element count */
    if (nd->op == SO_OP_LAYERNORM)
        return 2 * (size_t)s->batch * (size_t)nd->out.c * (size_t)nd->out.h;
    if (nd->op == SO_OP_ATTENTION)
        return 2 * (size_t)s->batch * (size_t)nd->a.heads * (size_t)nd->out.h;
    return 0;
}

/* Allocates every buffer of node i once; nothing is allocated per step. */
static int alloc_node(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    size_t bytes = (size_t)s->batch * ref_numel(nd->out) * sizeof(float);
    s->act[i] = so_alloc(bytes);
    if (!s->act[i])
        return -1;
    if (i > 0 && !(s->diff[i] = so_alloc(bytes)))
        return -1;
    size_t na = aux_floats(s, i);
    if (na && !(s->aux[i] = so_alloc(na * sizeof(float))))
        return -1;
    if (nd->op == SO_OP_MAXPOOL && !(s->argmax[i] = so_alloc(bytes)))
        return -1; /* int32 per output: same size as the floats */
    return 0;
}

static int ref_create(so_model *m, void **state)
{
    *state = NULL;
    ref_state *s = calloc(1, sizeof *s);
    if (!s)
        return so_err(SO_ENOMEM, "ref backend: out of memory");
    s->m = m;
    s->g = m->g;
    s->batch = m->batch;
    s->n = m->batch;
    size_t nn = (size_t)so_graph_size(m->g);
    s->act = calloc(nn, sizeof *s->act);
    s->diff = calloc(nn, sizeof *s->diff);
    s->aux = calloc(nn, sizeof *s->aux);
    s->argmax = calloc(nn, sizeof *s->argmax);
    s->edge_data = calloc(nn, sizeof *s->edge_data);
    s->edge_grad = calloc(nn, sizeof *s->edge_grad);
    s->kv = calloc(nn, sizeof *s->kv);
    s->labels = so_alloc((size_t)m->batch * (size_t)so_graph_targets(m->g) * sizeof *s->labels);
    int bad = !s->act || !s->diff || !s->aux || !s->argmax || !s->labels || !s->edge_data || !s->edge_grad || !s->kv;
    size_t largest = 0;
    for (size_t i = 0; !bad && i < nn; i++) {
        bad = alloc_node(s, (int)i) != 0;
        size_t b = (size_t)s->batch * ref_numel(ref_node(s, (int)i)->out) * sizeof(float);
        largest = b > largest ? b : largest;
    }
    for (int j = 0; !bad && j < SO_MAX_INPUTS; j++)
        bad = !(s->acc_scratch[j] = so_alloc(largest));
    if (bad) {
        ref_destroy(s);
        return so_err(SO_ENOMEM, "ref backend: out of memory for activations of batch %d", m->batch);
    }
    *state = s;
    return 0;
}

static int ref_set_input(void *state, const float *x, const int32_t *y, int n)
{
    ref_state *s = state;
    if (n < 1 || n > s->batch)
        return so_err(SO_EINVAL, "ref backend: %d samples for a batch of %d", n, s->batch);
    size_t per = ref_numel(so_graph_input_shape(s->g)), nt = (size_t)so_graph_targets(s->g); /* checked by so_model */
    if (x) /* NULL: a later pipeline stage, whose inputs come through recv nodes */
        memcpy(s->act[0], x, (size_t)n * per * sizeof(float));
    memset(s->act[0] + (size_t)(x ? n : 0) * per, 0, (size_t)(s->batch - (x ? n : 0)) * per * sizeof(float));
    memset(s->labels, 0, (size_t)s->batch * nt * sizeof *s->labels);
    if (y)
        memcpy(s->labels, y, (size_t)n * nt * sizeof *y);
    s->n = n;
    return 0;
}

static int check_node(const ref_state *s, int node)
{
    if (node < 1 || node >= so_graph_size(s->g))
        return so_err(SO_EINVAL, "ref backend: no node %d", node);
    return 0;
}

static int ref_forward(void *state, int node, int training)
{
    ref_state *s = state;
    int rc = check_node(s, node);
    if (rc)
        return rc;
    s->training = training;
    return kernels[ref_node(s, node)->op].fwd(s, node, training);
}

/* Whether node's input `slot` gets a diff added to what another consumer
 * wrote, and no other slot of node reads the same tensor. */
static int adds_alone(const ref_state *s, int node, int slot)
{
    const so_node *nd = ref_node(s, node);
    if (!so_graph_needs_diff(s->g, node, slot) || !so_graph_diff_accumulate(s->g, node, slot))
        return 0;
    for (int j = 0; j < nd->ninputs; j++)
        if (j != slot && nd->inputs[j] == nd->inputs[slot])
            return 0;
    return 1;
}

/* A consumer that adds to a diff another consumer wrote computes its whole
 * term apart and adds it once: the diff is then the same sum of
 * per-consumer terms however the consumers are grouped (one graph, or
 * pipeline stages whose diffs come back through send nodes), where a
 * kernel adding term after term into the diff would round differently. */
static int ref_backward(void *state, int node)
{
    ref_state *s = state;
    int rc = check_node(s, node);
    if (rc)
        return rc;
    const so_node *nd = ref_node(s, node);
    float *kept[SO_MAX_INPUTS] = {0};
    size_t n[SO_MAX_INPUTS] = {0};
    for (int j = 0; j < nd->ninputs; j++)
        if (adds_alone(s, node, j)) {
            n[j] = (size_t)s->batch * ref_numel(ref_in_shape(s, node, j));
            kept[j] = s->diff[nd->inputs[j]];
            s->diff[nd->inputs[j]] = memset(s->acc_scratch[j], 0, n[j] * sizeof(float));
        }
    rc = kernels[nd->op].bwd(s, node);
    for (int j = 0; j < nd->ninputs; j++)
        if (kept[j]) {
            for (size_t k = 0; k < n[j]; k++)
                kept[j][k] += s->acc_scratch[j][k];
            s->diff[nd->inputs[j]] = kept[j];
        }
    return rc;
}

static int ref_read_output(void *state, int node, float *dst)
{
    ref_state *s = state;
    int rc = check_node(s, node);
    if (rc)
        return rc;
    memcpy(dst, s->act[node], (size_t)s->batch * ref_numel(ref_node(s, node)->out) * sizeof *dst);
    return 0;
}

static int ref_bind_edge(void *state, int node, float *data, float *grad)
{
    ref_state *s = state;
    int rc = check_node(s, node);
    if (rc)
        return rc;
    if (data)
        s->edge_data[node] = data;
    if (grad)
        s->edge_grad[node] = grad;
    return 0;
}

/* Activations, diffs and the per-node scratch (dropout scales, batchnorm
 * statistics, maxpool argmax). */
static size_t ref_state_bytes(void *state)
{
    ref_state *s = state;
    size_t total = 0;
    for (int i = 0; i < so_graph_size(s->g); i++) {
        const so_node *nd = ref_node(s, i);
        size_t act = (size_t)s->batch * ref_numel(nd->out) * sizeof(float);
        total += act * (i > 0 ? 2 : 1) + aux_floats(s, i) * sizeof(float) + (nd->op == SO_OP_MAXPOOL ? act : 0);
    }
    return total;
}

static int ref_chunk(void *state, int node, int k, int r0, int r1, int backward)
{
    return ref_dense_chunk(state, node, k, r0, r1, backward);
}

const so_backend_ops so_backend_ref = {
    .name = "ref",
    .create = ref_create,
    .destroy = ref_destroy,
    .set_input = ref_set_input,
    .forward = ref_forward,
    .backward = ref_backward,
    .read_output = ref_read_output,
    .params_changed = NULL, /* ref reads the flat buffers directly every time */
    .bind_edge = ref_bind_edge,
    .state_bytes = ref_state_bytes,
    .dense_chunk = ref_chunk,
};
