/* Element types (scaleout/dtype.h): the FP32 <-> BF16 / FP16 conversions
 * against independent references -- GCC's _Float16 (libgcc's IEEE rounding)
 * for FP16, nearest-candidate search in double for BF16 -- on every FP16
 * value, a sweep of the FP32 space and the rounding boundaries; the vector
 * paths (SO_VEC_CLONES, F16C) against the scalar ones bit for bit, NaNs
 * included; names. Registered again under SCALEOUT_MAX_ISA=sse4.2, where
 * FP16 takes the scalar code. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "isa_cap.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A sweep of the FP32 space (every 65537th pattern, both signs) plus values
 * on and around the FP16 / BF16 rounding boundaries. */
static size_t sweep(float *out, size_t cap)
{
    size_t n = 0;
    for (uint64_t u = 0; u <= 0xffffffffu && n < cap; u += 65537)
        out[n++] = from_bits((uint32_t)u);
    /* Ties and their neighbours: half an FP16 ulp is bit 12, a BF16 one bit 15. */
    for (uint32_t e = 100; e < 145 && n + 16 < cap; e++)
        for (uint32_t m = 0; m < 4; m++) {
            uint32_t base = (e << 23) | (m << 13);
            uint32_t cand[] = {base | 0x1000u, base | 0x0fffu, base | 0x1001u, base | 0x3000u,
                               base | 0x8000u, base | 0x7fffu, base | 0x8001u, base | 0x18000u};
            for (size_t k = 0; k < sizeof cand / sizeof *cand; k++)
                out[n++] = from_bits(cand[k] | (m & 1 ? 0x80000000u : 0));
        }
    float edges[] = {65504.0f, 65519.99f, 65520.0f, 65536.0f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                     2.98023259e-08f, 1e-45f, INFINITY, -INFINITY, 3.4028235e38f, 0.0f, -0.0f};
    for (size_t k = 0; k < sizeof edges / sizeof *edges && n < cap; k++)
        out[n++] = edges[k];
    return n;
}

#define CAP (70000 + 4096)

/* BF16 reference: the nearer of the two BF16 values around x, ties to even. */
static uint16_t bf16_ref(float x)
{
    uint32_t u = bits(x);
    if (isnan(x))
        return (uint16_t)((u >> 16) | 0x40);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dx = fabs((double)x), dl = fabs((double)from_bits((uint32_t)lo << 16));
    if (isinf(x) || (u & 0xffffu) == 0)
        return lo;
    double dh = fabs((double)from_bits((uint32_t)hi << 16));
    if (isinf(dh)) /* IEEE rounds as if the exponent went on: the value above the largest is 2^128 */
        dh = ldexp(1.0, 128);
    double el = dx - dl, eh = dh - dx;
    if (el < eh)
        return lo;
    if (eh < el)
        return hi;
    return lo & 1 ? hi : lo;
}

static void test_bf16(void **state)
{
    (void)state;
    float *x = malloc(CAP * sizeof *x), *back = malloc(CAP * sizeof *back);
    uint16_t *h = malloc(CAP * sizeof *h);
    assert_non_null(x), assert_non_null(h), assert_non_null(back);
    size_t n = sweep(x, CAP);
    so_f32_to_bf16(h, x, n);
    so_bf16_to_f32(back, h, n);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int wrong = h[i] != bf16_ref(x[i]) || h[i] != so_f32_to_bf16_1(x[i]) ||
                    bits(back[i]) != (uint32_t)h[i] << 16 || bits(so_bf16_to_f32_1(h[i])) != bits(back[i]);
        if (wrong && !bad++)
            first = i;
    }
    if (bad)
        print_error("bf16: %zu wrong, first %08x -> %04x (reference %04x)\n", bad, bits(x[first]), h[first],
                    bf16_ref(x[first]));
    assert_int_equal(bad, 0);
    free(x), free(h), free(back);
}

static void test_f16_all_halves(void **state)
{
    (void)state;
    uint16_t *h = malloc(65536 * sizeof *h), *again = malloc(65536 * sizeof *again);
    float *f = malloc(65536 * sizeof *f);
    assert_non_null(h), assert_non_null(f), assert_non_null(again);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    so_f16_to_f32(f, h, 65536);
    so_f32_to_f16(again, f, 65536);
    size_t bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        bad += bits(f[i]) != bits(so_f16_to_f32_1(h[i]));
        int nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
        /* Every half survives the round trip (a signalling NaN comes back quiet). */
        bad += again[i] != (nan ? (uint16_t)(i | 0x200) : h[i]);
#ifdef __FLT16_MAX__
        if (!nan)
            bad += bits(f[i]) != bits((float)*(const _Float16 *)(const void *)&h[i]);
#endif
    }
    assert_int_equal(bad, 0);
    free(h), free(f), free(again);
}

static void test_f16_rounding(void **state)
{
    (void)state;
    float *x = malloc(CAP * sizeof *x);
    uint16_t *h = malloc(CAP * sizeof *h);
    assert_non_null(x), assert_non_null(h);
    size_t n = sweep(x, CAP), bad = 0, first = 0;
    so_f32_to_f16(h, x, n);
    for (size_t i = 0; i < n; i++) {
        int wrong = h[i] != so_f32_to_f16_1(x[i]);
#ifdef __FLT16_MAX__
        _Float16 r = (_Float16)x[i];
        uint16_t rb;
        memcpy(&rb, &r, sizeof rb);
        wrong |= !isnan(x[i]) && h[i] != rb;
#endif
        wrong |= isnan(x[i]) && !((h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff));
        if (wrong && !bad++)
            first = i;
    }
    if (bad)
        print_error("f16 (%s): %zu wrong, first %08x -> %04x (scalar %04x)\n", so_f16_kernel(), bad,
                    bits(x[first]), h[first], so_f32_to_f16_1(x[first]));
    assert_int_equal(bad, 0);
    free(x), free(h);
}

/* Odd lengths and offsets: the vector loops' tails. */
static void test_lengths(void **state)
{
    (void)state;
    float x[67], y[67];
    uint16_t a[67], b[67];
    for (int i = 0; i < 67; i++)
        x[i] = (float)(i * 37 % 101) / 7.0f - 5.0f;
    for (size_t n = 0; n <= 33; n++)
        for (size_t off = 0; off < 3; off++) {
            so_f32_to_f16(a + off, x + off, n);
            so_f16_to_f32(y + off, a + off, n);
            so_f32_to_bf16(b + off, x + off, n);
            float rb[67], rh[67];
            memcpy(rb, x, sizeof rb);
            memcpy(rh, x, sizeof rh);
            so_round_to(SO_DTYPE_BF16, rb + off, n);
            so_round_to(SO_DTYPE_F16, rh + off, n);
            for (size_t i = off; i < off + n; i++) {
                assert_int_equal(bits(rb[i]), bits(so_bf16_to_f32_1(b[i])));
                assert_int_equal(bits(rh[i]), bits(y[i]));
                assert_int_equal(a[i], so_f32_to_f16_1(x[i]));
                assert_int_equal(b[i], so_f32_to_bf16_1(x[i]));
                assert_int_equal(bits(y[i]), bits(so_f16_to_f32_1(a[i])));
            }
        }
}

static void test_names(void **state)
{
    (void)state;
    so_dtype dt;
    assert_int_equal(so_dtype_size(SO_DTYPE_F32), 4);
    assert_int_equal(so_dtype_size(SO_DTYPE_BF16), 2);
    assert_int_equal(so_dtype_size(SO_DTYPE_F16), 2);
    assert_int_equal(so_dtype_size(SO_DTYPE_F64), 8);
    assert_int_equal(so_dtype_size(SO_DTYPE_I64), 8);
    assert_int_equal(so_dtype_size(SO_DTYPE_COUNT), 0);
    for (int i = 0; i < SO_DTYPE_COUNT; i++) {
        assert_int_equal(so_dtype_parse(so_dtype_name((so_dtype)i), &dt), 0);
        assert_int_equal(dt, i);
    }
    assert_int_equal(so_dtype_parse("half", &dt), 0);
    assert_int_equal(dt, SO_DTYPE_F16);
    assert_int_equal(so_dtype_parse("bfloat16", &dt), 0);
    assert_int_equal(dt, SO_DTYPE_BF16);
    assert_int_equal(so_dtype_parse("f8", &dt), SO_EINVAL);
    assert_string_equal(so_reduce_op_name(SO_REDUCE_AVG), "avg");
    assert_null(so_reduce_op_name((so_reduce_op)7));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16),          cmocka_unit_test(test_f16_all_halves),
        cmocka_unit_test(test_f16_rounding),  cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_names),
    };
    if (isa_cap_redundant())
        return 77;
    print_message("fp16 conversion kernel: %s\n", so_f16_kernel());
    return cmocka_run_group_tests(tests, NULL, NULL);
}
