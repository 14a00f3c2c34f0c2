/* Graph construction: nodes, shape inference and validation, ReLU fusion,
 * parameter/state offsets, FLOP counts and the tensor table used by init,
 * checkpoints and export. Kernels live in the backends. */
#include "scaleout/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"

struct so_graph {
    so_node *nodes;
    int n, cap;
    int err;        /* sticky first error */
    char errmsg[256];
    int finalized;
    size_t nparams, nbufs;
    so_torch_init torch_init; /* what --init torch means here */
};

static const char *op_names[SO_OP_COUNT] = {
    "input", "dense", "conv", "maxpool", "avgpool", "gap", "relu", "tanh", "sigmoid",
    "batchnorm", "dropout", "flatten", "add", "concat", "softmax_xent", "recv", "send",
    "embed", "layernorm", "linear", "attention", "gelu", "token_xent"};

const char *so_op_name(so_op op) { return (op >= 0 && op < SO_OP_COUNT) ? op_names[op] : "?"; }

void so_graph_set_torch_init(so_graph *g, so_torch_init how) { g->torch_init = how; }
so_torch_init so_graph_torch_init(const so_graph *g) { return g->torch_init; }

so_graph *so_graph_create(int c, int h, int w)
{
    so_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->cap = 64;
    g->nodes = calloc((size_t)g->cap, sizeof *g->nodes);
    if (!g->nodes) {
        free(g);
        return NULL;
    }
    g->n = 1;
    g->nodes[0].op = SO_OP_INPUT;
    snprintf(g->nodes[0].name, SO_NAME_LEN, "input");
    g->nodes[0].out = (so_shape){c, h, w};
    if (c < 1 || h < 1 || w < 1) {
        g->err = SO_EINVAL;
        snprintf(g->errmsg, sizeof g->errmsg, "input shape %dx%dx%d is not positive", c, h, w);
    }
    return g;
}

void so_graph_destroy(so_graph *g)
{
    if (!g)
        return;
    free(g->nodes);
    free(g);
}

static int fail(so_graph *g, int code, const char *fmt, const char *name, int a, int b)
{
    if (!g->err) {
        g->err = code;
        char what[160];
        snprintf(what, sizeof what, fmt, a, b);
        snprintf(g->errmsg, sizeof g->errmsg, "graph node %d (%s): %s", g->n, name ? name : "?", what);
    }
    return so_err(g->err, "%s", g->errmsg);
}

/* Output size of a sliding window, or 0 if the window does not fit. */
static int window_out(int in, int k, int s, int p)
{
    if (k < 1 || s < 1 || p < 0 || in + 2 * p < k)
        return 0;
    return (in + 2 * p - k) / s + 1;
}

/* Shape inference of the sequence ops (so_op: a sequence is (1, T, C)). */
static const char *infer_seq(so_graph *g, so_node *nd, int *x, int *y)
{
    so_shape in = g->nodes[nd->inputs[0]].out;
    so_attrs *a = &nd->a;
    switch (nd->op) {
    case SO_OP_EMBED:
        if (in.c != 1 || in.w != 1)
            return *x = in.c, *y = in.w, "embed needs tokens of shape (1,T,1), got %d channels of width %d";
        if (a->out < 1 || a->vocab < 1 || a->ctx < 1)
            return *x = a->out, *y = a->vocab, "embed width %d and vocabulary %d must be >= 1";
        if (in.h > a->ctx)
            return *x = in.h, *y = a->ctx, "sequence length T = %d is above the context %d";
        nd->out = (so_shape){1, in.h, a->out};
        return NULL;
    case SO_OP_LAYERNORM:
        if (!(a->eps > 0.0f))
            return *x = in.w, "layernorm over %d features needs eps > 0";
        nd->out = in;
        return NULL;
    case SO_OP_LINEAR:
        if (a->out < 1)
            return *x = a->out, "linear output size %d must be >= 1";
        if (a->tie) {
            const so_node *t = a->tie > 0 && a->tie < g->n ? &g->nodes[a->tie] : NULL;
            if (!t || t->op != SO_OP_EMBED)
                return *x = a->tie, "tied weight: node %d is not an embed node";
            if (t->a.vocab != a->out || t->a.out != in.w || a->bias)
                return *x = t->a.vocab, *y = t->a.out,
                       "a tied linear must map the embedding's width to its %d rows without bias (width %d)";
        }
        nd->out = (so_shape){in.c, in.h, a->out};
        return NULL;
    case SO_OP_ATTENTION:
        if (in.c != 1 || a->heads < 1 || in.w % 3 || (in.w / 3) % a->heads)
            return *x = in.w, *y = a->heads, "attention needs (1,T,3C) with C divisible by the heads: width %d, %d heads";
        nd->out = (so_shape){1, in.h, in.w / 3};
        return NULL;
    default: /* SO_OP_TOKEN_XENT */
        if (in.c != 1 || a->vocab < 2 || a->vocab > in.w)
            return *x = a->vocab, *y = in.w, "token loss needs logits (1,T,Vp) with 2 <= vocab %d <= Vp %d";
        nd->out = (so_shape){1, 1, 1};
        return NULL;
    }
}

/* Shape inference; returns 0 or a message format (with up to two ints). */
static const char *infer(so_graph *g, so_node *nd, int *x, int *y)
{
    so_shape in = g->nodes[nd->inputs[0]].out;
    so_attrs *a = &nd->a;
    switch (nd->op) {
    case SO_OP_DENSE:
        if (a->out < 1)
            return *x = a->out, "dense output size %d must be >= 1";
        nd->out = (so_shape){a->out, 1, 1};
        return NULL;
    case SO_OP_CONV: {
        if (a->out < 1 || a->groups < 1 || in.c % a->groups || a->out % a->groups)
            return *x = a->out, *y = a->groups, "conv channels %d / groups %d do not divide";
        int oh = window_out(in.h, a->kh, a->sh, a->ph), ow = window_out(in.w, a->kw, a->sw, a->pw);
        if (!oh || !ow)
            return *x = in.h, *y = a->kh, "conv window does not fit input %d (kernel %d)";
        nd->out = (so_shape){a->out, oh, ow};
        return NULL;
    }
    case SO_OP_MAXPOOL:
    case SO_OP_AVGPOOL: {
        int oh = window_out(in.h, a->kh, a->sh, a->ph), ow = window_out(in.w, a->kw, a->sw, a->pw);
        if (!oh || !ow || a->ph * 2 > a->kh || a->pw * 2 > a->kw)
            return *x = in.h, *y = a->kh, "pool window does not fit input %d (kernel %d)";
        nd->out = (so_shape){in.c, oh, ow};
        return NULL;
    }
    case SO_OP_GAP:
        nd->out = (so_shape){in.c, 1, 1};
        return NULL;
    case SO_OP_FLATTEN:
        nd->out = (so_shape){in.c * in.h * in.w, 1, 1};
        return NULL;
    case SO_OP_DROPOUT:
        if (!(a->p >= 0.0f && a->p < 1.0f))
            return *x = (int)(a->p * 100), "dropout p = %d%% is not in [0,1)";
        nd->out = in;
        return NULL;
    case SO_OP_ADD:
        for (int i = 1; i < nd->ninputs; i++) {
            so_shape s = g->nodes[nd->inputs[i]].out;
            if (s.c != in.c || s.h != in.h || s.w != in.w)
                return *x = in.c, *y = s.c, "add inputs differ in shape (%d vs %d channels)";
        }
        nd->out = in;
        return NULL;
    case SO_OP_CONCAT: {
        int c = 0;
        for (int i = 0; i < nd->ninputs; i++) {
            so_shape s = g->nodes[nd->inputs[i]].out;
            if (s.h != in.h || s.w != in.w)
                return *x = in.h, *y = s.h, "concat inputs differ in spatial size (%d vs %d)";
            c += s.c;
        }
        nd->out = (so_shape){c, in.h, in.w};
        return NULL;
    }
    case SO_OP_SOFTMAX_XENT:
        if (in.h != 1 || in.w != 1 || in.c < 2)
            return *x = in.c, "loss needs logits of shape (K,1,1) with K >= 2, got %d channels";
        nd->out = (so_shape){1, 1, 1};
        return NULL;
    case SO_OP_EMBED:
    case SO_OP_LAYERNORM:
    case SO_OP_LINEAR:
    case SO_OP_ATTENTION:
    case SO_OP_TOKEN_XENT:
        return infer_seq(g, nd, x, y);
    case SO_OP_RECV:
        if (a->shape.c < 1 || a->shape.h < 1 || a->shape.w < 1)
            return *x = a->shape.c, *y = a->shape.h, "received shape (%d channels, height %d) is not positive";
        nd->out = a->shape;
        return NULL;
    default: /* send, relu, tanh, sigmoid, gelu, batchnorm keep the shape */
        nd->out = in;
        return NULL;
    }
}

int so_graph_add(so_graph *g, so_op op, const char *name, const int *inputs, int ninputs,
                 const so_attrs *a)
{
    if (g->err)
        return so_err(g->err, "%s", g->errmsg);
    if (g->finalized)
        return fail(g, SO_EINVAL, "graph is finalized%.0d%.0d", name, 0, 0);
    if (op <= SO_OP_INPUT || op >= SO_OP_COUNT)
        return fail(g, SO_EINVAL, "unknown op %d%.0d", name, (int)op, 0);
    int nin_ok = (op == SO_OP_ADD || op == SO_OP_CONCAT) ? (ninputs >= 2 && ninputs <= SO_MAX_INPUTS)
                 : op == SO_OP_RECV                       ? ninputs == 0
                                                          : ninputs == 1;
    if (!nin_ok)
        return fail(g, SO_EINVAL, "wrong number of inputs: %d%.0d", name, ninputs, 0);
    for (int i = 0; i < ninputs; i++)
        if (inputs[i] < 0 || inputs[i] >= g->n)
            return fail(g, SO_EINVAL, "input %d refers to missing node %d", name, i, inputs[i]);
    if (g->n == g->cap) {
        so_node *grown = realloc(g->nodes, (size_t)g->cap * 2 * sizeof *grown);
        if (!grown)
            return fail(g, SO_ENOMEM, "out of memory%.0d%.0d", name, 0, 0);
        g->nodes = grown;
        g->cap *= 2;
    }
    so_node *nd = &g->nodes[g->n];
    memset(nd, 0, sizeof *nd);
    nd->op = op;
    snprintf(nd->name, SO_NAME_LEN, "%s", name ? name : "");
    if (!name)
        snprintf(nd->name, SO_NAME_LEN, "%s%d", op_names[op], g->n);
    if (ninputs)
        memcpy(nd->inputs, inputs, (size_t)ninputs * sizeof *inputs);
    nd->ninputs = ninputs;
    if (a)
        nd->a = *a;
    int x = 0, y = 0;
    const char *msg = infer(g, nd, &x, &y);
    if (msg)
        return fail(g, SO_EINVAL, msg, nd->name, x, y);
    return g->n++;
}

/* ---- builder shorthands ---- */

int so_g_conv_grouped(so_graph *g, int in, const char *name, int out, int k, int stride, int pad,
                      int groups, int bias)
{
    so_attrs a = {.out = out, .kh = k, .kw = k, .sh = stride, .sw = stride, .ph = pad, .pw = pad,
                  .groups = groups, .bias = bias};
    return so_graph_add(g, SO_OP_CONV, name, &in, 1, &a);
}

int so_g_conv(so_graph *g, int in, const char *name, int out, int k, int stride, int pad, int bias)
{
    return so_g_conv_grouped(g, in, name, out, k, stride, pad, 1, bias);
}

int so_g_dense(so_graph *g, int in, const char *name, int out)
{
    so_attrs a = {.out = out, .bias = 1};
    return so_graph_add(g, SO_OP_DENSE, name, &in, 1, &a);
}

int so_g_bn(so_graph *g, int in, const char *name)
{
    so_attrs a = {.eps = 1e-5f, .momentum = 0.1f};
    return so_graph_add(g, SO_OP_BATCHNORM, name, &in, 1, &a);
}

static int unary(so_graph *g, so_op op, int in) { return so_graph_add(g, op, NULL, &in, 1, NULL); }
int so_g_relu(so_graph *g, int in) { return unary(g, SO_OP_RELU, in); }
int so_g_tanh(so_graph *g, int in) { return unary(g, SO_OP_TANH, in); }
int so_g_sigmoid(so_graph *g, int in) { return unary(g, SO_OP_SIGMOID, in); }
int so_g_gap(so_graph *g, int in) { return unary(g, SO_OP_GAP, in); }
int so_g_flatten(so_graph *g, int in) { return unary(g, SO_OP_FLATTEN, in); }
int so_g_loss(so_graph *g, int logits) { return unary(g, SO_OP_SOFTMAX_XENT, logits); }
int so_g_send(so_graph *g, int in, const char *name) { return so_graph_add(g, SO_OP_SEND, name, &in, 1, NULL); }

int so_g_recv(so_graph *g, const char *name, so_shape shape)
{
    so_attrs a = {.shape = shape};
    return so_graph_add(g, SO_OP_RECV, name, NULL, 0, &a);
}

static int pool(so_graph *g, so_op op, int in, int k, int stride, int pad)
{
    so_attrs a = {.kh = k, .kw = k, .sh = stride, .sw = stride, .ph = pad, .pw = pad};
    return so_graph_add(g, op, NULL, &in, 1, &a);
}
int so_g_maxpool(so_graph *g, int in, int k, int s, int p) { return pool(g, SO_OP_MAXPOOL, in, k, s, p); }
int so_g_avgpool(so_graph *g, int in, int k, int s, int p) { return pool(g, SO_OP_AVGPOOL, in, k, s, p); }

int so_g_dropout(so_graph *g, int in, float p)
{
    so_attrs a = {.p = p};
    return so_graph_add(g, SO_OP_DROPOUT, NULL, &in, 1, &a);
}

int so_g_add(so_graph *g, int x, int y)
{
    int in[2] = {x, y};
    return so_graph_add(g, SO_OP_ADD, NULL, in, 2, NULL);
}

int so_g_concat(so_graph *g, const int *in, int n) { return so_graph_add(g, SO_OP_CONCAT, NULL, in, n, NULL); }

int so_g_embed(so_graph *g, int tokens, const char *name, int c, int vocab, int ctx, float init_std)
{
    so_attrs a = {.out = c, .vocab = vocab, .ctx = ctx, .init_std = init_std};
    return so_graph_add(g, SO_OP_EMBED, name, &tokens, 1, &a);
}

int so_g_layernorm(so_graph *g, int in, const char *name)
{
    so_attrs a = {.eps = 1e-5f};
    return so_graph_add(g, SO_OP_LAYERNORM, name, &in, 1, &a);
}

int so_g_linear(so_graph *g, int in, const char *name, int out, int bias, int tie, float init_std)
{
    so_attrs a = {.out = out, .bias = bias, .tie = tie, .init_std = init_std};
    return so_graph_add(g, SO_OP_LINEAR, name, &in, 1, &a);
}

int so_g_attention(so_graph *g, int qkv, const char *name, int heads)
{
    so_attrs a = {.heads = heads};
    return so_graph_add(g, SO_OP_ATTENTION, name, &qkv, 1, &a);
}

int so_g_gelu(so_graph *g, int in, const char *name) { return so_graph_add(g, SO_OP_GELU, name, &in, 1, NULL); }

int so_g_token_loss(so_graph *g, int logits, int vocab)
{
    so_attrs a = {.vocab = vocab};
    return so_graph_add(g, SO_OP_TOKEN_XENT, NULL, &logits, 1, &a);
}

/* ---- fusion and finalisation ---- */

static int consumers(const so_graph *g, int node)
{
    int count = 0;
    for (int i = node + 1; i < g->n; i++)
        for (int s = 0; s < g->nodes[i].ninputs; s++)
            count += g->nodes[i].inputs[s] == node;
    return count;
}

static int fusable(so_op op)
{
    return op == SO_OP_CONV || op == SO_OP_DENSE || op == SO_OP_BATCHNORM || op == SO_OP_ADD;
}

/* Removes node r, re-pointing its consumers to `to` and renumbering. */
static void remove_node(so_graph *g, int r, int to)
{
    for (int i = r + 1; i < g->n; i++)
        for (int s = 0; s < g->nodes[i].ninputs; s++) {
            int *in = &g->nodes[i].inputs[s];
            if (*in == r)
                *in = to;
            else if (*in > r)
                (*in)--;
        }
    memmove(&g->nodes[r], &g->nodes[r + 1], (size_t)(g->n - r - 1) * sizeof *g->nodes);
    g->n--;
}

int so_graph_fuse(so_graph *g)
{
    if (g->err)
        return so_err(g->err, "%s", g->errmsg);
    for (int i = 1; i < g->n; i++) {
        so_node *nd = &g->nodes[i];
        if (nd->op != SO_OP_RELU)
            continue;
        int p = nd->inputs[0];
        if (!fusable(g->nodes[p].op) || g->nodes[p].a.relu || consumers(g, p) != 1)
            continue;
        g->nodes[p].a.relu = 1;
        remove_node(g, i, p);
        i--;
    }
    return 0;
}

int so_graph_finalize(so_graph *g)
{
    if (g->err)
        return so_err(g->err, "%s", g->errmsg);
    so_op last = g->nodes[g->n - 1].op;
    if (g->n < 2 || (last != SO_OP_SOFTMAX_XENT && last != SO_OP_TOKEN_XENT && last != SO_OP_SEND))
        return so_err(SO_EINVAL, "graph must end in a softmax cross-entropy loss node");
    size_t poff = 0, boff = 0;
    for (int i = 0; i < g->n; i++) {
        so_node *nd = &g->nodes[i];
        so_shape in = g->nodes[nd->inputs[0]].out;
        nd->param_off = poff;
        nd->buf_off = boff;
        if (nd->op == SO_OP_CONV)
            nd->nparam = (size_t)nd->a.out * (size_t)(in.c / nd->a.groups) * (size_t)(nd->a.kh * nd->a.kw) +
                         (nd->a.bias ? (size_t)nd->a.out : 0);
        else if (nd->op == SO_OP_DENSE)
            nd->nparam = (size_t)nd->a.out * (size_t)in.c * (size_t)in.h * (size_t)in.w + (size_t)nd->a.out;
        else if (nd->op == SO_OP_BATCHNORM) {
            nd->nparam = 2 * (size_t)in.c;
            nd->nbuf = 2 * (size_t)in.c;
        } else if (nd->op == SO_OP_EMBED)
            nd->nparam = ((size_t)nd->a.vocab + (size_t)nd->a.ctx) * (size_t)nd->a.out;
        else if (nd->op == SO_OP_LAYERNORM)
            nd->nparam = 2 * (size_t)in.w;
        else if (nd->op == SO_OP_LINEAR)
            nd->nparam = (nd->a.tie ? 0 : (size_t)nd->a.out * (size_t)in.w) + (nd->a.bias ? (size_t)nd->a.out : 0);
        poff += nd->nparam;
        boff += nd->nbuf;
    }
    g->nparams = poff;
    g->nbufs = boff;
    g->finalized = 1;
    return 0;
}

/* ---- queries ---- */

int so_graph_size(const so_graph *g) { return g->n; }
const so_node *so_graph_node(const so_graph *g, int i) { return &g->nodes[i]; }
size_t so_graph_nparams(const so_graph *g) { return g->nparams; }

int so_graph_dense_chunks(const so_graph *g, int node, size_t chunk_bytes)
{
    const so_node *nd = node >= 1 && node < g->n ? &g->nodes[node] : NULL;
    if (!nd || nd->op != SO_OP_DENSE || !chunk_bytes || nd->nparam <= (size_t)nd->a.out)
        return 1;
    size_t wbytes = (nd->nparam - (size_t)nd->a.out) * sizeof(float);
    size_t k = (wbytes + chunk_bytes - 1) / chunk_bytes;
    return k > (size_t)nd->a.out ? nd->a.out : (int)k;
}

void so_graph_chunk_rows(const so_graph *g, int node, int K, int k, int *r0, int *r1, size_t *lo, size_t *hi)
{
    const so_node *nd = &g->nodes[node];
    int out = nd->a.out, base = out / K, extra = out % K;
    size_t in = (nd->nparam - (size_t)out) / (size_t)out;
    *r0 = k * base + (k < extra ? k : extra);
    *r1 = *r0 + base + (k < extra ? 1 : 0);
    *lo = nd->param_off + (size_t)*r0 * in;
    *hi = k == K - 1 ? nd->param_off + nd->nparam : nd->param_off + (size_t)*r1 * in;
}
size_t so_graph_nbufs(const so_graph *g) { return g->nbufs; }
so_shape so_graph_input_shape(const so_graph *g) { return g->nodes[0].out; }

int so_graph_logits(const so_graph *g)
{
    so_op last = g->nodes[g->n - 1].op;
    if (g->n < 2 || (last != SO_OP_SOFTMAX_XENT && last != SO_OP_TOKEN_XENT))
        return -1;
    return g->nodes[g->n - 1].inputs[0];
}

int so_graph_classes(const so_graph *g)
{
    int l = so_graph_logits(g);
    if (l < 0)
        return 0;
    return g->nodes[g->n - 1].op == SO_OP_TOKEN_XENT ? g->nodes[g->n - 1].a.vocab : g->nodes[l].out.c;
}

int so_graph_targets(const so_graph *g)
{
    int l = so_graph_logits(g);
    return l >= 0 && g->nodes[g->n - 1].op == SO_OP_TOKEN_XENT ? g->nodes[l].out.h : 1;
}

int so_graph_tied_by(const so_graph *g, int i)
{
    for (int j = i + 1; j < g->n; j++)
        if (g->nodes[j].op == SO_OP_LINEAR && g->nodes[j].a.tie == i)
            return j;
    return 0;
}

int so_graph_takes_tokens(const so_graph *g)
{
    for (int j = 1; j < g->n; j++)
        if (g->nodes[j].op == SO_OP_EMBED && g->nodes[j].inputs[0] == 0)
            return 1;
    return 0;
}

double so_node_flops(const so_graph *g, int i)
{
    const so_node *nd = &g->nodes[i];
    so_shape in = g->nodes[nd->inputs[0]].out, o = nd->out;
    double out_elems = (double)o.c * o.h * o.w;
    switch (nd->op) {
    case SO_OP_CONV:
        return 2.0 * out_elems * (in.c / nd->a.groups) * nd->a.kh * nd->a.kw;
    case SO_OP_DENSE:
        return 2.0 * (double)o.c * in.c * in.h * in.w;
    case SO_OP_LINEAR:
        return 2.0 * out_elems * in.w;
    case SO_OP_ATTENTION: /* Q K^T and P V over the causal half: T (T + 1) / 2 pairs, C = o.w */
        return 2.0 * 2.0 * (double)o.w * o.h * (o.h + 1) / 2.0;
    default:
        return 0.0; /* memory-bound ops: not counted, as in the usual MFU convention */
    }
}

double so_graph_flops(const so_graph *g)
{
    double f = 0;
    for (int i = 1; i < g->n; i++)
        f += so_node_flops(g, i);
    return f;
}

/* Tensors of the sequence ops, under nanoGPT's / Hugging Face's names
 * relative to the node (the embed node is "transformer": transformer.wte.weight). */
static int seq_tensors(const so_node *nd, so_shape in, so_tensor_desc out[4])
{
    const so_attrs *a = &nd->a;
    size_t off = nd->param_off, c = (size_t)a->out;
    int n = 0;
    switch (nd->op) {
    case SO_OP_EMBED:
        out[n++] = (so_tensor_desc){"wte.weight", 0, off, (size_t)a->vocab * c, 2, {a->vocab, a->out},
                                    a->out, a->vocab, a->init_std};
        out[n++] = (so_tensor_desc){"wpe.weight", 0, off + (size_t)a->vocab * c, (size_t)a->ctx * c, 2,
                                    {a->ctx, a->out}, a->out, a->ctx, a->init_std};
        return n;
    case SO_OP_LAYERNORM:
        out[n++] = (so_tensor_desc){"weight", 0, off, (size_t)in.w, 1, {in.w}, 0, 0, 0};
        out[n++] = (so_tensor_desc){"bias", 0, off + (size_t)in.w, (size_t)in.w, 1, {in.w}, 0, 0, 0};
        return n;
    case SO_OP_LINEAR:
        if (!a->tie) {
            out[n++] = (so_tensor_desc){"weight", 0, off, c * (size_t)in.w, 2, {a->out, in.w}, in.w, a->out,
                                        a->init_std};
            off += c * (size_t)in.w;
        }
        if (a->bias)
            out[n++] = (so_tensor_desc){"bias", 0, off, c, 1, {a->out}, 0, 0, 0};
        return n;
    default:
        return 0;
    }
}

int so_node_tensors(const so_graph *g, int i, so_tensor_desc out[4])
{
    const so_node *nd = &g->nodes[i];
    so_shape in = g->nodes[nd->inputs[0]].out;
    int n = 0;
    if (nd->op == SO_OP_CONV) {
        int cin = in.c / nd->a.groups;
        size_t wcount = (size_t)nd->a.out * cin * nd->a.kh * nd->a.kw;
        out[n++] = (so_tensor_desc){"weight", 0, nd->param_off, wcount, 4,
                                    {nd->a.out, cin, nd->a.kh, nd->a.kw},
                                    cin * nd->a.kh * nd->a.kw, nd->a.out / nd->a.groups * nd->a.kh * nd->a.kw, 0};
        if (nd->a.bias)
            out[n++] = (so_tensor_desc){"bias", 0, nd->param_off + wcount, (size_t)nd->a.out, 1, {nd->a.out}, 0, 0, 0};
    } else if (nd->op == SO_OP_DENSE) {
        int fin = in.c * in.h * in.w;
        size_t wcount = (size_t)nd->a.out * fin;
        out[n++] = (so_tensor_desc){"weight", 0, nd->param_off, wcount, 2, {nd->a.out, fin}, fin, nd->a.out, 0};
        out[n++] = (so_tensor_desc){"bias", 0, nd->param_off + wcount, (size_t)nd->a.out, 1, {nd->a.out}, 0, 0, 0};
    } else if (nd->op >= SO_OP_EMBED) {
        return seq_tensors(nd, in, out);
    } else if (nd->op == SO_OP_BATCHNORM) {
        size_t c = (size_t)in.c;
        out[n++] = (so_tensor_desc){"weight", 0, nd->param_off, c, 1, {in.c}, 0, 0, 0};
        out[n++] = (so_tensor_desc){"bias", 0, nd->param_off + c, c, 1, {in.c}, 0, 0, 0};
        out[n++] = (so_tensor_desc){"running_mean", 1, nd->buf_off, c, 1, {in.c}, 0, 0, 0};
        out[n++] = (so_tensor_desc){"running_var", 1, nd->buf_off + c, c, 1, {in.c}, 0, 0, 0};
    }
    return n;
}

int so_graph_needs_diff(const so_graph *g, int i, int slot)
{
    return g->nodes[g->nodes[i].inputs[slot]].op != SO_OP_INPUT;
}

int so_graph_diff_accumulate(const so_graph *g, int i, int slot)
{
    int t = g->nodes[i].inputs[slot];
    for (int s = slot + 1; s < g->nodes[i].ninputs; s++)
        if (g->nodes[i].inputs[s] == t)
            return 1;
    for (int j = i + 1; j < g->n; j++)
        for (int s = 0; s < g->nodes[j].ninputs; s++)
            if (g->nodes[j].inputs[s] == t)
                return 1;
    return 0;
}

int so_graph_context(const so_graph *g)
{
    for (int j = 1; j < g->n; j++)
        if (g->nodes[j].op == SO_OP_EMBED)
            return g->nodes[j].a.ctx;
    return 0;
}

int so_graph_decay_ranges(const so_graph *g, size_t **lohi, int *n)
{
    size_t *r = malloc(2 * (size_t)4 * (size_t)g->n * sizeof *r + sizeof *r);
    if (!r)
        return so_err(SO_ENOMEM, "out of memory for the weight decay ranges");
    int k = 0;
    for (int i = 1; i < g->n; i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(g, i, t);
        for (int e = 0; e < nt; e++) {
            if (t[e].is_buffer || t[e].ndim < 2)
                continue;
            if (k && r[2 * k - 1] == t[e].off)
                r[2 * k - 1] += t[e].count; /* continues the previous range */
            else {
                r[2 * k] = t[e].off;
                r[2 * k + 1] = t[e].off + t[e].count;
                k++;
            }
        }
    }
    *lohi = r;
    *n = k;
    return 0;
}
