/* What the compression files share: the counter-based hash (inline, so the
 * vector loops and the scalar ones draw the same numbers) and the choice of
 * kernels. Private to src/compress. */
#ifndef SCALEOUT_COMPRESS_INTERNAL_H
#define SCALEOUT_COMPRESS_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

/* Chris Wellons' lowbias32: a bijection of 32-bit words with good avalanche. */
static inline uint32_t cx_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* The draw for counter i under key: two rounds, each keyed by one half. */
static inline uint32_t cx_hash(uint64_t key, uint32_t i)
{
    return cx_mix32(cx_mix32(i ^ (uint32_t)key) + (uint32_t)(key >> 32));
}

/* A uniform float in [0, 1) from a draw: its top 24 bits. */
static inline float cx_unit(uint32_t h) { return (float)(h >> 8) * 0x1p-24f; }

/* 1 when the AVX2 kernels may run (so_cpu_isa() >= AVX2, x86-64 builds). */
int cx_avx2(void);

/* Sum of squares (sq = 1) or of magnitudes (sq = 0) of x[0..n) in double,
 * in 8 lanes (element i in lane i % 8) combined in a fixed order, so the
 * AVX2 and the scalar code give the same bits. */
double cx_sum8(const float *x, size_t n, int sq);

#endif
