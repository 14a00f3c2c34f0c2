/* Seeded pseudo-random numbers (xoshiro256** seeded through splitmix64).
 * Same seed, same sequence on every machine: runs are bitwise reproducible. */
#ifndef SCALEOUT_RNG_H
#define SCALEOUT_RNG_H
#include <stdint.h>

typedef struct { uint64_t s[4]; } so_rng;

void so_rng_seed(so_rng *r, uint64_t seed);
uint64_t so_rng_u64(so_rng *r);
/* Uniform in [0, n) without modulo bias; n > 0. */
uint64_t so_rng_below(so_rng *r, uint64_t n);
/* Uniform float in [0, 1). */
float so_rng_uniform(so_rng *r);
/* Standard normal (Box-Muller). */
float so_rng_normal(so_rng *r);
/* Derives an independent stream for a sub-purpose (e.g. per-rank, per-layer). */
uint64_t so_rng_derive(uint64_t seed, uint64_t stream);

#endif
