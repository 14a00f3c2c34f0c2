/* Private state and helpers of the reference backend: plain NCHW float
 * buffers per node and one forward/backward kernel pair per op. Every kernel
 * is written for obvious correctness; the fast backend is tested against it. */
#ifndef SCALEOUT_REF_INTERNAL_H
#define SCALEOUT_REF_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "scaleout/backend.h"
#include "scaleout/graph.h"
#include "scaleout/model.h"

typedef struct ref_state {
    so_model *m;
    const so_graph *g;
    int batch;        /* samples every buffer holds */
    int n;            /* valid samples of the last set_input (n <= batch) */
    int training;     /* mode of the last forward: backward follows it */
    float **act;      /* act[i]: output of node i, (batch,C,H,W); act[0] is the input */
    float **diff;     /* diff[i]: d loss / d act[i], same shape; NULL for node 0 */
    float **aux;      /* dropout: kept-unit scales (batch,C,H,W); batchnorm: [mean C][invstd C];
                         layernorm: (mean, rstd) per row; attention: per (sample, head) T
                         log-sum-exps and a row of T scores */
    int32_t **argmax; /* maxpool: input plane index (ih*W+iw) of each output's max, (batch,C,OH,OW) */
    int32_t *labels;  /* (batch) or (batch, T) for a token loss; rows >= n are 0 and ignored */
    float **edge_data, **edge_grad; /* recv/send nodes: the bound plain buffers (bind_edge) */
    float *acc_scratch[SO_MAX_INPUTS]; /* a consumer's diff term before it is added (ref_backward) */
    float **kv;       /* attention nodes while decoding (so_model_decode): (batch, context, 2C) keys, values */
} ref_state;

/* Multiply-adds below which a kernel stays serial: a parallel region costs
 * microseconds (more when the cores are shared), tiny test layers far less. */
#define REF_PAR_WORK 200000.0

/* One kernel pair per op; forward gets the mode, backward follows the last forward. */
typedef int (*ref_fwd_fn)(ref_state *s, int node, int training);
typedef int (*ref_bwd_fn)(ref_state *s, int node);

static inline size_t ref_numel(so_shape sh) { return (size_t)sh.c * (size_t)sh.h * (size_t)sh.w; }
static inline const so_node *ref_node(const ref_state *s, int i) { return so_graph_node(s->g, i); }
static inline so_shape ref_in_shape(const ref_state *s, int i, int slot)
{
    return ref_node(s, ref_node(s, i)->inputs[slot])->out;
}
/* Activation of node i's input `slot`, (batch, C, H, W). */
static inline const float *ref_in(const ref_state *s, int i, int slot)
{
    return s->act[ref_node(s, i)->inputs[slot]];
}
static inline float *ref_params(const ref_state *s, int i) { return so_model_params_at(s->m, ref_node(s, i)->param_off); }

/* Diff buffer of node i's input `slot` ready for `+=`: zeroed when node i is
 * the first writer in backward order, kept when another consumer already
 * wrote it. NULL when the input needs no diff (it is the graph input). Making
 * every kernel accumulate keeps write and add modes one code path. */
float *ref_dx(ref_state *s, int i, int slot);
/* Gradient slice of node i ready for `+=`: zeroed unless m->accumulate_grads. */
float *ref_dw(ref_state *s, int i);

/* Range [lo, hi) of output positions o (0 <= o < out) whose input position
 * o*stride - pad + k lies inside [0, in): lets window loops run branch-free. */
static inline void ref_span(int in, int out, int stride, int pad, int k, int *lo, int *hi)
{
    int a = pad - k, b = in - 1 + pad - k; /* need a <= o*stride <= b */
    *lo = a > 0 ? (a + stride - 1) / stride : 0;
    *hi = b < 0 ? 0 : b / stride + 1;
    if (*hi > out)
        *hi = out;
    if (*lo > *hi)
        *lo = *hi;
}

/* ref_act.c: the fused ReLU of conv/dense/batchnorm/add. */
void ref_relu_inplace(float *y, size_t n);
/* dy *= (y > 0), in place: y is the fused op's output (after the ReLU). */
void ref_relu_mask(const float *y, float *dy, size_t n);
/* Applies the mask above when node i has a fused ReLU; returns node i's output diff. */
float *ref_out_diff(ref_state *s, int i);

int ref_recv_forward(ref_state *s, int i, int training);
int ref_recv_backward(ref_state *s, int i);
int ref_send_forward(ref_state *s, int i, int training);
int ref_send_backward(ref_state *s, int i);
int ref_conv_forward(ref_state *s, int i, int training);
int ref_conv_backward(ref_state *s, int i);
int ref_dense_forward(ref_state *s, int i, int training);
int ref_dense_backward(ref_state *s, int i);
/* so_backend_ops.dense_chunk: rows [r0, r1) of chunk k of s->m->chunks[i]. */
int ref_dense_chunk(ref_state *s, int i, int k, int r0, int r1, int backward);
int ref_maxpool_forward(ref_state *s, int i, int training);
int ref_maxpool_backward(ref_state *s, int i);
int ref_avgpool_forward(ref_state *s, int i, int training);
int ref_avgpool_backward(ref_state *s, int i);
int ref_gap_forward(ref_state *s, int i, int training);
int ref_gap_backward(ref_state *s, int i);
int ref_bn_forward(ref_state *s, int i, int training);
int ref_bn_backward(ref_state *s, int i);
int ref_relu_forward(ref_state *s, int i, int training);
int ref_relu_backward(ref_state *s, int i);
int ref_tanh_forward(ref_state *s, int i, int training);
int ref_tanh_backward(ref_state *s, int i);
int ref_sigmoid_forward(ref_state *s, int i, int training);
int ref_sigmoid_backward(ref_state *s, int i);
int ref_dropout_forward(ref_state *s, int i, int training);
int ref_dropout_backward(ref_state *s, int i);
int ref_flatten_forward(ref_state *s, int i, int training);
int ref_flatten_backward(ref_state *s, int i);
int ref_add_forward(ref_state *s, int i, int training);
int ref_add_backward(ref_state *s, int i);
int ref_concat_forward(ref_state *s, int i, int training);
int ref_concat_backward(ref_state *s, int i);
int ref_loss_forward(ref_state *s, int i, int training);
int ref_loss_backward(ref_state *s, int i);
/* ref_seq.c: the sequence ops (GPT-2). */
int ref_embed_forward(ref_state *s, int i, int training);
int ref_embed_backward(ref_state *s, int i);
int ref_layernorm_forward(ref_state *s, int i, int training);
int ref_layernorm_backward(ref_state *s, int i);
int ref_linear_forward(ref_state *s, int i, int training);
int ref_linear_backward(ref_state *s, int i);
int ref_attention_forward(ref_state *s, int i, int training);
int ref_attention_backward(ref_state *s, int i);
int ref_gelu_forward(ref_state *s, int i, int training);
int ref_gelu_backward(ref_state *s, int i);
int ref_token_loss_forward(ref_state *s, int i, int training);
int ref_token_loss_backward(ref_state *s, int i);

#endif
