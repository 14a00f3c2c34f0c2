/* Element types of buffers that travel between ranks, the reductions over
 * them, and the conversions between FP32 and the 16-bit float types (BF16,
 * FP16). Shared by the communication layer (scaleout/comm.h) and the
 * engine's view of it (scaleout/group.h), which must not include each other;
 * implemented in libscaleout_core (src/core/dtype.c), vectorised per ISA.
 *
 * Rounding: FP32 -> BF16 / FP16 rounds to nearest, ties to even; NaN stays
 * NaN (quiet), infinities stay infinite, FP16 overflows to infinity and
 * underflows through its subnormals. BF16 / FP16 -> FP32 is exact. Every
 * ISA's copy of a conversion gives the same bits. */
#ifndef SCALEOUT_DTYPE_H
#define SCALEOUT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    SO_DTYPE_F32,  /* IEEE binary32 */
    SO_DTYPE_BF16, /* bfloat16: the top 16 bits of a binary32 (8-bit exponent, 7-bit mantissa) */
    SO_DTYPE_F16,  /* IEEE binary16 (5-bit exponent, 10-bit mantissa) */
    SO_DTYPE_F64,  /* IEEE binary64 */
    SO_DTYPE_I64,  /* int64_t */
    SO_DTYPE_COUNT
} so_dtype;

/* Reductions. Over BF16 / FP16 they are computed in FP32 (docs/COLLECTIVES.md
 * says where the result is rounded); over I64 only SUM, MAX and MIN. */
typedef enum {
    SO_REDUCE_SUM,
    SO_REDUCE_AVG, /* sum, then times 1/size (F32, BF16, F16) or divided by size (F64) */
    SO_REDUCE_MAX,
    SO_REDUCE_MIN
} so_reduce_op;

/* Bytes per element (0 for an invalid type). */
size_t so_dtype_size(so_dtype dt);
/* "f32", "bf16", "f16", "f64", "i64"; NULL for an invalid type. */
const char *so_dtype_name(so_dtype dt);
/* Parses so_dtype_name's names (also "fp32", "fp16", "float", "half",
 * "bfloat16", "double"); SO_EINVAL otherwise. */
int so_dtype_parse(const char *name, so_dtype *out);
/* "sum", "avg", "max", "min"; NULL for an invalid op. */
const char *so_reduce_op_name(so_reduce_op op);

/* n elements converted; dst and src must not overlap. */
void so_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void so_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void so_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void so_f16_to_f32(float *dst, const uint16_t *src, size_t n);

/* n FP32 values rounded in place to the nearest value of `to` (BF16 or F16,
 * as a conversion there and back gives; F32 leaves them): what an FP32
 * buffer holds after a trip over a 16-bit wire. */
void so_round_to(so_dtype to, float *x, size_t n);

/* One value, for tests and references. */
uint16_t so_f32_to_bf16_1(float x);
float so_bf16_to_f32_1(uint16_t h);
uint16_t so_f32_to_f16_1(float x);
float so_f16_to_f32_1(uint16_t h);

/* Which code converts FP16 here: "avx512", "f16c" or "scalar" (tests check
 * every one gives the same bits; SCALEOUT_MAX_ISA lowers the choice). */
const char *so_f16_kernel(void);

#endif
