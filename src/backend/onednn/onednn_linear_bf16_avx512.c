/* dY^T in BF16 for the BF16 linear layer's weight gradient
 * (onednn_linear_bf16.c): one pass that transposes and rounds, in 16 x 16
 * tiles transposed in registers (four butterfly stages of vpermt2ps), where
 * oneDNN 2.6's f32 "ba" -> bf16 "ab" reorder moves 0.6 G elements/s on one
 * Zen 5 core. Rounds to nearest even like so_f32_to_bf16 (NaN stays quiet
 * NaN), by integer operations: plain AVX-512F, run only where BF16 runs. */
#include <immintrin.h>
#include <stdint.h>

#include "backend/onednn/onednn_linear_bf16.h"
#include "core/isa_target.h"
#include "scaleout/dtype.h"

SO_ISA_BEGIN(SO_TARGET_AVX512)

/* 16 floats -> 16 BF16, round to nearest even, NaN quiet. */
static inline __m256i round_bf16(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
}

/* Rows i and i + d of the tile swap their off-diagonal d-blocks. */
static inline void butterfly(__m512 *v, int d, __m512i lo, __m512i hi)
{
    for (int i = 0; i < 16; i++)
        if (!(i & d)) {
            __m512 a = v[i], b = v[i + d];
            v[i] = _mm512_permutex2var_ps(a, lo, b);
            v[i + d] = _mm512_permutex2var_ps(a, hi, b);
        }
}

/* dst[c * ldd + r] = bf16(src[r * lds + c]) for the 16 x 16 tile at (0, 0). */
static void tile16(uint16_t *dst, int ldd, const float *src, int lds)
{
    __m512 v[16];
    for (int r = 0; r < 16; r++)
        v[r] = _mm512_loadu_ps(src + (size_t)r * lds);
    /* lane k of row i: k & d ? row i + d's lane k - d : its own; of row i + d: k & d ? its own : row i's k + d */
    static const int32_t idx[4][2][16] = {
        {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
         {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}},
        {{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
         {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
        {{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
         {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}},
        {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
         {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}},
    };
    for (int s = 0, d = 8; d >= 1; s++, d /= 2)
        butterfly(v, d, _mm512_loadu_si512(idx[s][0]), _mm512_loadu_si512(idx[s][1]));
    for (int c = 0; c < 16; c++)
        _mm256_storeu_si256((__m256i *)(dst + (size_t)c * ldd), round_bf16(v[c]));
}

void od_bf16_transpose_avx512(uint16_t *dst, const float *src, int64_t R, int64_t N)
{
    int64_t r16 = R / 16 * 16, n16 = N / 16 * 16;
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < N; c0 += 16) {
        if (c0 < n16)
            for (int64_t r0 = 0; r0 < r16; r0 += 16)
                tile16(dst + (size_t)c0 * R + r0, (int)R, src + (size_t)r0 * N + c0, (int)N);
        int64_t c1 = c0 + 16 < N ? c0 + 16 : N;
        for (int64_t c = c0; c < c1; c++) /* the rows past the last tile, and the columns past the last tile */
            for (int64_t r = c0 < n16 ? r16 : 0; r < R; r++)
                dst[(size_t)c * R + r] = so_f32_to_bf16_1(src[(size_t)r * N + c]);
    }
}

SO_ISA_END
