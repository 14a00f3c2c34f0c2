/* The model graph: a small DAG of typed nodes, each producing one activation
 * tensor. Node 0 is the input; inputs refer to earlier nodes by index, so the
 * node order is a topological order and ResNet/Inception blocks need no special
 * cases. The graph knows shapes, parameter layout and FLOPs, but no kernels:
 * the backends (ref, onednn) execute it. */
#ifndef SCALEOUT_GRAPH_H
#define SCALEOUT_GRAPH_H
#include <stddef.h>
#include <stdint.h>

#define SO_MAX_INPUTS 8
#define SO_NAME_LEN 48

typedef enum {
    SO_OP_INPUT,
    SO_OP_DENSE,     /* fully connected on the flattened input (PyTorch Linear) */
    SO_OP_CONV,      /* 2-D convolution, groups allowed (PyTorch Conv2d) */
    SO_OP_MAXPOOL,
    SO_OP_AVGPOOL,   /* padding excluded from the divisor is NOT used: count_include_pad=True as PyTorch's default */
    SO_OP_GAP,       /* global average pool: (C,H,W) -> (C,1,1) */
    SO_OP_RELU,
    SO_OP_TANH,
    SO_OP_SIGMOID,
    SO_OP_BATCHNORM, /* per-channel, training statistics / running averages in eval */
    SO_OP_DROPOUT,   /* inverted dropout: scales kept units by 1/(1-p) in training */
    SO_OP_FLATTEN,   /* (C,H,W) -> (C*H*W,1,1) in C,H,W order */
    SO_OP_ADD,       /* elementwise sum of 2+ inputs of equal shape */
    SO_OP_CONCAT,    /* along channels */
    SO_OP_SOFTMAX_XENT, /* mean softmax cross-entropy over the batch; input = logits (K,1,1) */
    /* Pipeline stage edges (src/pipe/stage.c builds such graphs): */
    SO_OP_RECV,      /* no inputs: a tensor another stage sends (a.shape); its diff goes back there */
    SO_OP_SEND,      /* one input, sent to another stage; its diff comes back from there */
    /* Sequence ops (transformers). A sequence of T vectors of C features is
     * the per-sample shape (1, T, C), so plain NCHW is (batch, T, C) row-major
     * with each token's features contiguous; token ids enter as an input of
     * shape (1, T, 1) holding exact integers as floats. */
    SO_OP_EMBED,     /* tokens (1,T,1) -> (1,T,out): wte[token] + wpe[t]; T <= ctx */
    SO_OP_LAYERNORM, /* over the last dimension (w), with weight and bias (PyTorch LayerNorm) */
    SO_OP_LINEAR,    /* PyTorch Linear on the last dimension: (c,h,w) -> (c,h,out); weight (out,w) or tied */
    SO_OP_ATTENTION, /* causal multi-head self-attention: qkv (1,T,3C) -> (1,T,C), `heads` heads */
    SO_OP_GELU,      /* GELU, tanh approximation (GPT-2's) */
    SO_OP_TOKEN_XENT,/* mean softmax cross-entropy over every token: logits (1,T,Vp), one target per
                        token, columns >= vocab (padding) ignored; target -1 = not counted */
    SO_OP_COUNT
} so_op;

/* Per-sample shape: batch is not part of it. Vectors are (n,1,1). */
typedef struct { int c, h, w; } so_shape;

/* Attributes; each op reads only its own fields (see so_op comments). */
typedef struct {
    int out;            /* dense: output features; conv: output channels */
    int kh, kw;         /* conv, pools: kernel */
    int sh, sw;         /* conv, pools: stride */
    int ph, pw;         /* conv, pools: zero padding (symmetric) */
    int groups;         /* conv: groups (1 = dense convolution) */
    int bias;           /* dense, conv: has a bias vector */
    int relu;           /* conv, dense, batchnorm, add: ReLU fused on the output
                           (set by so_graph_fuse, not by model builders) */
    float eps;          /* batchnorm: variance epsilon (PyTorch 1e-5) */
    float momentum;     /* batchnorm: running average factor (PyTorch 0.1) */
    float p;            /* dropout: drop probability in [0,1) */
    so_shape shape;     /* recv: the per-sample shape of the tensor received */
    int heads;          /* attention: heads (C divisible by heads) */
    int vocab;          /* embed: rows of the token table (the padded vocabulary);
                           token_xent: the classes counted (columns >= vocab are padding) */
    int ctx;            /* embed: rows of the position table, the context (T <= ctx) */
    int tie;            /* linear: > 0 reads its weight from that embed node's token table
                           (weight tying: the gradient adds into the one tensor); 0: its own */
    float init_std;     /* embed, linear: weights drawn from N(0, init_std^2); 0: He/Glorot */
} so_attrs;

typedef struct {
    so_op op;
    char name[SO_NAME_LEN];      /* PyTorch-style module path, e.g. "layer1.0.conv1" */
    int inputs[SO_MAX_INPUTS];
    int ninputs;
    so_attrs a;
    so_shape out;                /* per-sample output shape */
    size_t param_off, nparam;    /* slice of the model's flat parameter (and gradient) buffer */
    size_t buf_off, nbuf;        /* slice of the flat non-trained state (batchnorm running stats) */
} so_node;

/* One named parameter or state tensor of a node, for init, export and checkpoints.
 * Layouts are PyTorch's: conv weight OIHW, dense weight (out,in), vectors (C). */
typedef struct {
    const char *suffix;   /* "weight", "bias", "running_mean", "running_var" */
    int is_buffer;        /* 1: lives in the state buffer, not the parameters */
    size_t off, count;    /* absolute offset in params (or state buffer) and element count */
    int ndim;
    int64_t dims[4];
    int fan_in, fan_out;  /* for He/Glorot initialisation (weights only) */
    float init_std;       /* > 0: initialised from N(0, init_std^2) instead (GPT-2's weights) */
} so_tensor_desc;

typedef struct so_graph so_graph;

/* Creates a graph whose node 0 is an input of shape (c,h,w). NULL on ENOMEM. */
so_graph *so_graph_create(int c, int h, int w);
void so_graph_destroy(so_graph *g);

/* Appends a node; returns its index (>0) or a negative error. Errors are sticky:
 * after the first failure every later add fails with the same code, and
 * so_graph_finalize reports it, so builders can chain calls without checks.
 * Shape inference and validation happen here. */
int so_graph_add(so_graph *g, so_op op, const char *name, const int *inputs, int ninputs,
                 const so_attrs *a);

/* Builder shorthands (name may be NULL; inputs are node indices). */
int so_g_conv(so_graph *g, int in, const char *name, int out, int k, int stride, int pad, int bias);
int so_g_conv_grouped(so_graph *g, int in, const char *name, int out, int k, int stride, int pad,
                      int groups, int bias);
int so_g_dense(so_graph *g, int in, const char *name, int out);
int so_g_bn(so_graph *g, int in, const char *name);
int so_g_relu(so_graph *g, int in);
int so_g_tanh(so_graph *g, int in);
int so_g_sigmoid(so_graph *g, int in);
int so_g_maxpool(so_graph *g, int in, int k, int stride, int pad);
int so_g_avgpool(so_graph *g, int in, int k, int stride, int pad);
int so_g_gap(so_graph *g, int in);
int so_g_dropout(so_graph *g, int in, float p);
int so_g_flatten(so_graph *g, int in);
int so_g_add(so_graph *g, int a, int b);
int so_g_concat(so_graph *g, const int *in, int n);
int so_g_loss(so_graph *g, int logits);
int so_g_recv(so_graph *g, const char *name, so_shape shape);
int so_g_send(so_graph *g, int in, const char *name);
/* Sequence ops (shapes in so_op). embed: tokens -> (1,T,c) with a token
 * table of `vocab` rows and a position table of `ctx` rows; linear: bias
 * 0/1, tie = the embed node whose token table is its weight (0: own). */
int so_g_embed(so_graph *g, int tokens, const char *name, int c, int vocab, int ctx, float init_std);
int so_g_layernorm(so_graph *g, int in, const char *name);
int so_g_linear(so_graph *g, int in, const char *name, int out, int bias, int tie, float init_std);
int so_g_attention(so_graph *g, int qkv, const char *name, int heads);
int so_g_gelu(so_graph *g, int in, const char *name);
int so_g_token_loss(so_graph *g, int logits, int vocab);

/* Folds each ReLU into its producer (conv, dense, batchnorm, add) when the
 * producer has no other consumer: the producer gets a.relu = 1, the ReLU node is
 * removed and its consumers re-pointed. Exact (the same function), and it saves
 * one pass over memory per ReLU. Call before finalize. */
int so_graph_fuse(so_graph *g);

/* Checks the graph ends in a loss node (or, a pipeline stage's graph, in
 * send nodes), assigns parameter/state offsets.
 * Returns the first sticky error or 0. No more adds afterwards. */
int so_graph_finalize(so_graph *g);

int so_graph_size(const so_graph *g);
const so_node *so_graph_node(const so_graph *g, int i);
size_t so_graph_nparams(const so_graph *g);
size_t so_graph_nbufs(const so_graph *g);
/* Row chunks a dense node is computed in when a sharded strategy wants units
 * of about chunk_bytes (--shard-unit N): ceil(weight bytes / chunk_bytes),
 * at most its output rows; 1 for any other node or chunk_bytes 0. Chunk k
 * holds weight rows [r0, r1) (so_graph_chunk_rows), the flat range
 * [param_off + r0*in, param_off + r1*in), and the last chunk the bias too. */
int so_graph_dense_chunks(const so_graph *g, int node, size_t chunk_bytes);
/* Rows [*r0, *r1) of chunk k of K over `out` rows (the first out % K one
 * row longer), and the flat parameter range [*lo, *hi) of that chunk. */
void so_graph_chunk_rows(const so_graph *g, int node, int K, int k, int *r0, int *r1, size_t *lo, size_t *hi);
/* Index of the loss node's input (the logits), or -1 (no loss node). */
int so_graph_logits(const so_graph *g);
/* Number of classes = logits' channel count (token_xent: its vocab). */
int so_graph_classes(const so_graph *g);
/* Targets (labels) per sample: 1 for a classifier, T for a token loss,
 * whose labels are (batch, T) row-major: the next token of every position. */
int so_graph_targets(const so_graph *g);
/* The linear node whose weight is node i's token table (weight tying), or 0. */
int so_graph_tied_by(const so_graph *g, int i);
/* 1 if the graph's input holds token ids (it feeds an embed node). */
int so_graph_takes_tokens(const so_graph *g);
/* The context of a token model (its embedding's positions), 0 without one. */
int so_graph_context(const so_graph *g);
/* The flat-buffer ranges of the parameter tensors of 2 or more dimensions
 * (matrices, convolution kernels, embeddings), adjacent ones merged:
 * (*lohi)[2r], (*lohi)[2r+1] for r < *n, malloc'ed. Weight decay's usual
 * mask (nanoGPT, llm.c: not on biases and normalisation scales). */
int so_graph_decay_ranges(const so_graph *g, size_t **lohi, int *n);
so_shape so_graph_input_shape(const so_graph *g);

/* Forward FLOPs per sample (multiply-add = 2 FLOPs) of node i / the whole graph. */
double so_node_flops(const so_graph *g, int i);
double so_graph_flops(const so_graph *g);

/* Parameter and state tensors of node i: fills up to 4 descs, returns how many. */
int so_node_tensors(const so_graph *g, int i, so_tensor_desc out[4]);

/* For backward: 1 if the diff of node i's input `slot` must be ADDED to what an
 * already-run backward wrote (the tensor has another consumer that runs earlier
 * in backward order: a higher node index, or a higher slot of the same node);
 * 0 if node i writes it first. Backends process slots in descending order. */
int so_graph_diff_accumulate(const so_graph *g, int i, int slot);
/* 1 if node i's input `slot` needs a diff at all (it is not the graph input). */
int so_graph_needs_diff(const so_graph *g, int i, int slot);

const char *so_op_name(so_op op);

/* What `--init torch` means for this graph (scaleout/model.h): PyTorch's
 * module defaults, or the torchvision model's own initialisation where its
 * constructor overrides them (ResNet: conv weights kaiming_normal fan_out;
 * VGG: the same with zero conv biases and Linear N(0, 0.01), zero biases).
 * The zoo's builders set it; new graphs have SO_TORCH_INIT_MODULES. */
typedef enum { SO_TORCH_INIT_MODULES, SO_TORCH_INIT_RESNET, SO_TORCH_INIT_VGG } so_torch_init;
void so_graph_set_torch_init(so_graph *g, so_torch_init how);
so_torch_init so_graph_torch_init(const so_graph *g);

#endif
