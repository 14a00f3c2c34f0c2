/* Top-k selection by magnitude, in one vectorised pass over the gradient:
 *   1. a threshold t from a sample of magnitudes (the sample's rank that
 *      should leave about 2k values above it in the whole buffer);
 *   2. one pass collects the candidates |g[i]| >= t with their indices,
 *      in ascending index order (AVX2: compare, then a left-packing
 *      permutation from a table of the 256 masks); too few: lower t, again;
 *   3. quickselect on a copy of the candidates' magnitudes finds T, the k-th
 *      largest; a last pass over the candidates keeps those above T and, of
 *      those equal to T, the lowest indices until there are k.
 * No sort of the k results: they come out ascending from step 2. Cost: one
 * read of the buffer (more only when the sample misjudged t) plus O(k). */
#include <pthread.h>
#include <string.h>

#include "compress_internal.h"
#include "core/isa_target.h"
#include "scaleout/compress.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

enum { SAMPLE = 4096, SLACK = 16 };

/* Candidates' indices, their magnitudes, and the copy quickselect reorders. */
size_t so_compress_topk_scratch(size_t n) { return (3 * (n + SLACK) + SAMPLE) * sizeof(float); }

static inline float mag(float x) { return x < 0 ? -x : x; }

/* The j-th largest of a[0..n) (0-based), reordering a: selection with a
 * three-way partition (larger | equal | smaller: many equal magnitudes, such
 * as zeros, end it at once) around the median of three (deterministic). */
static float kth_largest(float *a, size_t n, size_t j)
{
    size_t lo = 0, hi = n; /* the answer is in a[lo..hi) */
    while (hi - lo > 1) {
        float x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
        float pivot = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);
        size_t gt = lo, i = lo, lt = hi; /* [lo,gt) > pivot, [gt,i) == pivot, [lt,hi) < pivot */
        while (i < lt) {
            float v = a[i];
            if (v > pivot) {
                a[i++] = a[gt];
                a[gt++] = v;
            } else if (v < pivot) {
                a[i] = a[--lt];
                a[lt] = v;
            } else {
                i++;
            }
        }
        if (j < gt)
            hi = gt;
        else if (j < lt)
            return pivot;
        else
            lo = lt;
    }
    return a[j];
}

/* Candidates of g[lo..n) at or above t into idx / m; returns how many. */
static size_t collect_scalar(const float *g, size_t lo, size_t n, float t, uint32_t *idx, float *m)
{
    size_t c = 0;
    for (size_t i = lo; i < n; i++) { /* branch-free: write always, advance when kept */
        float a = mag(g[i]);
        idx[c] = (uint32_t)i;
        m[c] = a;
        c += a >= t;
    }
    return c;
}

#ifdef HAVE_X86
/* Lane numbers of the set bits of each 8-bit mask, packed to the front. */
static uint64_t pack_lut[256];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

static void lut_init(void)
{
    for (int mask = 0; mask < 256; mask++) {
        uint64_t v = 0;
        int c = 0;
        for (int b = 0; b < 8; b++)
            if (mask >> b & 1)
                v |= (uint64_t)b << (8 * c++);
        pack_lut[mask] = v;
    }
}

SO_ISA_BEGIN(SO_TARGET_AVX2)
static size_t collect_avx2(const float *g, size_t n, float t, uint32_t *idx, float *m)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), tv = _mm256_set1_ps(t);
    const __m256i eight = _mm256_set1_epi32(8);
    __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    size_t c = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(g + i), absmask);
        int mask = _mm256_movemask_ps(_mm256_cmp_ps(a, tv, _CMP_GE_OQ));
        if (mask) {
            __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)pack_lut[mask]));
            _mm256_storeu_si256((__m256i *)(void *)(idx + c), _mm256_permutevar8x32_epi32(lanes, perm));
            _mm256_storeu_ps(m + c, _mm256_permutevar8x32_ps(a, perm));
            c += (size_t)__builtin_popcount((unsigned)mask);
        }
        lanes = _mm256_add_epi32(lanes, eight);
    }
    return c + collect_scalar(g, i, n, t, idx + c, m + c);
}
SO_ISA_END
#endif

static size_t collect(const float *g, size_t n, float t, uint32_t *idx, float *m)
{
#ifdef HAVE_X86
    if (cx_avx2()) {
        pthread_once(&lut_once, lut_init);
        return collect_avx2(g, n, t, idx, m);
    }
#endif
    return collect_scalar(g, 0, n, t, idx, m);
}

/* A threshold expected to leave about `want` of the n values at or above it:
 * the matching rank of SAMPLE magnitudes drawn at hashed positions. */
static float sample_threshold(const float *g, size_t n, size_t want, float *s)
{
    for (uint32_t j = 0; j < SAMPLE; j++)
        s[j] = mag(g[cx_hash(0x746f706bu, j) % n]);
    double r = (double)want / (double)n * SAMPLE;
    size_t rank = r >= SAMPLE - 1 ? SAMPLE - 1 : (size_t)r;
    return kth_largest(s, SAMPLE, rank);
}

size_t so_compress_topk(const float *g, size_t n, size_t k, uint32_t *idx, float *val, void *scratch)
{
    if (k == 0 || n == 0)
        return 0;
    uint32_t *cidx = scratch;
    float *cm = (float *)(cidx + n + SLACK), *copy = cm + n + SLACK, *sample = copy + n + SLACK;
    /* Small buffers: every value is a candidate. Else the sample's guess for
     * 2k (+ a few), then 8k, then everything. */
    float t = n > 8 * SAMPLE && k < n / 4 ? sample_threshold(g, n, 2 * k + 64, sample) : 0.0f;
    t = t >= 0 ? t : 0; /* a NaN in the sample */
    size_t c = collect(g, n, t, cidx, cm);
    if (c < k && t > 0) {
        t = sample_threshold(g, n, 8 * k + 256, sample);
        t = t >= 0 ? t : 0;
        c = collect(g, n, t, cidx, cm);
    }
    if (c < k && t > 0)
        c = collect(g, n, 0.0f, cidx, cm);
    size_t kk = c < k ? c : k; /* fewer only when values are NaN */
    memcpy(copy, cm, c * sizeof *copy);
    float T = kk ? kth_largest(copy, c, kk - 1) : 0.0f;
    size_t above = 0;
    for (size_t j = 0; j < c; j++)
        above += cm[j] > T;
    size_t ties = kk - above, m = 0;
    for (size_t j = 0; j < c && m < kk; j++) {
        int keep = cm[j] > T;
        if (!keep && cm[j] == T && ties > 0) {
            ties--;
            keep = 1;
        }
        if (keep) {
            idx[m] = cidx[j];
            val[m++] = g[cidx[j]];
        }
    }
    for (; m < k; m++) { /* NaNs left fewer than k: zeros at a kept index (no residual there) */
        idx[m] = m ? idx[m - 1] : 0;
        val[m] = 0;
    }
    return k;
}
