/* Element types and the FP32 <-> BF16 / FP16 conversions (scaleout/dtype.h).
 * BF16 is the top half of a binary32, so both directions are integer
 * operations on the bits that the compiler vectorises (SO_VEC_CLONES: one
 * copy per ISA, the same bits). FP16 uses the F16C instructions where the
 * ISA level allows them (every AVX2 CPU has F16C; on AVX-512 CPUs too, the
 * conversion being memory-bound, 256 bits are enough), else a scalar
 * version written to give the instructions' bits, NaNs included. */
#include "scaleout/dtype.h"

#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "bf16_bits.h"
#include "isa_target.h"
#include "vec_clones.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

static const struct {
    const char *name;
    size_t size;
} types[SO_DTYPE_COUNT] = {[SO_DTYPE_F32] = {"f32", 4}, [SO_DTYPE_BF16] = {"bf16", 2},
                           [SO_DTYPE_F16] = {"f16", 2}, [SO_DTYPE_F64] = {"f64", 8}, [SO_DTYPE_I64] = {"i64", 8}};

size_t so_dtype_size(so_dtype dt) { return (unsigned)dt < SO_DTYPE_COUNT ? types[dt].size : 0; }
const char *so_dtype_name(so_dtype dt) { return (unsigned)dt < SO_DTYPE_COUNT ? types[dt].name : NULL; }

int so_dtype_parse(const char *name, so_dtype *out)
{
    static const struct {
        const char *alias;
        so_dtype dt;
    } aliases[] = {{"fp32", SO_DTYPE_F32},     {"float", SO_DTYPE_F32}, {"fp16", SO_DTYPE_F16},
                   {"half", SO_DTYPE_F16},     {"bfloat16", SO_DTYPE_BF16}, {"fp64", SO_DTYPE_F64},
                   {"double", SO_DTYPE_F64},   {"int64", SO_DTYPE_I64}};
    for (int i = 0; name && i < SO_DTYPE_COUNT; i++)
        if (!strcasecmp(name, types[i].name)) {
            *out = (so_dtype)i;
            return 0;
        }
    for (size_t i = 0; name && i < sizeof aliases / sizeof *aliases; i++)
        if (!strcasecmp(name, aliases[i].alias)) {
            *out = aliases[i].dt;
            return 0;
        }
    return so_err(SO_EINVAL, "unknown element type '%s' (f32, bf16, f16, f64, i64)", name ? name : "");
}

const char *so_reduce_op_name(so_reduce_op op)
{
    static const char *const names[] = {"sum", "avg", "max", "min"};
    return (unsigned)op <= SO_REDUCE_MIN ? names[op] : NULL;
}

/* ---- BF16: integer operations on the binary32 bits (bf16_bits.h) ---------------- */

uint16_t so_f32_to_bf16_1(float x) { return so_bf16_narrow(x); }
float so_bf16_to_f32_1(uint16_t h) { return so_bf16_widen(h); }

SO_VEC_CLONES static void f32_to_bf16_loop(uint16_t *restrict dst, const float *restrict src, size_t n)
{
    const uint32_t *u = (const uint32_t *)(const void *)src;
    for (size_t i = 0; i < n; i++)
        dst[i] = so_bf16_round(u[i]);
}

SO_VEC_CLONES static void bf16_to_f32_loop(float *restrict dst, const uint16_t *restrict src, size_t n)
{
    uint32_t *u = (uint32_t *)(void *)dst;
    for (size_t i = 0; i < n; i++)
        u[i] = (uint32_t)src[i] << 16;
}

/* Static clones behind exported names: clang 14 gives a target_clones
 * function no externally visible symbol. */
void so_f32_to_bf16(uint16_t *dst, const float *src, size_t n) { f32_to_bf16_loop(dst, src, n); }
void so_bf16_to_f32(float *dst, const uint16_t *src, size_t n) { bf16_to_f32_loop(dst, src, n); }

/* ---- FP16: scalar reference --------------------------------------------------------
 * The bits of VCVTPS2PH (round to nearest even) and VCVTPH2PS, so that every
 * path agrees: NaNs are made quiet and keep their top payload bits. */

uint16_t so_f32_to_f16_1(float x)
{
    uint32_t u = so_bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to 65536 or more, or infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: a subnormal (or zero) result */
        if (a < 0x33000000u) /* below half the smallest subnormal 2^-25: zero */
            return (uint16_t)sign;
        uint32_t mant = (a & 0x7fffffu) | 0x800000u; /* 1.m x 2^(e-127) */
        int shift = 126 - (int)(a >> 23);            /* 14 + (113 - e) - 1 + ... see below */
        /* value = mant x 2^(e-150); a subnormal h counts 2^-24: h = mant >> (126 - e) */
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
        h += rem > half || (rem == half && (h & 1u));
        return (uint16_t)(sign | h);
    }
    uint32_t r = a - 0x38000000u; /* rebias the exponent 127 -> 15 (in the top bits) */
    r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | r);
}

float so_f16_to_f32_1(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) /* infinity, NaN (made quiet, as VCVTPH2PS does) */
        return so_float_of(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e == 0) {
        if (!m)
            return so_float_of(sign);
        int k = 0; /* normalise the subnormal */
        while (!(m & 0x400u)) {
            m <<= 1;
            k++;
        }
        return so_float_of(sign | ((uint32_t)(113 - k) << 23) | ((m & 0x3ffu) << 13));
    }
    return so_float_of(sign | ((e + 112u) << 23) | (m << 13));
}

static void f32_to_f16_scalar(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = so_f32_to_f16_1(src[i]);
}

static void f16_to_f32_scalar(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = so_f16_to_f32_1(src[i]);
}

/* ---- FP16: F16C ----------------------------------------------------------------------- */
#ifdef HAVE_X86
SO_ISA_BEGIN("avx2,f16c")
static void f32_to_f16_f16c(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = so_f32_to_f16_1(src[i]);
}

static void f16_to_f32_f16c(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    for (; i < n; i++)
        dst[i] = so_f16_to_f32_1(src[i]);
}
SO_ISA_END
#endif

/* The FP16 kernels, chosen once: F16C when the ISA level allows AVX2 and the
 * CPU has it, else the scalar code. */
static struct {
    void (*to16)(uint16_t *, const float *, size_t);
    void (*to32)(float *, const uint16_t *, size_t);
    const char *name;
} f16k;
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

#ifdef HAVE_X86
/* F16C is CPUID leaf 1, ECX bit 29. Asked directly because clang 14's
 * __builtin_cpu_supports does not know the name "f16c". The AVX2 level
 * checked beside it already implies the OS saves the YMM state. */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return (c >> 29) & 1u;
}
#endif

static void f16_pick(void)
{
    f16k.to16 = f32_to_f16_scalar;
    f16k.to32 = f16_to_f32_scalar;
    f16k.name = "scalar";
#ifdef HAVE_X86
    if (so_cpu_isa() >= SO_ISA_AVX2 && cpu_has_f16c()) {
        f16k.to16 = f32_to_f16_f16c;
        f16k.to32 = f16_to_f32_f16c;
        f16k.name = "f16c";
    }
#endif
}

const char *so_f16_kernel(void)
{
    pthread_once(&f16_once, f16_pick);
    return f16k.name;
}

void so_f32_to_f16(uint16_t *dst, const float *src, size_t n)
{
    pthread_once(&f16_once, f16_pick);
    f16k.to16(dst, src, n);
}

void so_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    pthread_once(&f16_once, f16_pick);
    f16k.to32(dst, src, n);
}

void so_round_to(so_dtype to, float *x, size_t n)
{
    uint16_t h[1024];
    for (size_t i = 0; (to == SO_DTYPE_BF16 || to == SO_DTYPE_F16) && i < n; i += 1024) {
        size_t k = n - i < 1024 ? n - i : 1024;
        if (to == SO_DTYPE_BF16) {
            so_f32_to_bf16(h, x + i, k);
            so_bf16_to_f32(x + i, h, k);
        } else {
            so_f32_to_f16(h, x + i, k);
            so_f16_to_f32(x + i, h, k);
        }
    }
}
