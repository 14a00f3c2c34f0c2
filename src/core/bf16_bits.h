/* A binary32's bits, and BF16 as their top half: the integer operations
 * that dtype.c's conversions, the compressors' bit packing and the backends'
 * BF16 loops share, inline so the compiler vectorises the loops calling them. */
#ifndef SO_BF16_BITS_H
#define SO_BF16_BITS_H
#include <stdint.h>
#include <string.h>

static inline uint32_t so_bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float so_float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Round to nearest even on bit 16; a NaN keeps its sign and top payload bits
 * and is made quiet (else rounding could carry it into an infinity). */
static inline uint16_t so_bf16_round(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

static inline float so_bf16_widen(uint16_t h) { return so_float_of((uint32_t)h << 16); }
static inline uint16_t so_bf16_narrow(float x) { return so_bf16_round(so_bits_of(x)); }

#endif
