/* The GEMM micro-kernel and packing routines of onednn_gemm.h, written once
 * over the vector operations of one ISA: included by onednn_gemm_avx2.c
 * and onednn_gemm_avx512.c after they define vf, VL, MR, KC, MC, NC, the
 * v_*() operations, tr8() (an 8 x 8 transpose of __m256 rows, AVX's) and
 * GEMM_TABLE / GEMM_LABEL. NR is two vectors.
 * No include guard: each instance file includes it once. */
#include <immintrin.h>
#include <string.h>

#include "backend/onednn/onednn_gemm.h"

#define NR (2 * VL)

/* Rows [i0, i0 + rows) of a (rows <= 8, row-major, lda) times columns
 * [p, p + 8) into dst[q MR + i] for q < 8: 8 x 8 blocks transposed in
 * registers (tr8); only the `rows` valid floats of each output row are
 * stored, so the neighbouring panel rows stay intact. */
static void pack_a_rows8(const float *a, int lda, int rows, int p, float *dst)
{
    static const int lane[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256i mask = _mm256_loadu_si256((const __m256i *)(lane + 8 - rows));
    __m256 r[8];
    for (int q = 0; q < 8; q++)
        r[q] = q < rows ? _mm256_loadu_ps(a + (size_t)q * lda + p) : _mm256_setzero_ps();
    tr8(r);
    for (int q = 0; q < 8; q++)
        _mm256_maskstore_ps(dst + (size_t)(p + q) * MR, mask, r[q]);
}

/* MR-row micro-panels: dst[panel][p][i] = op(A)(i0 + i, p), zero past m.
 * Whole panels of a row-major A (the forward's and backward data's
 * activations) go through pack_a_rows8; transposed ones (the weight
 * gradient's dY^T) copy MR contiguous floats per p. */
static void pack_a(const float *a, int lda, int ta, int m, int k, float *dst)
{
    for (int i0 = 0; i0 < m; i0 += MR, dst += (size_t)MR * k) {
        int mr = m - i0 < MR ? m - i0 : MR, p = 0;
        if (ta) { /* rows of op(A) are columns of a: MR contiguous floats per p */
            for (; mr == MR && p < k; p++)
                memcpy(dst + (size_t)p * MR, a + (size_t)p * lda + i0, MR * sizeof *dst);
            for (; p < k; p++) {
                const float *src = a + (size_t)p * lda + i0;
                for (int i = 0; i < MR; i++)
                    dst[p * MR + i] = i < mr ? src[i] : 0.0f;
            }
            continue;
        }
        if (mr == MR)
            for (; p + 8 <= k; p += 8)
                for (int g = 0; g < MR; g += 8)
                    pack_a_rows8(a + (size_t)(i0 + g) * lda, lda, MR - g < 8 ? MR - g : 8, p, dst + g);
        for (; p < k; p++)
            for (int i = 0; i < MR; i++)
                dst[p * MR + i] = i < mr ? a[(size_t)(i0 + i) * lda + p] : 0.0f;
    }
}

/* NR-column micro-panels of op(B) = b^T (tb 1): 8 x 8 blocks transposed in
 * registers, the rest one float at a time. */
static void pack_bt(const float *b, int ldb, int k, int n, float *dst)
{
    for (int j0 = 0; j0 < n; j0 += NR, dst += (size_t)NR * k) {
        int nr = n - j0 < NR ? n - j0 : NR, p = 0;
        if (nr == NR)
            for (; p + 8 <= k; p += 8)
                for (int h = 0; h < NR; h += 8) {
                    __m256 r[8];
                    for (int q = 0; q < 8; q++)
                        r[q] = _mm256_loadu_ps(b + (size_t)(j0 + h + q) * ldb + p);
                    tr8(r);
                    for (int q = 0; q < 8; q++)
                        _mm256_storeu_ps(dst + (size_t)(p + q) * NR + h, r[q]);
                }
        for (; p < k; p++)
            for (int j = 0; j < NR; j++)
                dst[(size_t)p * NR + j] = j < nr ? b[(size_t)(j0 + j) * ldb + p] : 0.0f;
    }
}

static void pack_b(const float *b, int ldb, int tb, int k, int n, float *dst)
{
    if (tb) {
        pack_bt(b, ldb, k, n, dst);
        return;
    }
    for (int j0 = 0; j0 < n; j0 += NR, dst += (size_t)NR * k) {
        int nr = n - j0 < NR ? n - j0 : NR;
        for (int p = 0; p < k; p++) {
            const float *src = b + (size_t)p * ldb + j0;
            float *d = dst + (size_t)p * NR;
            if (nr == NR) {
                v_storeu(d, v_loadu(src));
                v_storeu(d + VL, v_loadu(src + VL));
            } else
                for (int j = 0; j < NR; j++)
                    d[j] = j < nr ? src[j] : 0.0f;
        }
    }
}

/* The MR x NR tile: MR x 2 vector accumulators, one broadcast of A per
 * row and two loads of B per step of k. */
static void micro(int k, const float *a, const float *b, float *c, int ldc, int add, const float *init)
{
    vf acc[MR][2];
    /* C is read (add) or written only after the k loop; fetching its rows
     * now hides the cache misses of a large C (the LM head's logits are
     * 51 MB) behind the loop instead of stalling the stores at its end */
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        __builtin_prefetch(c + (size_t)i * ldc, 1, 3);
        __builtin_prefetch(c + (size_t)i * ldc + NR - 1, 1, 3);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        acc[i][0] = init ? v_loadu(init) : v_zero();
        acc[i][1] = init ? v_loadu(init + VL) : v_zero();
    }
    for (int p = 0; p < k; p++, a += MR, b += NR) {
        vf b0 = v_load(b), b1 = v_load(b + VL);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            vf x = v_set1(a[i]);
            acc[i][0] = v_fma(x, b0, acc[i][0]);
            acc[i][1] = v_fma(x, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        float *ci = c + (size_t)i * ldc;
        if (add) {
            acc[i][0] = v_add(acc[i][0], v_loadu(ci));
            acc[i][1] = v_add(acc[i][1], v_loadu(ci + VL));
        }
        v_storeu(ci, acc[i][0]);
        v_storeu(ci + VL, acc[i][1]);
    }
}

const od_gemm_kernels GEMM_TABLE = {
    .name = GEMM_LABEL, .mr = MR, .nr = NR, .kc = KC, .mc = MC, .nc = NC,
    .pack_a = pack_a, .pack_b = pack_b, .micro = micro,
};
