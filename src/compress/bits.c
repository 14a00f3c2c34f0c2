/* QSGD and sign: values as a few bits each, stored as bit planes. Plane p
 * holds bit p of every value's code, one bit per value, 32 values per word;
 * QSGD's planes are its level bits 0..B-1 and then the signs, sign's is
 * the signs alone. Planes are what vectors make cheaply: AVX2 turns bit p of
 * 8 codes into 8 bits with one shift and one movemask, and back with one
 * compare against the lane masks, so packing costs no per-value shifting.
 *
 * Encoding is local (its sums may be in any order); decoding is what every
 * rank does with every rank's message, so it is element-wise with a
 * multiply and an add (no FMA) and the AVX2 and scalar code agree bit for
 * bit (tests/test_compress.c). */
#include <math.h>
#include <string.h>

#include "compress_internal.h"
#include "core/bf16_bits.h"
#include "core/isa_target.h"
#include "scaleout/compress.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

static size_t words32(size_t n) { return (n + 31) / 32; }

/* Walks the blocks of D values: the factor of the block holding i. */
typedef struct {
    const uint32_t *norms;
    size_t block, b, end; /* block b covers [b D, end) */
    float levels;         /* s = 2^B - 1 */
    int encode;           /* factor s / norm (encode) or norm / s (decode) */
    float f;
} block_walk;

static float block_factor(const block_walk *w, size_t b)
{
    float norm = so_float_of(w->norms[b]);
    if (w->encode)
        return norm > 0 ? w->levels / norm : 0.0f;
    return norm / w->levels;
}

static void walk_init(block_walk *w, const uint32_t *norms, int block, int bits, int encode)
{
    *w = (block_walk){norms, (size_t)block, 0, (size_t)block, (float)((1u << bits) - 1), encode, 0};
    w->f = block_factor(w, 0);
}

/* The factor of value i (i never decreases between calls). */
static inline float walk_at(block_walk *w, size_t i)
{
    while (i >= w->end) {
        w->b++;
        w->end += w->block;
        w->f = block_factor(w, w->b);
    }
    return w->f;
}

static void norms_of(uint32_t *norms, const float *g, size_t n, size_t block)
{
    for (size_t b = 0, lo = 0; lo < n; b++, lo += block) {
        size_t len = n - lo < block ? n - lo : block;
        norms[b] = so_bits_of((float)sqrt(cx_sum8(g + lo, len, 1)));
    }
}

/* The stochastic level of one value: floor(a) or one more with probability a - floor(a). */
static inline uint32_t level_of(float x, float f, uint32_t h, uint32_t s)
{
    float a = fabsf(x) * f, l = floorf(a);
    uint32_t lev = (uint32_t)l + (cx_unit(h) < a - l);
    return lev < s ? lev : s;
}

static void qsgd_encode_scalar(uint32_t *planes, size_t W, const float *g, size_t lo, size_t n, int bits,
                               block_walk *w, uint64_t key)
{
    uint32_t s = (1u << bits) - 1;
    for (size_t i = lo; i < n; i++) {
        uint32_t lev = level_of(g[i], walk_at(w, i), cx_hash(key, (uint32_t)i), s), bit = 1u << (i % 32);
        for (int p = 0; p < bits; p++)
            planes[p * W + i / 32] |= (lev >> p & 1) ? bit : 0;
        planes[bits * W + i / 32] |= signbit(g[i]) ? bit : 0;
    }
}

#ifdef HAVE_X86
SO_ISA_BEGIN(SO_TARGET_AVX2)
static inline __m256i mix32_v(__m256i x)
{
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x846ca68bu));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

/* The factors of values i..i+7: one broadcast inside a block, else lane by lane. */
static inline __m256 factors_v(block_walk *w, size_t i)
{
    float f0 = walk_at(w, i);
    if (i + 8 <= w->end)
        return _mm256_set1_ps(f0);
    float f[8];
    for (int l = 0; l < 8; l++)
        f[l] = walk_at(w, i + l);
    return _mm256_loadu_ps(f);
}

/* The levels of 8 values from index i (as level_of, lane by lane). */
static inline __m256i levels_v(__m256 x, __m256 f, size_t i, uint64_t key, __m256i s)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 a = _mm256_mul_ps(_mm256_and_ps(x, absmask), f), l = _mm256_floor_ps(a);
    __m256i ctr = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i h = mix32_v(_mm256_add_epi32(mix32_v(_mm256_xor_si256(ctr, _mm256_set1_epi32((int)(uint32_t)key))),
                                         _mm256_set1_epi32((int)(uint32_t)(key >> 32))));
    __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), _mm256_set1_ps(0x1p-24f));
    __m256i up = _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_sub_ps(a, l), _CMP_LT_OQ));
    __m256i lev = _mm256_sub_epi32(_mm256_cvttps_epi32(l), up);
    return _mm256_min_epu32(lev, s);
}

static size_t qsgd_encode_avx2(uint32_t *planes, size_t W, const float *g, size_t n, int bits, block_walk *w,
                               uint64_t key)
{
    const __m256i s = _mm256_set1_epi32((int)((1u << bits) - 1));
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 x[4];
        __m256i lev[4];
        for (int v = 0; v < 4; v++) {
            x[v] = _mm256_loadu_ps(g + i + 8 * v);
            lev[v] = levels_v(x[v], factors_v(w, i + 8 * v), i + 8 * v, key, s);
        }
        for (int p = 0; p < bits; p++) {
            uint32_t word = 0;
            for (int v = 0; v < 4; v++)
                word |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(lev[v], 31 - p))) << (8 * v);
            planes[p * W + i / 32] = word;
        }
        uint32_t sign = 0;
        for (int v = 0; v < 4; v++)
            sign |= (uint32_t)_mm256_movemask_ps(x[v]) << (8 * v);
        planes[bits * W + i / 32] = sign;
    }
    return i;
}
SO_ISA_END
#endif

void so_compress_qsgd_encode(uint32_t *msg, const float *g, size_t n, int bits, int block, uint64_t key)
{
    size_t nb = (n + (size_t)block - 1) / (size_t)block, W = words32(n);
    uint32_t *planes = msg + nb;
    memset(planes, 0, (size_t)(bits + 1) * W * sizeof *planes);
    if (n == 0)
        return;
    norms_of(msg, g, n, (size_t)block);
    block_walk w;
    walk_init(&w, msg, block, bits, 1);
    size_t done = 0;
#ifdef HAVE_X86
    if (cx_avx2())
        done = qsgd_encode_avx2(planes, W, g, n, bits, &w, key);
#endif
    qsgd_encode_scalar(planes, W, g, done, n, bits, &w, key);
}

/* ---- decoding --------------------------------------------------------------------------- */

static inline float decoded(uint32_t lev, float f, int neg)
{
    float v = (float)lev * f;
    return neg ? -v : v;
}

static void qsgd_decode_scalar(float *dst, const uint32_t *planes, size_t W, size_t lo, size_t n, int bits,
                               block_walk *w, int add)
{
    for (size_t i = lo; i < n; i++) {
        uint32_t lev = 0, sh = (uint32_t)(i % 32);
        for (int p = 0; p < bits; p++)
            lev |= (planes[p * W + i / 32] >> sh & 1u) << p;
        float v = decoded(lev, walk_at(w, i), planes[bits * W + i / 32] >> sh & 1u);
        dst[i] = add ? dst[i] + v : v;
    }
}

#ifdef HAVE_X86
SO_ISA_BEGIN(SO_TARGET_AVX2)
/* Lane l of the result is all ones when bit l of byte is set. */
static inline __m256i bits_v(uint32_t byte)
{
    const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i b = _mm256_and_si256(_mm256_set1_epi32((int)byte), lanes);
    return _mm256_cmpeq_epi32(b, lanes);
}

static size_t qsgd_decode_avx2(float *dst, const uint32_t *planes, size_t W, size_t n, int bits, block_walk *w,
                               int add)
{
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t sh = (uint32_t)(i % 32);
        __m256i lev = _mm256_setzero_si256();
        for (int p = 0; p < bits; p++) {
            __m256i on = bits_v(planes[p * W + i / 32] >> sh & 0xffu);
            lev = _mm256_or_si256(lev, _mm256_and_si256(on, _mm256_set1_epi32(1 << p)));
        }
        __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(lev), factors_v(w, i));
        __m256 neg = _mm256_castsi256_ps(bits_v(planes[bits * W + i / 32] >> sh & 0xffu));
        v = _mm256_xor_ps(v, _mm256_and_ps(neg, signbit));
        _mm256_storeu_ps(dst + i, add ? _mm256_add_ps(_mm256_loadu_ps(dst + i), v) : v);
    }
    return i;
}
SO_ISA_END
#endif

void so_compress_qsgd_decode(float *dst, const uint32_t *msg, size_t n, int bits, int block, int add)
{
    if (n == 0)
        return;
    size_t nb = (n + (size_t)block - 1) / (size_t)block, W = words32(n);
    block_walk w;
    walk_init(&w, msg, block, bits, 0);
    size_t done = 0;
#ifdef HAVE_X86
    if (cx_avx2())
        done = qsgd_decode_avx2(dst, msg + nb, W, n, bits, &w, add);
#endif
    qsgd_decode_scalar(dst, msg + nb, W, done, n, bits, &w, add);
}

/* ---- sign --------------------------------------------------------------------------------- */

#ifdef HAVE_X86
SO_ISA_BEGIN(SO_TARGET_AVX2)
static size_t sign_bits_avx2(uint32_t *plane, const float *g, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint32_t word = 0;
        for (int v = 0; v < 4; v++)
            word |= (uint32_t)_mm256_movemask_ps(_mm256_loadu_ps(g + i + 8 * v)) << (8 * v);
        plane[i / 32] = word;
    }
    return i;
}

static size_t sign_decode_avx2(float *dst, const uint32_t *plane, size_t n, float scale, int add)
{
    const __m256 sv = _mm256_set1_ps(scale), signbit = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 neg = _mm256_castsi256_ps(bits_v(plane[i / 32] >> (i % 32) & 0xffu));
        __m256 v = _mm256_xor_ps(sv, _mm256_and_ps(neg, signbit));
        _mm256_storeu_ps(dst + i, add ? _mm256_add_ps(_mm256_loadu_ps(dst + i), v) : v);
    }
    return i;
}
SO_ISA_END
#endif

void so_compress_sign_encode(uint32_t *msg, const float *g, size_t n)
{
    msg[0] = so_bits_of(n ? (float)(cx_sum8(g, n, 0) / (double)n) : 0.0f);
    uint32_t *plane = msg + 1;
    memset(plane, 0, words32(n) * sizeof *plane);
    size_t i = 0;
#ifdef HAVE_X86
    if (cx_avx2())
        i = sign_bits_avx2(plane, g, n);
#endif
    for (; i < n; i++)
        plane[i / 32] |= signbit(g[i]) ? 1u << (i % 32) : 0;
}

void so_compress_sign_decode(float *dst, const uint32_t *msg, size_t n, int add)
{
    float scale = so_float_of(msg[0]);
    const uint32_t *plane = msg + 1;
    size_t i = 0;
#ifdef HAVE_X86
    if (cx_avx2())
        i = sign_decode_avx2(dst, plane, n, scale, add);
#endif
    for (; i < n; i++) {
        float v = plane[i / 32] >> (i % 32) & 1u ? -scale : scale;
        dst[i] = add ? dst[i] + v : v;
    }
}
