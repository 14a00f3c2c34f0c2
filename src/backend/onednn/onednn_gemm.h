/* scaleout's own single-precision GEMM for the linear layers of the
 * sequence models (GPT-2). On their shapes oneDNN 2.6's gemm:jit runs about
 * as fast except where it collapses (dY W for (256 x 3072) x (3072 x 768),
 * MLP's backward data: 45% of the FMA peak against this one's 82%), and this
 * one adds the bias in its store and gives the same bits whatever the
 * thread count (docs/TRANSFORMERS.md). BLIS's structure: operands packed into
 * micro-panels (MR rows of A, NR columns of B, KC deep) and an MR x NR
 * register-tiled micro-kernel; blocks of KC x NC of B stay in L3 and MC x KC
 * of A in L2. Written once (onednn_gemm_body.h) and built for AVX2+FMA (6 x
 * 16) and AVX-512 (12 x 32); below AVX2 the linear layers run oneDNN's
 * matmul instead. Threads take disjoint column (or row) ranges of C, each
 * with its own packing buffers: no barriers, and the same result whatever
 * the thread count (every element is summed in the same order). */
#ifndef SO_ONEDNN_GEMM_H
#define SO_ONEDNN_GEMM_H
#include <stddef.h>

/* op(A) is M x K: A[i lda + k] (ta 0) or A[k lda + i] (ta 1); op(B) is
 * K x N: B[k ldb + j] (tb 0) or B[j ldb + k] (tb 1). C is M x N with row
 * stride ldc. */
typedef struct {
    int ta, tb;
    int M, N, K;
    const float *A, *B;
    int lda, ldb;
    float *C;
    int ldc;
    int add;                     /* C += op(A) op(B) instead of = */
    const float *bias;           /* N floats added to every row (with add 0), or NULL */
} od_gemm_args;

typedef struct {
    const char *name;            /* "scaleout:avx2" */
    int mr, nr, kc, mc, nc;      /* register tile and cache blocks */
    /* dst = the MR-row micro-panels of rows [0, m) x k-range [0, k) of op(A),
     * zero-padded to a multiple of MR rows. */
    void (*pack_a)(const float *a, int lda, int ta, int m, int k, float *dst);
    /* dst = the NR-column micro-panels of op(B)'s k x n block, zero-padded. */
    void (*pack_b)(const float *b, int ldb, int tb, int k, int n, float *dst);
    /* C tile (MR x NR, row stride ldc) = [C +] init + A_panel B_panel over k:
     * add selects += ; init (NR floats, or NULL) seeds every row. */
    void (*micro)(int k, const float *a, const float *b, float *c, int ldc, int add, const float *init);
} od_gemm_kernels;

extern const od_gemm_kernels od_gemm_avx2, od_gemm_avx512;

/* The instance so_cpu_isa() allows, or NULL below AVX2. */
const od_gemm_kernels *od_gemm_pick(void);
/* Floats of packing buffer one thread needs (A block + B block). */
size_t od_gemm_work(const od_gemm_kernels *k);
/* Threads od_gemm runs g on when given nthr: 1 when the split side has
 * fewer than two register tiles per thread. */
int od_gemm_threads(const od_gemm_kernels *k, const od_gemm_args *g, int nthr);
/* part = the sub-product thread t of nt computes: g on a disjoint range of
 * C's columns (or rows, when C has more row tiles than column tiles), whole
 * units of NR (MR), the shared operand whole. Returns 0 when the range is
 * empty. (gemm_bench times the parts alone with it.) */
int od_gemm_part(const od_gemm_kernels *k, const od_gemm_args *g, int t, int nt, od_gemm_args *part);
/* Runs the product on up to nthr threads (the caller's OpenMP team);
 * work: nthr x od_gemm_work floats, 64-byte aligned. */
void od_gemm(const od_gemm_kernels *k, const od_gemm_args *g, float *work, int nthr);

#endif
