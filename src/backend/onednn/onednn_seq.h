/* Private interface of scaleout's own kernels for the sequence ops (GPT-2),
 * which oneDNN 2.6 does not have or cannot fuse: causal attention with an
 * online softmax (flash-attention style, no T x T matrix), LayerNorm, GELU,
 * the token embedding and the softmax cross-entropy over the vocabulary.
 * Written once (onednn_seq_body.h) over a few vector operations and built
 * per ISA: onednn_seq_avx512.c, onednn_seq_avx2.c, onednn_seq_scalar.c (the
 * portable baseline); od_seq_pick() chooses by so_cpu_isa(). The glue and
 * the threading are onednn_seq.c; every kernel here runs on one thread. */
#ifndef SO_ONEDNN_SEQ_H
#define SO_ONEDNN_SEQ_H
#include <stddef.h>

/* One attention node: qkv (B, T, 3C) with head h's q, k, v at columns
 * h*hs, C + h*hs, 2C + h*hs; y (B, T, C); lse (B, H, T) the rows'
 * log-sum-exp kept for backward; dy, dqkv their diffs. */
typedef struct {
    const float *qkv;
    float *y, *lse;
    const float *dy;
    float *dqkv;                 /* backward adds into it (zeroed by the caller) */
    int T, C, H, hs;
    float scale;                 /* 1 / sqrt(hs) */
} od_attn_args;

/* Rows per query block and the most keys per key block of any instance. */
#define OD_ATT_BR 4
#define OD_ATT_BC_MAX 32

typedef struct {
    const char *name;            /* "scaleout:avx2", for reports */
    int vl;                      /* floats per vector (1: scalar) */
    /* y[r] = wte[tok[r]] + wpe[r % T] for rows [r0, r1) of width C. */
    void (*embed_fwd)(const float *tok, const float *wte, const float *wpe, float *y, size_t r0, size_t r1, int T,
                      int C);
    /* Columns [c0, c1) of: dwte[tok[r]] += dy[r], dwpe[r % T] += dy[r] over rows [0, rows). */
    void (*embed_bwd)(const float *tok, const float *dy, float *dwte, float *dwpe, size_t rows, int T, int C, int c0,
                      int c1);
    /* LayerNorm of rows [r0, r1): y = (x - mean) rstd w + b; stats[2r] = mean, stats[2r+1] = rstd. */
    void (*ln_fwd)(const float *x, const float *w, const float *b, float *y, float *stats, size_t r0, size_t r1,
                   int C, float eps);
    /* Its backward for rows [r0, r1): dx written (add 0) or added (add 1);
     * dw, db (C each) += this block's sums. */
    void (*ln_bwd)(const float *x, const float *w, const float *stats, const float *dy, float *dx, int add,
                   float *dw, float *db, size_t r0, size_t r1, int C);
    /* GELU, tanh form: y = gelu(x); dx (=, or += when add) dy gelu'(x). */
    void (*gelu_fwd)(const float *x, float *y, size_t n);
    void (*gelu_bwd)(const float *x, const float *dy, float *dx, size_t n, int add);
    /* acc[c] += sum over rows [r0, r1) of x[r][c], c < n (bias gradients). */
    void (*col_sums)(const float *x, size_t r0, size_t r1, int n, float *acc);
    /* Attention of sample b, head h; scratch of od_attn_scratch floats. */
    void (*attn_fwd)(const od_attn_args *a, int b, int h, float *scratch);
    void (*attn_bwd)(const od_attn_args *a, int b, int h, float *scratch);
    /* Decoding: query q (hs) against n cached positions (keys at k + t
     * stride, values at v + t stride): out (hs) = softmax(scale q.k) v;
     * scores: n floats of scratch. */
    void (*attn_decode)(const float *q, const float *k, const float *v, size_t stride, int n, int hs, float scale,
                        float *scores, float *out);
    /* log sum exp of z[0..V). */
    float (*xent_lse)(const float *z, int V);
    /* In place: z[c] = (exp(z[c] - lse) - [c == y]) * scale for c < V, 0 for V <= c < Vp. */
    void (*xent_grad)(float *z, int V, int Vp, float lse, int y, float scale);
} od_seq_kernels;

extern const od_seq_kernels od_seq_avx512, od_seq_avx2, od_seq_scalar;

/* The widest instance so_cpu_isa() allows. */
const od_seq_kernels *od_seq_pick(void);
/* The instance attention of head size hs runs on: vector ones need hs a
 * multiple of their width (GPT-2's 64 is), else the scalar one. */
const od_seq_kernels *od_seq_attn_pick(int hs);
/* Floats of one thread's attention scratch for T positions of head size hs. */
size_t od_attn_scratch(int T, int hs);

#endif
