/* The linear layer in BF16 (--precision bf16, onednn_linear_bf16.c): the
 * three products of onednn_linear.c as oneDNN bf16 matmuls (BF16 X, W and
 * dY, FP32 accumulation, FP32 Y, dX and dW). The FP32 master weights stay in
 * m->params and the gradients in m->grads; the BF16 weight copy and the BF16
 * input kept for backward live in the op's own struct. */
#ifndef SO_ONEDNN_LINEAR_BF16_H
#define SO_ONEDNN_LINEAR_BF16_H
#include <stdint.h>

#include "backend/onednn/onednn_internal.h"

typedef struct od_linear_bf16 od_linear_bf16;

/* What the BF16 op reads and writes, in the flat FP32 buffers. dx is NULL
 * when the input needs no diff; bias NULL when the layer has none. */
typedef struct {
    int64_t R, K, N;
    const float *x;              /* input (R,K) */
    size_t w_off, bias_off;      /* weights (N,K), bias (N): so_model_params_at, at each use */
    int has_bias;
    float *y;                    /* output (R,N) */
    const float *dy;             /* output diff (R,N) */
    float *dx;                   /* input diff (R,K) */
    size_t dw_off;               /* the weight gradient (N,K): so_model_grads_at, at each backward */
    int dx_add;                  /* dX += (another consumer wrote it first) */
} od_linear_bf16_io;

/* A matmul primitive src x weights (+ bias) -> dst, dst += when sum
 * (onednn_linear.c, shared with the FP32 path). */
int od_linear_matmul(od_state *s, int node, const char *what, const dnnl_memory_desc_t *src,
                     const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst,
                     int sum, od_prim *out);

int od_linear_bf16_create(od_state *s, int node, const od_linear_bf16_io *io, od_linear_bf16 **out);
int od_linear_bf16_forward(od_state *s, int node, od_linear_bf16 *b);
/* dX (when wanted) and dW (+= under m->accumulate_grads); the bias gradient
 * is the caller's (column sums of the FP32 dY). */
int od_linear_bf16_backward(od_state *s, int node, od_linear_bf16 *b);
/* The parameters changed: the BF16 weight copy is rebuilt at the next forward. */
void od_linear_bf16_invalidate(od_linear_bf16 *b);
void od_linear_bf16_destroy(od_linear_bf16 *b);
/* How many times the process's BF16 linear layers converted their weights
 * (the forward's copy and the backward's each count one): tests check that
 * a copy is rebuilt once per parameter change, not at every pass. */
unsigned long od_linear_bf16_weight_builds(void);
/* dst (N,R) = BF16(src (R,N))^T on the caller's threads (onednn_linear_bf16_avx512.c;
 * AVX-512, which every BF16 CPU has). */
void od_bf16_transpose_avx512(uint16_t *dst, const float *src, int64_t R, int64_t N);

#endif
