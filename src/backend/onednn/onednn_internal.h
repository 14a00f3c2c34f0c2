/* Private interface of the oneDNN backend: the per-node tensor record, the
 * per-op operations table and the helpers every op file shares (primitive and
 * reorder creation with a shared user scratchpad, checked execution, cached
 * weight reorders, gradient stores, diff write-or-accumulate targets). */
#ifndef SO_ONEDNN_INTERNAL_H
#define SO_ONEDNN_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#include "scaleout/backend.h"
#include "scaleout/graph.h"
#include "scaleout/model.h"

typedef struct od_state od_state;

/* What one op kind does. create() must call od_tensor_alloc() for its node
 * once it knows the output layout; it may leave a partly built private
 * struct behind on failure: destroy() is always called on it. */
typedef struct {
    int (*create)(od_state *s, int node);
    int (*forward)(od_state *s, int node, int training);
    int (*backward)(od_state *s, int node);
    void (*destroy)(void *priv);
    void (*invalidate)(void *priv); /* drop cached weight reorders; may be NULL */
} od_op;

/* A primitive with its descriptor (kept for queries; both may be NULL). */
typedef struct {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
} od_prim;

/* One node's activation and its diff: same layout `md` (oneDNN's choice,
 * usually nChw16c), so diffs can be added elementwise without reorders. */
typedef struct {
    dnnl_memory_desc_t md;
    size_t bytes;
    float *buf, *dbuf;           /* activation, diff (dbuf NULL for the input); uint16_t BF16 values when half */
    int half;                    /* activation and diff stored as BF16 (--precision bf16, od_half_plan) */
    dnnl_memory_t mem, dmem;
    dnnl_memory_t acc;           /* md over s->scratch: staging for accumulated diffs */
    const od_op *op;
    void *priv;
    od_prim rd;                  /* reorder to plain NCHW for read_output */
    dnnl_memory_t rd_user;       /* plain NCHW, handle set per read */
} od_tensor;

/* A diff buffer shared by nodes whose diffs are never alive at once. */
typedef struct {
    float *buf;
    size_t bytes;
    int busy_until;              /* node index of the current occupant's last writer */
} od_dblock;

struct od_state {
    so_model *m;
    const so_graph *g;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    od_tensor *t;
    int n;
    float *scratch;              /* accumulate staging, largest activation */
    size_t scratch_bytes;
    void *pad;                   /* oneDNN user scratchpad shared by all primitives */
    size_t pad_bytes;
    dnnl_memory_t pad_mem;
    int32_t *labels;             /* batch labels (padded rows 0) */
    od_dblock *dblocks;          /* the diff pool (od_tensor_alloc) */
    int ndblocks;
    size_t diff_bytes;           /* what the pool holds, for reports */
    float *wstage;               /* shared weight-gradient staging (od_gradw) */
    size_t wstage_bytes;
    float *wtmp;                 /* one node's transient buffer, shared by all: weights in primitive layout
                                    (od_wcache), Winograd's transformed weights, or the packing buffers of
                                    scaleout's GEMM (a linear node's, nthr of them; one set per state, not per
                                    node: GPT-2 124M has 49 linear nodes, ~9 MB each at 2 threads) */
    size_t wtmp_bytes;
    float **wino_tb;             /* per-thread Winograd buffers shared by all plans (od_wino) */
    size_t wino_floats;
    int wino_nthr;
    void *h16[2];                /* BF16 staging shared by all conv/dense nodes (onednn_bf16.c):
                                    [0] a source, [1] a diff_dst, each h16_bytes */
    size_t h16_bytes;
    size_t wbf16_bytes;          /* the per-layer BF16 copies (od_wcache; a BF16 linear's W and X), for reports */
    int nvalid;
    int has_labels;
};

/* ---- op tables (one per file) ---- */
extern const od_op od_op_conv, od_op_dense, od_op_maxpool, od_op_avgpool, od_op_gap,
    od_op_eltwise, od_op_bn, od_op_dropout, od_op_flatten, od_op_add, od_op_concat,
    od_op_loss, od_op_recv, od_op_send;
/* The sequence ops (GPT-2): onednn_linear.c (oneDNN matmuls) and
 * onednn_seq.c (scaleout's kernels, onednn_seq.h). */
extern const od_op od_op_linear, od_op_embed, od_op_layernorm, od_op_gelu, od_op_attention, od_op_token_xent;
/* onednn_edge.c: so_backend_ops.bind_edge, edge_bytes, edge_layout. */
int od_bind_edge(void *state, int node, float *data, float *grad);
size_t od_edge_bytes(void *state, int node);
size_t od_edge_layout(void *state, int node, void *buf, size_t len);
/* Direct small-channel convolution (onednn_dconv.c) and the rule choosing it
 * over oneDNN's gemm fallback for a conv node; one instance per ISA
 * (onednn_dconv_avx512.c, onednn_dconv_avx2.c), od_dconv_op() picks the
 * widest so_cpu_isa() allows, od_dconv_isa() names an op's ISA (an so_isa;
 * -1 when the op is not a dconv instance). */
extern const od_op od_op_dconv_avx512, od_op_dconv_avx2;
/* Its BF16 instance (onednn_dconv_bf16.c, AVX512_BF16), for --precision bf16. */
extern const od_op od_op_dconv_bf16;
int od_dconv_applies(od_state *s, int node);
const od_op *od_dconv_op(void);
int od_dconv_isa(const od_op *op);

/* Winograd 3x3 stride-1 convolution for AVX2+FMA on nChw8c activations
 * (onednn_wino.c: the rule and plans; kernel onednn_wino_avx2.c), where
 * oneDNN 2.6 has none. One plan per propagation: forward, backward data
 * (flip: the same kernel with rotated weights, in/out channels swapped) or
 * backward weights (the forward's geometry, a reduction over tiles). */
typedef struct {
    int m;                       /* output tile m x m: F(m x m, 3x3), m = 2 or 4 */
    int ic, oc, ih, iw, oh, ow, pad, flip;
    int th, tw, ntiles;          /* tiles down, across, in the whole batch */
    int tblock, nthr;            /* tiles per block, threads */
    size_t v_floats, d_floats;   /* per thread: transformed input V, output M or dy D */
    size_t u_floats;             /* transformed weights (or their gradient) */
    float **tb;                  /* per thread: V, M or D, then (weights) dU, bias sums;
                                    s->wino_tb, set for each call */
} od_wino;
/* Tile size m to use for a propagation (SO_PROP_*) of conv `node`, 0 when
 * scaleout's Winograd does not run it. */
int od_wino_wanted(od_state *s, int node, int prop);
/* Whether this CPU runs scaleout's Winograd at all (AVX2+FMA). */
int od_wino_cpu(void);
/* Plans a propagation; its per-thread buffers are the shared s->wino_tb,
 * which od_wino_alloc allocates once all nodes are built. */
int od_wino_init(od_state *s, int node, int prop, int m, od_wino *w);
int od_wino_alloc(od_state *s);
void od_wino_free(od_state *s);
/* dst = conv(src) (+ bias, fused ReLU), weights from the flat OIHW params. */
int od_wino_exec(od_state *s, int node, const od_wino *w, const float *src, float *dst);
/* Weight and bias gradients (bias NULL: none) into the flat grads. */
int od_wino_wgrad(od_state *s, int node, const od_wino *w);
void od_wino_avx2_weights(const od_wino *w, const float *W, float *U);
void od_wino_avx2_conv(const od_wino *w, const float *U, const float *src, const float *bias, int relu, float *dst);
void od_wino_avx2_wgrad(const od_wino *w, const float *src, const float *dy, float *dW, float *db, int add);

/* onednn_cpu.c: passes SCALEOUT_MAX_ISA on to oneDNN (once, before the first
 * primitive); whether oneDNN has a Winograd convolution on this CPU. */
void od_cpu_setup(void);
int od_winograd_available(void);
/* onednn_conv.c: the kernels a convolution node runs (so_model_conv_kernels). */
int od_conv_kernels(void *state, int node, so_conv_kernels *out);

/* ---- errors ---- */
int od_fail(od_state *s, int node, const char *what, dnnl_status_t st);
#define OD_CHECK(s, node, what, call)                                                            \
    do {                                                                                         \
        dnnl_status_t st_ = (call);                                                              \
        if (st_ != dnnl_success)                                                                 \
            return od_fail((s), (node), (what), st_);                                            \
    } while (0)

/* ---- memory descriptors and memories ---- */
/* md for node `i`'s output as plain NCHW (batch x C x H x W). */
void od_md_plain(const od_state *s, int i, dnnl_memory_desc_t *md);
/* 4-D md with format tag (any, abcd, ...). */
void od_md_4d(dnnl_memory_desc_t *md, int64_t n, int64_t c, int64_t h, int64_t w, dnnl_format_tag_t tag);
void od_md_1d(dnnl_memory_desc_t *md, int64_t n);
/* Sets node's layout, allocates its activation (and diff unless the input). */
int od_tensor_alloc(od_state *s, int node, const dnnl_memory_desc_t *md);
/* The same with the diff in the activation's own buffer: for a tensor whose
 * only consumer overwrites it with its gradient (logits before the loss). */
int od_tensor_alloc_inplace(od_state *s, int node, const dnnl_memory_desc_t *md);
/* Memory object over caller-owned `ptr`. */
int od_mem_wrap(od_state *s, int node, const dnnl_memory_desc_t *md, void *ptr, dnnl_memory_t *out);
/* Points `mem` at ptr when it points elsewhere: memories over gradients,
 * which a strategy may place outside m->grads (so_model_grads_at). */
int od_mem_rebind(od_state *s, int node, dnnl_memory_t mem, void *ptr);
/* A memory over node's bias (its last a.out parameters, NULL: none)
 * pointed where they are now (so_model_params_at). */
int od_bias_rebind(od_state *s, int node, dnnl_memory_t bias);
/* Zeroed aligned buffer sized for md plus a memory object over it. */
int od_mem_alloc(od_state *s, int node, const dnnl_memory_desc_t *md, float **buf, dnnl_memory_t *out);
void od_mem_free(dnnl_memory_t *mem, float **buf);
int od_md_equal(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b);

/* ---- primitives ---- */
/* Attributes with the user scratchpad, optional fused ReLU and optional sum
 * post-op (dst += result). The caller destroys the attr. */
int od_attr(od_state *s, int node, int relu, int sum, dnnl_primitive_attr_t *out);
/* Primitive from an op descriptor; `hint` is the forward pd for backward. */
int od_prim_init(od_state *s, int node, const char *what, const void *op_desc, int relu,
                 const_dnnl_primitive_desc_t hint, od_prim *out);
/* Reorder src_md -> dst_md; sum != 0 makes it dst += src. */
int od_reorder_init(od_state *s, int node, const char *what, const dnnl_memory_desc_t *src_md,
                    const dnnl_memory_desc_t *dst_md, int sum, od_prim *out);
/* Creates the primitive of an already created out->pd (made with od_attr). */
int od_prim_finish(od_state *s, int node, const char *what, od_prim *out);
/* Tracks the scratchpad needs of an already created pd. */
int od_pad_note(od_state *s, int node, const_dnnl_primitive_desc_t pd);
void od_prim_fini(od_prim *p);
/* Copy of a md queried from a pd (which: dnnl_query_*_md, index 0). */
dnnl_memory_desc_t od_query_md(const od_prim *p, dnnl_query_t which);
/* Executes with the shared scratchpad added to args (nargs <= 14). */
int od_exec(od_state *s, int node, const char *what, const od_prim *p, int nargs,
            const dnnl_exec_arg_t *args);
int od_reorder_exec(od_state *s, int node, const char *what, const od_prim *p, dnnl_memory_t src,
                    dnnl_memory_t dst);

/* ---- weight layouts (onednn_wlayout.c) ----
 * A 4-D weight layout blocked over O and I only (at most 16 of each per
 * inner block), in FP32 or BF16, converted to and from the flat OIHW
 * layout by scaleout's loops instead of oneDNN's reorders. */
typedef struct {
    int64_t dims[4], pdims[4];   /* O, I, H, W: logical and padded to whole blocks */
    int64_t stride[4];           /* elements per step of each dimension's outer (block) index */
    int64_t blk[2];              /* O and I per inner block */
    int nin;                     /* elements per inner block, blk[0] * blk[1] */
    uint8_t pos_o[256], pos_i[256]; /* each inner position's o and i within its block */
    int32_t src_off[256];        /* the same position's offset in the flat layout */
    int bf16;                    /* the blocked side holds BF16 */
} od_wlayout;
/* 1 when md is such a layout (L filled), 0 when oneDNN's reorder must do it
 * (L zeroed: nin 0 marks a layout the loops do not handle). */
int od_wlayout_plan(const dnnl_memory_desc_t *md, od_wlayout *L);
/* Flat FP32 OIHW -> blocked (FP32, or BF16 rounded to nearest even); padding zeroed. */
void od_wlayout_pack(const od_wlayout *L, const float *oihw, void *blocked);
/* Blocked FP32 -> flat FP32 OIHW, written or added. */
void od_wlayout_unpack(const od_wlayout *L, const float *blocked, float *oihw, int add);

/* ---- cached weight reorders (flat PyTorch layout -> primitive layout) ---- */
/* Weights in a primitive's layout. Parameters change every optimizer step,
 * so a per-layer copy would be rebuilt once per step anyway: instead every
 * layer reorders into ONE buffer shared by all (s->wtmp, sized for the
 * largest) right before its primitive runs. That saves a second and third
 * copy of every convolution's weights (ResNet-50: ~190 MB) for the price of
 * a reorder per evaluation batch. */
/* BF16 weights (a bf16 prim_md) are the exception: a per-layer copy (2
 * bytes a parameter, s->wbf16_bytes) converted once per parameter change
 * (od_wcache_invalidate from the op's invalidate hook), since the forward
 * and both backward propagations of a step read it. */
typedef struct {
    dnnl_memory_t user, mem;     /* mem NULL when the primitive takes the user layout */
    od_prim reorder;             /* unused when fast.nin: scaleout's loops (od_wlayout) convert */
    od_wlayout fast;
    void *own;                   /* BF16 only: the layer's own copy */
    int valid;                   /* own holds the current parameters */
    size_t user_off;             /* the weights' first parameter (so_model_params_at, at each use) */
} od_wcache;
int od_wcache_init(od_state *s, int node, const dnnl_memory_desc_t *user_md, size_t user_off,
                   const dnnl_memory_desc_t *prim_md, od_wcache *c);
/* The weights in primitive layout, valid until the next od_wcache_get. */
int od_wcache_get(od_state *s, int node, od_wcache *c, dnnl_memory_t *out);
void od_wcache_fini(od_wcache *c);
void od_wcache_invalidate(od_wcache *c);

/* ---- BF16 compute (onednn_bf16.c, --precision bf16) ----
 * Autocast: convolutions and dense layers read BF16 sources, weights and
 * diff_dst and write FP32 outputs and gradients; the rest stays FP32. */
int od_bf16(const od_state *s);
/* md with its data type replaced (blocked strides count elements, so the
 * layout is unchanged). */
dnnl_memory_desc_t od_md_as(const dnnl_memory_desc_t *md, dnnl_data_type_t dt);
/* FP32 -> BF16 reorder, same layout, into the shared staging s->h16[slot]. */
typedef struct {
    od_prim reorder;
    dnnl_memory_t mem;           /* the BF16 md over s->h16[slot] */
    int slot;
} od_tobf16;
enum { OD_H16_SRC = 0, OD_H16_DIFF = 1 };
int od_tobf16_init(od_state *s, int node, const dnnl_memory_desc_t *f32_md, int slot, od_tobf16 *c);
/* Converts src; *out is the BF16 memory, valid until the slot's next use. */
int od_tobf16_exec(od_state *s, int node, od_tobf16 *c, dnnl_memory_t src, dnnl_memory_t *out);
void od_tobf16_fini(od_tobf16 *c);
int od_bf16_alloc(od_state *s);
void od_bf16_free(od_state *s);

/* ---- BF16 activation storage (onednn_half.c, --precision bf16) ----
 * Tensors between layers that all read and write BF16 (oneDNN convolutions,
 * batch norm, ReLU, adds, pooling) are stored as BF16, their diffs too, as
 * PyTorch's autocast keeps them: half the activation memory, and no
 * conversion before the convolutions that read them. Decided from the graph
 * before any op is created (t[i].half), so each op builds its primitives on
 * the data types its neighbours will use. */
void od_half_plan(od_state *s);
/* Whether a convolution node runs scaleout's small-channel direct kernel
 * (onednn_conv.c): then it reads and writes FP32. */
int od_conv_small(od_state *s, int node);
/* dst += src over n BF16 values (sum in FP32, rounded to nearest even). */
void od_half_add(uint16_t *dst, const uint16_t *src, size_t n);
void od_half_store(uint16_t *dst, const uint16_t *src, size_t n, int add);
void od_half_relu(uint16_t *x, size_t n);
void od_half_relu_bwd(uint16_t *d, const uint16_t *out, size_t n);
/* y = x0 + x1, ReLU'd when relu (two loops: a flag inside kept it scalar). */
void od_half_add2(uint16_t *y, const uint16_t *x0, const uint16_t *x1, size_t n, int relu);
/* d0 = d1 = (mask ? (out > 0 ? d : 0) : d): an add's diff to both inputs. */
void od_half_to_pair(const uint16_t *d, const uint16_t *out, uint16_t *d0, uint16_t *d1, size_t n, int mask);

/* ---- weight gradients (primitive layout -> flat PyTorch layout) ----
 * When the primitive's layout is the flat one (dense layers on plain inputs:
 * VGG's 400 MB fc6) it writes straight into the gradients and no staging copy
 * exists, unless micro-batches must be added. Otherwise the primitive writes
 * into ONE staging buffer shared by all layers (s->wstage, grown to the
 * largest during the first backward): a layer's staged gradient lives only
 * from its backward-weights call to the reorder right after it. */
typedef struct {
    dnnl_memory_t diff, user;
    od_prim write, add;          /* unused when fast.nin: scaleout's loops (od_wlayout) convert */
    od_wlayout fast;
    dnnl_memory_desc_t prim_md;
    int direct;                  /* prim layout == flat layout */
    size_t grad_off;             /* the gradient's first element (so_model_grads_at, at each backward) */
} od_gradw;
int od_gradw_init(od_state *s, int node, const dnnl_memory_desc_t *prim_md,
                  const dnnl_memory_desc_t *user_md, size_t grad_off, od_gradw *g);
/* The memory the backward-weights primitive writes to this step. */
int od_gradw_target(od_state *s, int node, od_gradw *g, dnnl_memory_t *out);
/* Writes or adds (m->accumulate_grads) the primitive's result into the grads. */
int od_gradw_store(od_state *s, int node, od_gradw *g);
void od_gradw_fini(od_gradw *g);

/* ---- input diffs ---- */
/* Where node's backward writes the diff of input `slot`: the input's diff
 * buffer, or the scratch when it must be added (or is not needed at all). */
dnnl_memory_t od_diff_target(od_state *s, int node, int slot);
/* 1 when that target is the scratch (s->scratch) rather than the input's diff. */
int od_diff_staged(od_state *s, int node, int slot);
/* Adds the scratch into the input's diff when od_diff_target staged it. */
void od_diff_finish(od_state *s, int node, int slot);

/* ---- small parallel loops ---- */
void od_vec_add(float *dst, const float *src, size_t n);
/* Per-channel loops in any 4-D layout with at most one channel block of <= 16
 * (SO_EUNSUP otherwise), over rows [0, n) (onednn_chan.c). */
int od_chan_sums(const dnnl_memory_desc_t *md, const float *x, int n, const float *shift, double *s1, double *s2);
int od_chan_axpb(const dnnl_memory_desc_t *md, const float *x, float *y, int n, const float *a, const float *b);
void od_vec_store(float *dst, const float *src, size_t n, int add); /* dst = or += src */
/* so_backend_ops.dense_chunk for a dense node built to run in chunks. */
int od_dense_chunk(od_state *s, int node, int k, int r0, int r1, int backward);
void od_vec_relu(float *x, size_t n);
/* d = out > 0 ? d : 0 */
void od_vec_relu_bwd(float *d, const float *out, size_t n);

/* In-place ReLU backward on node's own diff using its output (fused ReLU). */
int od_relu_bwd_init(od_state *s, int node, od_prim *out);
int od_relu_bwd_exec(od_state *s, int node, const od_prim *p);

static inline const so_node *od_node(const od_state *s, int i) { return so_graph_node(s->g, i); }
static inline od_tensor *od_in(od_state *s, int node, int slot)
{
    return &s->t[od_node(s, node)->inputs[slot]];
}

#endif
