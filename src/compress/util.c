/* The shared pieces of the compressors: the counter-based draws, random-k's
 * indices, the gathers and scatters of sparse values, element-wise sums, the
 * 8-lane double sums, and the choice between the AVX2 and scalar kernels. */
#include <pthread.h>
#include <string.h>

#include "compress_internal.h"
#include "core/isa_target.h"
#include "core/vec_clones.h"
#include "scaleout/compress.h"
#include "scaleout/cpu.h"
#include "scaleout/rng.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

static int avx2_ok;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void isa_pick(void)
{
#ifdef HAVE_X86
    avx2_ok = so_cpu_isa() >= SO_ISA_AVX2;
#endif
}

int cx_avx2(void)
{
    pthread_once(&isa_once, isa_pick);
    return avx2_ok;
}

const char *so_compress_kernel(void) { return cx_avx2() ? "avx2" : "scalar"; }

uint32_t so_compress_hash(uint64_t key, uint32_t i) { return cx_hash(key, i); }

uint64_t so_compress_key(uint64_t seed, uint64_t step, uint64_t bucket, uint64_t rank)
{
    return so_rng_derive(so_rng_derive(so_rng_derive(seed ^ 0x636f6d7072657373ull, step), bucket), rank);
}

/* ---- 8-lane double sums -------------------------------------------------------------- */

static double combine8(const double s[8])
{
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static double sum8_scalar(const float *x, size_t n, int sq)
{
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        s[i % 8] += sq ? v * v : (v < 0 ? -v : v);
    }
    return combine8(s);
}

#ifdef HAVE_X86
SO_ISA_BEGIN(SO_TARGET_AVX2)
/* Lanes 0-3 in lo, 4-7 in hi: the scalar code's lane i % 8, element by element. */
static double sum8_avx2(const float *x, size_t n, int sq)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    const __m256 mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        if (sq) {
            a = _mm256_mul_pd(a, a);
            b = _mm256_mul_pd(b, b);
        } else {
            a = _mm256_cvtps_pd(_mm256_castps256_ps128(_mm256_and_ps(v, mask)));
            b = _mm256_cvtps_pd(_mm256_extractf128_ps(_mm256_and_ps(v, mask), 1));
        }
        lo = _mm256_add_pd(lo, a);
        hi = _mm256_add_pd(hi, b);
    }
    double s[8];
    _mm256_storeu_pd(s, lo);
    _mm256_storeu_pd(s + 4, hi);
    for (; i < n; i++) {
        double v = x[i];
        s[i % 8] += sq ? v * v : (v < 0 ? -v : v);
    }
    return combine8(s);
}
SO_ISA_END
#endif

double cx_sum8(const float *x, size_t n, int sq)
{
#ifdef HAVE_X86
    if (cx_avx2())
        return sum8_avx2(x, n, sq);
#endif
    return sum8_scalar(x, n, sq);
}

/* ---- random-k ---------------------------------------------------------------------- */

/* Floyd's algorithm marks k distinct indices in the bitmap with k draws;
 * reading the bitmap back lists them in ascending order and clears it. */
void so_compress_randk_indices(size_t n, size_t k, uint64_t key, uint32_t *idx, uint64_t *bitmap)
{
    so_rng r;
    so_rng_seed(&r, key);
    for (size_t j = n - k; j < n; j++) {
        size_t t = (size_t)so_rng_below(&r, j + 1);
        if (bitmap[t / 64] >> (t % 64) & 1)
            t = j;
        bitmap[t / 64] |= 1ull << (t % 64);
    }
    size_t m = 0;
    for (size_t w = 0; w < (n + 63) / 64; w++) {
        uint64_t b = bitmap[w];
        bitmap[w] = 0;
        while (b) {
            idx[m++] = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(b));
            b &= b - 1;
        }
    }
}

void so_compress_gather(float *val, const float *g, const uint32_t *idx, size_t k)
{
    for (size_t j = 0; j < k; j++)
        val[j] = g[idx[j]];
}

void so_compress_scatter(float *dst, const uint32_t *idx, const float *val, size_t k, float scale)
{
    for (size_t j = 0; j < k; j++)
        dst[idx[j]] = val[j] * scale;
}

void so_compress_sparse_add(float *dst, const uint32_t *idx, const float *val, size_t k)
{
    for (size_t j = 0; j < k; j++)
        dst[idx[j]] += val[j];
}

void so_compress_sparse_zero(float *dst, const uint32_t *idx, size_t k)
{
    for (size_t j = 0; j < k; j++)
        dst[idx[j]] = 0;
}

/* The clones stay static behind exported names: clang 14 gives a
 * target_clones function no external symbol. */
SO_VEC_CLONES static void add_loop(float *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

SO_VEC_CLONES static void sub_loop(float *dst, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] - b[i];
}

void so_compress_add(float *dst, const float *src, size_t n) { add_loop(dst, src, n); }

void so_compress_sub(float *dst, const float *a, const float *b, size_t n) { sub_loop(dst, a, b, n); }
