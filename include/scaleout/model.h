/* A trainable model: a finalized graph, its flat parameter / gradient / state
 * buffers, and one backend instance sized for a batch. Parameters and
 * gradients each live in ONE contiguous aligned float array in PyTorch layout;
 * nodes hold offsets into them, so the optimizer is one vector loop, gradient
 * buckets are slices, and a checkpoint is one write. */
#ifndef SCALEOUT_MODEL_H
#define SCALEOUT_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "scaleout/graph.h"
#include "scaleout/rng.h"

struct so_backend_ops;

/* Called during backward right after node `node` has written its parameter
 * gradients grads[param_off .. param_off+nparam). Nodes arrive in reverse
 * topological order; the data-parallel trainer starts communication here. */
typedef void (*so_grad_ready_fn)(void *arg, int node, size_t param_off, size_t nparam);

/* Called after each node's forward (backward = 0) or backward (1) with its
 * start and end times (so_now): per-layer timelines. */
typedef void (*so_node_span_fn)(void *arg, int node, int backward, double t0, double t1);

/* Calls before node `node` (>= 1) runs its forward or its backward: a
 * sharded strategy gathers the parameters of the node's unit there, and
 * waits for a gather it started earlier. A non-zero return ends the pass
 * with that code. Either member may be NULL. */
typedef struct {
    int (*forward_begin)(void *arg, int node);
    int (*backward_begin)(void *arg, int node);
    void *arg;
    /* Before chunk k of a node computed in chunks (so_model.chunks): forward
     * runs k = 0..K-1, backward K-1..0, after the node's forward_begin /
     * backward_begin. May be NULL. */
    int (*chunk_begin)(void *arg, int node, int k, int backward);
} so_node_hooks;

/* Sums v[0..n) element-wise over all data-parallel replicas, in place; may be
 * called in the middle of backward. Set by the trainer for synchronised batch
 * normalisation (statistics over the global batch); NULL = per-replica. */
typedef int (*so_allsum_fn)(void *arg, double *v, int n);

/* Convolution algorithm policy of the onednn backend (ref ignores it).
 * AUTO: Winograd F(4x4, 3x3) for the 3x3 stride-1 layers and propagations
 * where it measured faster on AVX-512 (docs/PERFORMANCE.md), direct
 * elsewhere. DIRECT: PyTorch's choice, direct everywhere. WINOGRAD: wherever
 * oneDNN implements it. The choice depends only on the layer's shape and the
 * CPU, so every rank and every resumed run makes the same one. */
typedef enum { SO_CONV_AUTO, SO_CONV_DIRECT, SO_CONV_WINOGRAD } so_conv_algo;

/* "auto", "direct" or "winograd" -> *out; SO_EINVAL naming --conv-algo. */
int so_conv_algo_parse(const char *name, so_conv_algo *out);

/* What one convolution runs, per propagation (SO_PROP_*): the algorithm
 * family ("winograd", "direct", "gemm" for im2col + GEMM, "ref", or "none"
 * where the propagation is not needed) and the implementation's own name
 * ("jit:avx512_core", "scaleout:avx512", ...), for --json and banners. */
enum { SO_PROP_FWD, SO_PROP_BWD_DATA, SO_PROP_BWD_WEIGHTS, SO_NPROPS };
typedef struct {
    char algo[SO_NPROPS][12];
    char impl[SO_NPROPS][48];
} so_conv_kernels;

/* How parameters start (--init):
 * - SO_INIT_TORCH (the default): as PyTorch does, so its recipes transfer:
 *   Conv2d and Linear weights kaiming_uniform(a = sqrt(5)), i.e. uniform in
 *   +-1/sqrt(fan_in), biases uniform in +-1/sqrt(fan_in); batchnorm weight 1,
 *   bias 0; and where a torchvision model overrides that, its own scheme
 *   (so_graph_torch_init: ResNet and VGG).
 * - SO_INIT_HE: He normal (std sqrt(2/fan_in)) weights for ReLU networks,
 *   Glorot uniform otherwise; zero biases (scaleout's scheme before).
 * - SO_INIT_GLOROT: Glorot uniform (+-sqrt(6/(fan_in+fan_out))) weights, zero biases. */
typedef enum { SO_INIT_TORCH, SO_INIT_HE, SO_INIT_GLOROT } so_init_scheme;
/* "torch", "he" or "glorot"; SO_EINVAL names --init otherwise. */
int so_init_parse(const char *name, so_init_scheme *out);

/* Compute precision (--precision, docs/PRECISION.md). FP32: every op in FP32.
 * BF16: PyTorch CPU autocast's split: convolutions, dense and linear layers
 * and attention's matmuls take BF16 inputs and weights and accumulate in
 * FP32; normalisation, softmax, the loss and the optimizer stay FP32; the
 * parameters, gradients and optimizer state the model holds stay FP32
 * (master weights), BF16 weight copies are derived from them. BF16 runs
 * only where the CPU has a native BF16 dot product (so_cpu_has_bf16). */
typedef enum { SO_PRECISION_FP32 = 0, SO_PRECISION_BF16 = 1 } so_precision;
/* "fp32" or "bf16"; NULL for an invalid value. */
const char *so_precision_name(so_precision p);
/* --precision's value: "fp32", "bf16" or "auto" (bf16 where the CPU has a
 * native BF16 dot product within the ISA caps, fp32 elsewhere) -> *out.
 * SO_EINVAL naming --precision for an unknown value, and for "bf16"
 * on a CPU (or under a cap) without AVX-512 BF16, naming the ISA. */
int so_precision_resolve(const char *name, so_precision *out);

typedef struct so_model_opts {
    const char *backend;         /* "onednn" or "ref" */
    int batch;
    uint64_t seed;
    so_conv_algo conv_algo;
    /* Allocator of the gradient buffer m->grads (NULL: so_alloc): zero-filled,
     * 64-byte aligned memory, NULL on failure. Called once, before any other
     * allocation that can fail and before the backend (which wraps m->grads)
     * is created; grads_free releases it in so_model_destroy. Both or neither.
     * The data-parallel CLI passes so_dist.buf_alloc / buf_free (registered
     * memory: the gradient allreduce then runs without copies). */
    void *(*grads_alloc)(void *ctx, size_t bytes);
    void (*grads_free)(void *ctx, void *p);
    void *grads_ctx;
    /* Allocator of the parameter buffer m->params, the same way (NULL:
     * so_alloc), called after grads_alloc. A sharded strategy passes memory
     * whose pages it maps only while a unit's parameters are gathered: the
     * backend keeps the addresses (nodes hold offsets), the strategy says
     * when a unit's values changed (so_model_params_changed_nodes). */
    void *(*params_alloc)(void *ctx, size_t bytes);
    void (*params_free)(void *ctx, void *p);
    void *params_ctx;
    /* Pipeline stages: the layout description (so_model_edge_layout of
     * the sending stage) of recv node `node`; *len = 0 for plain NCHW.
     * Called by the backend's create. NULL: every recv node plain. */
    int (*recv_layout)(void *ctx, int node, const void **desc, size_t *len);
    void *recv_layout_ctx;
    so_init_scheme init;         /* parameter initialisation (0: SO_INIT_TORCH) */
    /* 1: the parameters and buffers are left unset (only the dropout stream
     * is seeded): the caller fills every value before using the model, as
     * --init-from's loaders do (GPT-2 124M's random init costs seconds). */
    int skip_init;
    /* > 0: dense layers with more weights than this many bytes run in chunks
     * of output rows of about this size (so_graph_dense_chunks), each chunk
     * reading and writing only its rows of the parameters and gradients (a
     * sharded strategy's units finer than a layer); ignored by a backend
     * without dense_chunk. */
    size_t chunk_bytes;
    /* SO_PRECISION_BF16 needs the onednn backend and so_cpu_has_bf16();
     * so_model_create_opts refuses it otherwise (SO_EINVAL). */
    so_precision precision;
    /* 1: batch norm will run with statistics over ranks (so_model.bn_allsum,
     * --sync-bn). Its sums are FP32 loops, so under BF16 the onednn backend
     * keeps the tensors around batch norm FP32; a bn_allsum set on a model
     * created without it fails at the first training forward (SO_EUNSUP). */
    int sync_bn;
} so_model_opts;

typedef struct so_model {
    so_graph *g;                 /* owned */
    int batch;                   /* samples per forward (backend buffers are sized for it) */
    float *params, *grads, *bufs;
    size_t nparams, nbufs;
    int accumulate_grads;        /* backward adds into grads instead of overwriting */
    so_rng rng;                  /* dropout masks */
    float loss;                  /* mean loss of the last training/eval forward */
    int nvalid;                  /* valid samples in the last forward (<= batch) */
    const struct so_backend_ops *be;
    void *bs;                    /* backend state */
    so_conv_algo conv_algo;      /* read by the backend's create */
    so_grad_ready_fn on_grad;
    void *on_grad_arg;
    int timing;                  /* > 0: accumulate per-node times below (a count of users) */
    double *t_fwd, *t_bwd;       /* seconds per node, summed while timing */
    so_node_span_fn on_node;     /* per-node spans (NULL: off, costs one branch per node) */
    void *on_node_arg;
    so_allsum_fn bn_allsum;      /* synchronised batchnorm (NULL: off) */
    int sync_bn;                 /* from so_model_opts: bn_allsum may be set */
    void *bn_allsum_arg;
    void (*grads_free)(void *ctx, void *p); /* from so_model_opts (NULL: so_free) */
    void *grads_ctx;
    void (*params_free)(void *ctx, void *p); /* from so_model_opts (NULL: so_free) */
    void *params_ctx;
    so_node_hooks hooks;         /* so_model_set_node_hooks (members NULL: none) */
    int (*recv_layout)(void *ctx, int node, const void **desc, size_t *len); /* from so_model_opts */
    void *recv_layout_ctx;
    void **slots;                /* backend states of so_model_set_slots (slots[0] is the first bs) */
    int nslots;
    int decode_pos;              /* so_model_decode: the position of the tokens being fed (-1: off) */
    so_init_scheme init;         /* from so_model_opts; so_model_init_params uses it */
    int *chunks;                 /* per node: the row chunks it runs in (so_model_opts.chunk_bytes); NULL: whole */
    so_precision precision;      /* from so_model_opts: what the backend computes conv/dense/linear/attention in */
    struct so_buf_place *grad_places;  /* so_model_place_grads: gradient ranges written outside m->grads */
    int ngrad_places;
    struct so_buf_place *param_places; /* so_model_place_params: parameter ranges read outside m->params */
    int nparam_places;
} so_model;

/* A range of a flat buffer kept elsewhere: elements [lo, hi) are at
 * where[0 .. hi - lo). */
typedef struct so_buf_place {
    size_t lo, hi;
    float *where;
} so_buf_place;

/* Takes ownership of the finalized graph `g` (destroyed on failure too),
 * allocates the buffers, initialises parameters from `seed` (PyTorch's
 * scheme, SO_INIT_TORCH; batchnorm running var 1) and creates the backend
 * ("ref" or "onednn") for `batch` samples. */
int so_model_create(so_graph *g, const char *backend, int batch, uint64_t seed, so_model **out);
/* The same with every option (so_model_create = conv_algo AUTO). */
int so_model_create_opts(so_graph *g, const so_model_opts *o, so_model **out);
void so_model_destroy(so_model *m);

/* Re-initialises parameters and state; per-tensor RNG streams, so the result
 * depends only on the seed and the tensor's node index. */
void so_model_init_params(so_model *m, uint64_t seed);
/* The same into caller buffers for a graph without a model (so_graph_nparams
 * and so_graph_nbufs floats): a pipeline stage takes its slice of the whole
 * model's initial values, so every partition starts where one process does. */
void so_graph_init_params(const so_graph *g, uint64_t seed, float *params, float *bufs);
/* The same with a scheme other than SO_INIT_TORCH. */
void so_graph_init_params_with(const so_graph *g, so_init_scheme scheme, uint64_t seed, float *params, float *bufs);

/* Micro-batches in flight (pipeline schedules): n backend states over the
 * same parameters, gradients and running statistics, each holding one
 * micro-batch's activations. so_model_use_slot(m, k) makes state k the one
 * forward and backward run on. n >= 1; slot 0 is the model's own state. */
int so_model_set_slots(so_model *m, int n);
void so_model_use_slot(so_model *m, int k);
/* Binds the plain buffers of a recv or send node of the current slot
 * (so_backend_ops.bind_edge). */
int so_model_bind_edge(so_model *m, int node, float *data, float *grad);
/* Activation memory: the backend buffers of every slot (so_backend_ops.state_bytes). */
size_t so_model_activation_bytes(const so_model *m);
/* Bytes a recv or send node's buffers hold (the batch in the backend's layout). */
size_t so_model_edge_bytes(so_model *m, int node);
/* A send node's layout description for the receiving stage (see
 * so_model_opts.recv_layout); returns its size (0: plain NCHW). */
size_t so_model_edge_layout(so_model *m, int node, void *buf, size_t len);

/* x: n samples of the input shape, NCHW float; y: n labels in [0, classes) or
 * NULL (no loss). n <= batch; missing samples are treated as zeros and not
 * counted in the loss. training selects batch statistics and dropout.
 * A token model (so_graph_takes_tokens) reads x as n x T token ids, whole
 * numbers in [0, vocab), and y as n x T targets (so_graph_targets) in
 * [0, vocab) or -1 (not counted): the mean is over the counted targets.
 * Out-of-range labels, targets or tokens are SO_EINVAL naming the position. */
int so_model_forward(so_model *m, const float *x, const int32_t *y, int n, int training);

/* Backward of the last training forward: writes (or adds, see
 * accumulate_grads) the gradient of the mean loss into m->grads. */
int so_model_backward(so_model *m);

/* The same in parts, for a pipeline device that runs its chunks (node
 * ranges [lo, hi)) at different times: set_input once per micro-batch,
 * before the first chunk's forward (labels for a loss in any later chunk),
 * then forward_nodes per chunk in order and backward_nodes per chunk in
 * reverse. A node range's gradients are written or added as
 * accumulate_grads says when its backward runs. */
int so_model_set_input(so_model *m, const float *x, const int32_t *y, int n);
int so_model_forward_nodes(so_model *m, int lo, int hi, int training);
int so_model_backward_nodes(so_model *m, int lo, int hi);

/* Generation with a key/value cache (GPT-2): a token model built for
 * sequences of one token, (1, 1, 1), takes n samples' next token at
 * position pos (0, 1, ... up to the context - 1); each attention node keeps
 * every earlier position's keys and values, so a step costs O(pos), not a
 * forward of the whole sequence. Position 0 starts a new sequence. The
 * logits (n x Vp) are then so_model_logits'. Not for training: a backward
 * after it fails. SO_EINVAL when the graph is not such a model or pos is
 * outside [0, context); SO_EUNSUP on a backend without the cache. */
int so_model_decode(so_model *m, const float *tokens, int n, int pos);

/* Logits of the last forward: batch x classes, row-major. */
int so_model_logits(so_model *m, float *out);
/* Number of the first n samples whose argmax logit equals y; with a token
 * loss, of their n x T positions (targets y, row-major) whose argmax over
 * the first so_graph_classes columns equals the target. */
int so_model_correct(so_model *m, const int32_t *y, int n, int *correct);
/* Adds the last forward's scores over its first n samples to an evaluation's
 * sums: [0] correct answers, a token model's counted per sample as the
 * fraction of its T positions right (so sums[0] / sums[1] is the accuracy per
 * target either way), [1] samples, [2] loss x samples. */
int so_model_add_scores(so_model *m, const int32_t *y, int n, double sums[3]);
/* Output of any node, plain NCHW (batch x C x H x W). */
int so_model_node_output(so_model *m, int node, float *out);
/* The precision node `node`'s products run in: BF16 only for the layers
 * the backend converts under --precision bf16 (not attention, not the
 * convolutions and dense chunks it keeps in FP32). */
so_precision so_model_node_precision(const so_model *m, int node);

/* Must be called after parameters or state change outside backward (optimizer
 * step, checkpoint load), so backends drop cached weight reorders. */
void so_model_params_changed(so_model *m);

void so_model_set_grad_ready(so_model *m, so_grad_ready_fn fn, void *arg);
/* The per-node calls before forward and backward (NULL: none). */
void so_model_set_node_hooks(so_model *m, const so_node_hooks *h);

/* A unit's view of the flat buffers: the parameters (and gradients) of
 * nodes [lo, hi) are floats [*off, *off + *n) of m->params (m->grads), in
 * node order. */
void so_model_param_range(const so_model *m, int lo, int hi, size_t *off, size_t *n);
/* The parameters of nodes [lo, hi) changed outside backward (a gathered
 * unit): backends drop what they cached of them. */
void so_model_params_changed_nodes(so_model *m, int lo, int hi);

/* Where backward writes the gradient of parameter `off`: m->grads + off,
 * or inside the memory a strategy placed its range in. Backends take every
 * gradient address from it, at each backward (a placed range holds whole
 * nodes, so a node's slice is contiguous from the address of its first
 * element). */
float *so_model_grads_at(const so_model *m, size_t off);
/* From the next backward on, the gradients of parameters [lo, hi) are
 * written at `where` (NULL: back into m->grads): a strategy that reduces a
 * unit as soon as backward leaves it can reuse one buffer for several units
 * instead of mapping and unmapping the whole gradient's pages. [lo, hi)
 * must hold whole nodes and not overlap a range already placed. */
int so_model_place_grads(so_model *m, size_t lo, size_t hi, float *where);
/* The same for parameters: where backends read parameter `off` (forward,
 * backward and the weight copies they cache), and the ranges a strategy
 * gathers into memory of its own (zero3's parameter slots). After placing a
 * range, so_model_params_changed_nodes for its nodes. */
float *so_model_params_at(const so_model *m, size_t off);
int so_model_place_params(so_model *m, size_t lo, size_t hi, float *where);

/* The kernels convolution `node` runs (see so_conv_kernels); SO_EINVAL if
 * the node is not a convolution. */
int so_model_conv_kernels(so_model *m, int node, so_conv_kernels *out);

#endif
