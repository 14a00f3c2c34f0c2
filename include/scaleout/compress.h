/* Gradient compression: the methods of `--compress` as pure functions over
 * float buffers (no MPI, no model), so a strategy can run them per gradient
 * bucket inside its collectives and a test can check each one alone.
 *
 *   none          the gradient as it is (4 bytes per value)
 *   fp16, bf16    rounded to 16 bits for the wire, reduced in FP32 per hop
 *   topk:R        the k = round(R n) values of largest magnitude as (index, value)
 *                 pairs, gathered and summed sparsely; dense when k x ranks >= n
 *   randk:R       k values at indices every rank draws from the same seed,
 *                 allreduced; scaled by n/k to be unbiased without error feedback
 *   qsgd:B[:D]    per block of D values (default 512): the block's L2 norm and
 *                 each value's sign and level in 0..2^B-1 of it, rounded
 *                 stochastically (unbiased), B+1 bits per value
 *   sign          one bit per value and one scale, the mean magnitude
 *   powersgd:r[:S] each weight matrix M (rows x cols) as P Q^T of rank r (two
 *                 allreduces: P = M Q, then Q = M^T P), warm-started from the last
 *                 step's Q; matrices where (rows + cols) r 2 >= rows cols, vectors
 *                 and every tensor before step S go uncompressed
 *
 * Messages are arrays of 32-bit words (floats, or indices and packed bits
 * stored in them), so every collective moves them as F32 elements. Every
 * decoder gives the same bits on every CPU (element-wise, no FMA
 * contraction): ranks that add the same messages in the same order hold the
 * same gradient. Formulas and the measured trade-offs: docs/COMPRESSION.md. */
#ifndef SCALEOUT_COMPRESS_H
#define SCALEOUT_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "scaleout/group.h"

typedef enum {
    SO_COMPRESS_NONE,
    SO_COMPRESS_FP16,
    SO_COMPRESS_BF16,
    SO_COMPRESS_TOPK,
    SO_COMPRESS_RANDK,
    SO_COMPRESS_QSGD,
    SO_COMPRESS_SIGN,
    SO_COMPRESS_POWERSGD,
    SO_COMPRESS_AUTO, /* chosen by the caller from predictions (train --compress auto) */
    SO_COMPRESS_METHODS
} so_compress_method;

/* A method with its parameters, as `--compress` spells it. */
typedef struct {
    so_compress_method method;
    double ratio;     /* topk, randk: fraction of the values sent, in (0, 1] */
    int bits;         /* qsgd: level bits B, 1..16 */
    int block;        /* qsgd: values per norm D (>= 1) */
    int rank;         /* powersgd: r >= 1 */
    long start_step;  /* powersgd: steps sent uncompressed first (torch's start_powerSGD_iter) */
} so_compress_spec;

#define SO_QSGD_DEFAULT_BLOCK 512
/* --compress auto weighs at most this many methods (docs/COMPRESSION.md). */
#define SO_COMPRESS_AUTO_MAX 8
#define SO_POWERSGD_DEFAULT_START 10

/* Parses "none", "fp16", "bf16", "topk:R", "randk:R", "qsgd:B[:D]", "sign",
 * "powersgd:r[:S]", "auto". SO_EINVAL with a message naming --compress and
 * the problem (unknown method, a ratio outside (0, 1], B outside 1..16, ...). */
int so_compress_parse(const char *text, so_compress_spec *out);
/* The spec as so_compress_parse reads it ("qsgd:4:512"); returns snprintf's count. */
int so_compress_format(const so_compress_spec *s, char *buf, size_t size);
/* "none", "fp16", ..., "auto". */
const char *so_compress_method_name(so_compress_method m);
/* Whether the method's expected output differs from its input (topk, sign,
 * powersgd; fp16 and bf16 round to nearest): error feedback defaults to on
 * for these and off for the unbiased ones (randk, qsgd) and none. */
int so_compress_biased(const so_compress_spec *s);

/* ---- sizes: the words each rank contributes for a buffer of n values ---------- */

/* topk / randk: k = round(ratio x n), at least 1, at most n. */
size_t so_compress_k(size_t n, double ratio);
/* Top-k sums sparsely while that moves fewer bytes: an allgather of ranks x
 * 2k words against a dense allreduce of n (SparCML's switch: the summed
 * density ranks x k / n reaching 1). */
int so_compress_topk_dense(size_t n, size_t k, int ranks);
/* qsgd: ceil(n / block) norms, then B + 1 bit planes of ceil(n / 32) words. */
size_t so_compress_qsgd_words(size_t n, int bits, int block);
/* sign: one scale, then one bit plane of ceil(n / 32) words. */
size_t so_compress_sign_words(size_t n);
/* powersgd: whether a rows x cols matrix goes compressed at rank r
 * ((rows + cols) r 2 < rows cols, i.e. torch's min_compression_rate 2). */
int so_compress_powersgd_fits(size_t rows, size_t cols, int rank);

/* ---- counter-based random numbers ---------------------------------------------
 * A 32-bit hash of (key, i): the stream needs no state, so a step's draws
 * depend only on (seed, step, bucket, rank) and a resumed run draws the same. */
uint32_t so_compress_hash(uint64_t key, uint32_t i);
/* A key for a purpose: (seed, step, bucket, rank) mixed. */
uint64_t so_compress_key(uint64_t seed, uint64_t step, uint64_t bucket, uint64_t rank);

/* ---- top-k ---------------------------------------------------------------------
 * The k values of g[0..n) of largest magnitude: idx ascending, val their
 * values (ties of magnitude: the lower indices). scratch: at least
 * so_compress_topk_scratch(n) bytes, 64-byte aligned. Returns k. */
size_t so_compress_topk_scratch(size_t n);
size_t so_compress_topk(const float *g, size_t n, size_t k, uint32_t *idx, float *val, void *scratch);
/* dst[idx[j]] += val[j] for j < k (in order). */
void so_compress_sparse_add(float *dst, const uint32_t *idx, const float *val, size_t k);
/* dst[idx[j]] = 0 for j < k: the error-feedback residual of top-k once dst
 * holds the corrected gradient. */
void so_compress_sparse_zero(float *dst, const uint32_t *idx, size_t k);

/* ---- random-k ------------------------------------------------------------------
 * k distinct indices of [0, n) drawn uniformly from key (Floyd's algorithm),
 * ascending. bitmap: ceil(n / 64) words, zero on entry and on return. */
void so_compress_randk_indices(size_t n, size_t k, uint64_t key, uint32_t *idx, uint64_t *bitmap);
/* val[j] = g[idx[j]]. */
void so_compress_gather(float *val, const float *g, const uint32_t *idx, size_t k);
/* dst[idx[j]] = val[j] x scale. */
void so_compress_scatter(float *dst, const uint32_t *idx, const float *val, size_t k, float scale);

/* ---- QSGD ----------------------------------------------------------------------
 * msg (so_compress_qsgd_words) from g[0..n): norms, then the level bits B-1..0
 * planes and the sign plane. Level l of value x in a block of norm N is
 * floor(|x| s / N) or one more with probability the remainder (s = 2^B - 1),
 * drawn from key: E[decode] = g. */
void so_compress_qsgd_encode(uint32_t *msg, const float *g, size_t n, int bits, int block, uint64_t key);
/* dst[i] += decode(msg)[i] (add = 1) or dst[i] = decode(msg)[i] (add = 0). */
void so_compress_qsgd_decode(float *dst, const uint32_t *msg, size_t n, int bits, int block, int add);

/* ---- sign ----------------------------------------------------------------------
 * msg (so_compress_sign_words): the mean |g| then the sign bits (1 = negative). */
void so_compress_sign_encode(uint32_t *msg, const float *g, size_t n);
/* dst[i] += or = (+-) scale. */
void so_compress_sign_decode(float *dst, const uint32_t *msg, size_t n, int add);

/* ---- PowerSGD (Vogels et al. 2019) -----------------------------------------------
 * M is rows x cols row-major (a conv weight OIHW as O x IHW, a dense (out, in));
 * P rows x r, row-major; Qt = Q^T, r x cols, row-major. */
/* P = M Q. */
void so_compress_psgd_p(float *P, const float *M, const float *Qt, size_t rows, size_t cols, int r);
/* Gram-Schmidt on P's columns (a zero column stays finite: its norm gets 1e-8). */
void so_compress_psgd_orthonormalize(float *P, size_t rows, int r);
/* The same on Q's columns (Qt's rows). The warm-started Q is M^T P, its
 * columns as long as M's singular values: orthonormal again before P = M Q,
 * as torch's hook does, M Q keeps M's smaller directions in FP32 instead of
 * squaring the spread between them. */
void so_compress_psgd_orthonormalize_qt(float *Qt, size_t cols, int r);
/* Qt = (M^T P)^T = P^T M. */
void so_compress_psgd_q(float *Qt, const float *M, const float *P, size_t rows, size_t cols, int r);
/* out = P Qt x scale, (rows x cols). */
void so_compress_psgd_approx(float *out, const float *P, const float *Qt, size_t rows, size_t cols, int r,
                             float scale);
/* Qt's first value: standard normal from key (the same on every rank). */
void so_compress_psgd_init(float *Qt, size_t cols, int r, uint64_t key);

/* ---- whole-buffer helpers --------------------------------------------------------- */
/* dst[i] += src[i]. */
void so_compress_add(float *dst, const float *src, size_t n);
/* dst[i] = a[i] - b[i] (dst may be a or b). */
void so_compress_sub(float *dst, const float *a, const float *b, size_t n);
/* Which code the hot loops run: "avx2" or "scalar" (SCALEOUT_MAX_ISA lowers it). */
const char *so_compress_kernel(void);

/* ---- the compressed average of gradient buckets over a process group -------------
 * A compressor holds what a method keeps between steps: the error-feedback
 * residual (one float per gradient value, by offset in the flat buffer, so
 * re-planned buckets keep it), PowerSGD's Q of every matrix (warm start), and
 * per bucket the messages in flight. Each submit compresses one bucket on the
 * calling thread, starts its collectives on g and chains the decoding (and
 * PowerSGD's second allreduce) as continuations, so buckets overlap backward;
 * wait returns when every bucket holds the average over g's ranks of what
 * they sent, decompressed and summed in FP32 in rank order (the same bits on
 * every rank). With error feedback, the bucket is first corrected by the
 * residual and the residual becomes corrected - sent (sent: this rank's
 * decompressed message; PowerSGD: the averaged approximation, as torch). */
typedef struct so_compressor so_compressor;

/* A weight tensor viewed as a matrix: floats [off, off + rows x cols) of the
 * flat buffer (a conv weight OIHW as O x IHW, a dense (out, in)). */
typedef struct {
    size_t off, rows, cols;
} so_compress_matrix;

typedef struct {
    so_compress_spec spec;
    int error_feedback;            /* 1 on, 0 off, -1 the method's default (so_compress_biased) */
    size_t n;                      /* floats of the flat gradient buffer */
    const so_compress_matrix *mats; /* powersgd: the weight matrices, ascending and disjoint (copied) */
    int nmats;
    uint64_t seed;                 /* rand-k's shared indices, QSGD's draws, PowerSGD's first Q */
} so_compressor_config;

/* What a compressor did so far: the bytes this rank contributed to the
 * collectives (the message sizes of the formulas above, what an allgather
 * sends once), the bytes a dense FP32 allreduce would have contributed, and
 * the seconds spent encoding (calling thread) and decoding (continuations). */
typedef struct {
    double bytes_sent, bytes_dense;
    double encode_seconds, decode_seconds;
    long buckets;
} so_compressor_stats;

/* SO_EINVAL (none and auto have no compressor; a matrix outside n), SO_ENOMEM. */
int so_compressor_create(const so_compressor_config *c, so_compressor **out);
void so_compressor_destroy(so_compressor *c); /* accepts NULL; nothing may be in flight */
/* Starts the average of grads[lo, hi) over g, in place (grads[lo, hi) is the
 * communication's until wait). bucket: the same id on every rank for the same
 * slice, at most one submit per bucket between waits; step: the optimizer
 * step (rand-k's and QSGD's draws, PowerSGD's START_STEP). Ranks submit the
 * same buckets in the same order. */
int so_compressor_submit(so_compressor *c, so_group *g, float *grads, size_t lo, size_t hi, int bucket, long step);
/* Waits for every submitted bucket; *waited = seconds blocked (may be NULL). */
int so_compressor_wait(so_compressor *c, so_group *g, double *waited);
/* Whether error feedback is on, and the residual (n floats; NULL when off),
 * for checkpoints: written and restored as it is. */
int so_compressor_error_feedback(const so_compressor *c);
float *so_compressor_residual(so_compressor *c);
void so_compressor_stats_get(const so_compressor *c, so_compressor_stats *out);
/* What the compressor keeps between steps, as bytes for a checkpoint (each
 * rank its own): the residual (n floats, with error feedback), then the Q^T
 * of every matrix PowerSGD compresses (r x cols floats each), in host byte
 * order. set puts bytes got from a compressor of the same configuration
 * back (state_bytes of them); nothing may be in flight. */
size_t so_compressor_state_bytes(const so_compressor *c);
void so_compressor_state_get(const so_compressor *c, void *dst);
void so_compressor_state_set(so_compressor *c, const void *src);
/* The bytes one rank contributes for a bucket of n floats holding the
 * matrices mats (powersgd) among ranks: the formulas above (tests check the
 * counters against it, the predictor prices a method by it). */
double so_compress_bucket_bytes(const so_compress_spec *s, size_t n, const so_compress_matrix *mats, int nmats,
                                int ranks, long step);

/* What method cf costs on this CPU for gradient g[0..cf->n) cut into the
 * buckets [bounds[b], bounds[b + 1]) (bounds[0] = 0, bounds[nbuckets] = n):
 * the compressor itself run twice over the buckets on a loopback group of
 * one process standing in for `ranks` (allgathers return `ranks` copies of
 * this rank's message, so decoding does the work of `ranks` messages; the
 * sums and transfers are the link's, not timed here). *out: the second
 * pass's bytes and seconds (PowerSGD compressing, past START_STEP).
 * *rel_err (may be NULL): what the second pass's message loses of g,
 * ||g - C(g)|| / ||g|| (its residual cleared first, so C compresses g
 * itself; PowerSGD's Q warm from the first pass). For --compress auto;
 * costs about two steps' compression. */
int so_compress_calibrate(const so_compressor_config *cf, const float *g, const size_t *bounds, int nbuckets,
                          int ranks, so_compressor_stats *out, double *rel_err);
/* Steps to a target accuracy over FP32's for a method whose message loses
 * rel_err = ||g - C(g)|| / ||g|| of the gradient (docs/COMPRESSION.md):
 * unbiased methods (E C(g) = g: rand-k, QSGD) 1 + rel_err^2, the variance
 * bound omega's slowdown; the others 1 / (1 - rel_err^2), one over the
 * share of the gradient's energy a step delivers (at most 100). */
double so_compress_steps_factor(const so_compress_spec *s, double rel_err);

#endif
