/* The oneDNN backend: builds every primitive and buffer once for m->batch,
 * keeps activations in the blocked layouts oneDNN picks (nChw16c...) from
 * layer to layer, and converts to plain NCHW only at the edges (set_input,
 * flatten, read_output). Op files hold the per-op primitives. */
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

static const od_op *op_table(so_op op)
{
    switch (op) {
    case SO_OP_CONV: return &od_op_conv;
    case SO_OP_DENSE: return &od_op_dense;
    case SO_OP_MAXPOOL: return &od_op_maxpool;
    case SO_OP_AVGPOOL: return &od_op_avgpool;
    case SO_OP_GAP: return &od_op_gap;
    case SO_OP_RELU:
    case SO_OP_TANH:
    case SO_OP_SIGMOID: return &od_op_eltwise;
    case SO_OP_BATCHNORM: return &od_op_bn;
    case SO_OP_DROPOUT: return &od_op_dropout;
    case SO_OP_FLATTEN: return &od_op_flatten;
    case SO_OP_ADD: return &od_op_add;
    case SO_OP_CONCAT: return &od_op_concat;
    case SO_OP_SOFTMAX_XENT: return &od_op_loss;
    case SO_OP_RECV: return &od_op_recv;
    case SO_OP_SEND: return &od_op_send;
    case SO_OP_EMBED: return &od_op_embed;
    case SO_OP_LAYERNORM: return &od_op_layernorm;
    case SO_OP_LINEAR: return &od_op_linear;
    case SO_OP_ATTENTION: return &od_op_attention;
    case SO_OP_GELU: return &od_op_gelu;
    case SO_OP_TOKEN_XENT: return &od_op_token_xent;
    default: return NULL;
    }
}

static void destroy(void *state)
{
    od_state *s = state;
    if (!s)
        return;
    for (int i = 0; s->t && i < s->n; i++) {
        od_tensor *t = &s->t[i];
        if (t->op && t->priv)
            t->op->destroy(t->priv);
        od_prim_fini(&t->rd);
        od_mem_free(&t->rd_user, NULL);
        od_mem_free(&t->acc, NULL);
        od_mem_free(&t->mem, &t->buf);
        od_mem_free(&t->dmem, NULL); /* dbuf belongs to the diff pool */
    }
    for (int b = 0; b < s->ndblocks; b++)
        so_free(s->dblocks[b].buf);
    free(s->dblocks);
    so_free(s->wstage);
    so_free(s->wtmp);
    od_bf16_free(s);
    od_wino_free(s);
    free(s->t);
    od_mem_free(&s->pad_mem, NULL);
    so_free(s->pad);
    so_free(s->scratch);
    so_free(s->labels);
    if (s->strm)
        dnnl_stream_destroy(s->strm);
    if (s->eng)
        dnnl_engine_destroy(s->eng);
    free(s);
}

/* The per-node read-back reorder and the accumulate staging view. */
static int tensor_finish(od_state *s, int i)
{
    od_tensor *t = &s->t[i];
    dnnl_memory_desc_t plain;
    od_md_plain(s, i, &plain);
    int rc = od_reorder_init(s, i, "output reorder", &t->md, &plain, 0, &t->rd);
    if (!rc)
        rc = od_mem_wrap(s, i, &plain, DNNL_MEMORY_NONE, &t->rd_user);
    if (!rc)
        rc = od_mem_wrap(s, i, &t->md, s->scratch, &t->acc);
    return rc;
}

static int build(od_state *s)
{
    dnnl_memory_desc_t md;
    od_md_plain(s, 0, &md);
    int rc = od_tensor_alloc(s, 0, &md); /* the graph input stays plain NCHW */
    od_half_plan(s);
    for (int i = 1; !rc && i < s->n; i++) {
        s->t[i].op = op_table(od_node(s, i)->op);
        if (!s->t[i].op)
            return so_err(SO_EUNSUP, "onednn: node %s has unsupported op %s", od_node(s, i)->name,
                          so_op_name(od_node(s, i)->op));
        rc = s->t[i].op->create(s, i);
    }
    if (!rc) {
        s->scratch = so_alloc(s->scratch_bytes);
        s->labels = so_alloc((size_t)s->m->batch * (size_t)so_graph_targets(s->g) * sizeof *s->labels);
        s->wtmp = s->wtmp_bytes ? so_alloc(s->wtmp_bytes) : NULL;
        if (!s->scratch || !s->labels || (s->wtmp_bytes && !s->wtmp))
            return so_err(SO_ENOMEM, "out of memory for the onednn scratch buffers");
        rc = od_wino_alloc(s);
    }
    if (!rc)
        rc = od_bf16_alloc(s);
    for (int i = 0; !rc && i < s->n; i++)
        rc = tensor_finish(s, i);
    if (!rc) {
        dnnl_memory_desc_t pmd;
        dnnl_dims_t d = {(int64_t)(s->pad_bytes ? s->pad_bytes : 1)};
        OD_CHECK(s, -1, "scratchpad desc", dnnl_memory_desc_init_by_tag(&pmd, 1, d, dnnl_u8, dnnl_a));
        s->pad = so_alloc(s->pad_bytes);
        if (!s->pad)
            return so_err(SO_ENOMEM, "out of memory for a %zu-byte oneDNN scratchpad", s->pad_bytes);
        rc = od_mem_wrap(s, -1, &pmd, s->pad, &s->pad_mem);
    }
    return rc;
}

/* An explicit --conv-algo winograd where neither oneDNN (AVX-512) nor
 * scaleout (AVX2+FMA, onednn_wino.c) has one fails here, naming the CPU
 * feature, instead of quietly running the direct kernels. */
static int check_cpu(const so_model *m)
{
    int rc = so_cpu_init();
    if (rc)
        return rc;
    od_cpu_setup();
    if (m->conv_algo != SO_CONV_WINOGRAD || od_winograd_available() || od_wino_cpu())
        return 0;
    const char *cap = so_cpu_isa_cap();
    return so_err(SO_EINVAL,
                  "--conv-algo winograd: needs AVX2+FMA (scaleout's kernel) or AVX-512 (oneDNN %d.%d's); "
                  "this CPU runs %s%s%s (use auto or direct)",
                  dnnl_version()->major, dnnl_version()->minor, so_isa_label(so_cpu_isa()),
                  cap ? ", capped by " : "", cap ? cap : "");
}

static int create(so_model *m, void **state)
{
    *state = NULL;
    int crc = check_cpu(m);
    if (crc)
        return crc;
    od_state *s = calloc(1, sizeof *s);
    if (!s)
        return so_err(SO_ENOMEM, "out of memory for the onednn backend");
    s->m = m;
    s->g = m->g;
    s->n = so_graph_size(m->g);
    s->t = calloc((size_t)s->n, sizeof *s->t);
    int rc = s->t ? 0 : so_err(SO_ENOMEM, "out of memory for the onednn backend");
    dnnl_status_t st = dnnl_success;
    if (!rc)
        st = dnnl_engine_create(&s->eng, dnnl_cpu, 0);
    if (!rc && st == dnnl_success)
        st = dnnl_stream_create(&s->strm, s->eng, dnnl_stream_default_flags);
    if (!rc && st != dnnl_success)
        rc = od_fail(s, -1, "engine/stream creation", st);
    if (!rc)
        rc = build(s);
    if (rc) {
        destroy(s);
        return rc;
    }
    *state = s;
    return 0;
}

/* Copies n samples (zero-filling the rest) and checks the labels. */
static int set_input(void *state, const float *x, const int32_t *y, int n)
{
    od_state *s = state;
    size_t per = s->t[0].bytes / (size_t)s->m->batch, nt = (size_t)so_graph_targets(s->g); /* checked by so_model */
    size_t copied = x ? per * (size_t)n : 0; /* no x: a later pipeline stage (recv nodes) */
    if (x)
        memcpy(s->t[0].buf, x, copied);
    memset((char *)s->t[0].buf + copied, 0, s->t[0].bytes - copied);
    memset(s->labels, 0, (size_t)s->m->batch * nt * sizeof *s->labels);
    if (y)
        memcpy(s->labels, y, (size_t)n * nt * sizeof *y);
    s->has_labels = y != NULL;
    s->nvalid = n;
    return 0;
}

static int forward(void *state, int node, int training)
{
    od_state *s = state;
    return s->t[node].op->forward(s, node, training);
}

static int backward(void *state, int node)
{
    od_state *s = state;
    return s->t[node].op->backward(s, node);
}

static int dense_chunk(void *state, int node, int k, int r0, int r1, int backward)
{
    return od_dense_chunk(state, node, k, r0, r1, backward);
}

static int read_output(void *state, int node, float *dst)
{
    od_state *s = state;
    od_tensor *t = &s->t[node];
    OD_CHECK(s, node, "output handle", dnnl_memory_set_data_handle(t->rd_user, dst));
    int rc = od_reorder_exec(s, node, "output reorder", &t->rd, t->mem, t->rd_user);
    if (!rc)
        OD_CHECK(s, node, "stream wait", dnnl_stream_wait(s->strm));
    return rc;
}

static void invalidate(od_state *s, int i)
{
    if (s->t[i].op && s->t[i].op->invalidate && s->t[i].priv)
        s->t[i].op->invalidate(s->t[i].priv);
}

/* A linear head tied to an embedding's token table keeps its own (BF16)
 * copy of those weights: it hears of the table's changes too. */
static void node_params_changed(void *state, int i)
{
    od_state *s = state;
    if (i < 1 || i >= s->n)
        return;
    invalidate(s, i);
    if (so_graph_node(s->g, i)->op != SO_OP_EMBED)
        return;
    for (int j = i + 1; j < s->n; j++)
        if (so_graph_node(s->g, j)->op == SO_OP_LINEAR && so_graph_node(s->g, j)->a.tie == i)
            invalidate(s, j);
}

static void params_changed(void *state)
{
    od_state *s = state;
    for (int i = 1; i < s->n; i++)
        node_params_changed(state, i);
}

/* Activations, the diff pool and the staging buffers (weights in primitive
 * layout and weight gradients are per state too, but not activations; the
 * per-layer BF16 weight copies are counted, they exist only in BF16), and
 * the shared transient buffer (GEMM packing; under BF16 also the LM head's
 * BF16 dY, ~200 MB on GPT-2 124M at B8 T256). */
static size_t state_bytes(void *state)
{
    od_state *s = state;
    size_t total = s->diff_bytes + s->scratch_bytes + s->pad_bytes + 2 * s->h16_bytes + s->wbf16_bytes +
                   s->wtmp_bytes + s->wino_floats * sizeof(float) * (size_t)s->wino_nthr;
    for (int i = 0; i < s->n; i++)
        total += s->t[i].bytes;
    return total;
}

/* The layers that run BF16 under --precision bf16: oneDNN convolutions and
 * the BF16 instance of the direct kernel of small channel counts, dense
 * layers run whole (chunks run sgemm) and linear layers. Attention stays
 * FP32. */
static so_precision node_precision(void *state, int i)
{
    od_state *s = state;
    if (!od_bf16(s) || i < 1 || i >= s->n)
        return SO_PRECISION_FP32;
    const od_op *op = s->t[i].op;
    int chunked = s->m->chunks && s->m->chunks[i] > 1;
    int bf16 = op == &od_op_conv || op == &od_op_dconv_bf16 || op == &od_op_linear ||
               (op == &od_op_dense && !chunked);
    return bf16 ? SO_PRECISION_BF16 : SO_PRECISION_FP32;
}

const so_backend_ops so_backend_onednn = {
    .name = "onednn",
    .create = create,
    .destroy = destroy,
    .set_input = set_input,
    .forward = forward,
    .backward = backward,
    .read_output = read_output,
    .params_changed = params_changed,
    .node_params_changed = node_params_changed,
    .conv_kernels = od_conv_kernels,
    .bind_edge = od_bind_edge,
    .edge_bytes = od_edge_bytes,
    .edge_layout = od_edge_layout,
    .state_bytes = state_bytes,
    .node_precision = node_precision,
    .dense_chunk = dense_chunk,
};
