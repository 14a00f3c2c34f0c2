/* The compute-backend interface. A backend executes one node at a time for a
 * model; it owns the activation and diff buffers (in whatever layout it likes:
 * plain NCHW for ref, oneDNN's blocked nChw16c for onednn) and reads/writes the
 * model's flat parameter and gradient buffers in PyTorch layout. */
#ifndef SCALEOUT_BACKEND_H
#define SCALEOUT_BACKEND_H
#include <stdint.h>
#include "scaleout/model.h"

typedef struct so_backend_ops {
    const char *name;
    /* Plans layouts, allocates buffers, builds kernels/primitives for m->batch. */
    int (*create)(so_model *m, void **state);
    void (*destroy)(void *state);
    /* x: n samples NCHW (n <= batch, the rest zero-filled by the backend);
     * y: n labels or NULL. */
    int (*set_input)(void *state, const float *x, const int32_t *y, int n);
    /* Forward of one node (node >= 1). The loss node sets m->loss (mean over n). */
    int (*forward)(void *state, int node, int training);
    /* Backward of one node: parameter gradients into m->grads (add when
     * m->accumulate_grads), input diffs written or accumulated as
     * so_graph_diff_accumulate says; diffs of the graph input are skipped. */
    int (*backward)(void *state, int node);
    /* Copies node's output as plain NCHW float, batch x C x H x W. */
    int (*read_output)(void *state, int node, float *dst);
    /* Parameters or running stats changed outside backward. May be NULL. */
    void (*params_changed)(void *state);
    /* The kernels a convolution node runs. May be NULL (reported as "direct"
     * kernels named after the backend). */
    int (*conv_kernels)(void *state, int node, so_conv_kernels *out);
    /* Pipeline edges carry a tensor in the layout the backend keeps it in
     * (the sender's; the receiver adopts it through so_model.recv_layout),
     * so neither side reorders. bind_edge: the buffers (edge_bytes each) a
     * recv or send node moves its tensor through, until bound again. recv:
     * forward copies `data` into its output, backward copies its output's
     * diff into `grad`. send: forward copies its input into `data`, backward
     * takes `grad` as that input's diff (written or added as
     * so_graph_diff_accumulate says). NULL leaves a buffer as it was. */
    int (*bind_edge)(void *state, int node, float *data, float *grad);
    size_t (*edge_bytes)(void *state, int node);
    /* A send node's layout as an opaque description (at most len bytes)
     * for the receiving stage's recv node; returns its size, 0 for plain
     * NCHW. May be NULL (plain). */
    size_t (*edge_layout)(void *state, int node, void *buf, size_t len);
    /* Bytes of the activation, diff and staging buffers one state holds
     * (a micro-batch in flight). May be NULL (unknown: 0). */
    size_t (*state_bytes)(void *state);
    /* The parameters of node `node` changed (a sharded strategy gathered
     * them): drop what was cached of them. May be NULL (params_changed). */
    void (*node_params_changed)(void *state, int node);
    /* Chunk k of a dense node run in m->chunks[node] chunks: weight rows
     * [r0, r1). Forward (backward 0) writes those output columns, the last
     * chunk adds the bias and the fused ReLU; backward runs k = K-1 down to
     * 0: the first (K-1) applies the ReLU's mask and writes the bias
     * gradient, each writes (adds, m->accumulate_grads) its rows' weight
     * gradient and sums its share of the input's diff, delivered with k = 0.
     * May be NULL: the model then runs every node whole. */
    int (*dense_chunk)(void *state, int node, int k, int r0, int r1, int backward);
    /* The precision node `node`'s products run in (the profiler's per-layer
     * peak). May be NULL: every node computes in FP32. */
    so_precision (*node_precision)(void *state, int node);
} so_backend_ops;

extern const so_backend_ops so_backend_ref;
extern const so_backend_ops so_backend_onednn;

/* "ref" or "onednn"; NULL if unknown. */
const so_backend_ops *so_backend_find(const char *name);

/* The oneDNN library version the onednn backend runs on, "major.minor.patch
 * (commit)", for benchmark records. */
const char *so_backend_version(void);

/* Whether the onednn backend can run --conv-algo winograd on this CPU (and
 * under the ISA caps of scaleout/cpu.h): oneDNN 2.6's for AVX-512 (asked of
 * oneDNN once), else scaleout's own for AVX2+FMA. */
int so_backend_has_winograd(void);

#endif
