/* BF16 activation storage under --precision bf16: which tensors between
 * layers are kept as BF16 (decided from the graph before any op exists),
 * and the element-wise loops the backend's own passes (residual adds, ReLU
 * masks, diff accumulation) run on them. Sums are taken in FP32 and rounded
 * to nearest even once, as oneDNN's BF16 primitives do. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/onednn/onednn_internal.h"
#include "core/bf16_bits.h"
#include "core/vec_clones.h"

/* ---- the plan ---- */

/* SAME: reads and writes one data type (oneDNN's BF16 batch norm, eltwise,
 * sum and pooling take src and dst alike; the add's own loops follow).
 * FREE: reads either and writes either (a convolution: BF16 or FP32 source,
 * FP32 accumulation, BF16 or FP32 output). NO: FP32 in and out. */
typedef enum { HALF_NO, HALF_SAME, HALF_FREE } half_role;

static half_role role(od_state *s, int i)
{
    switch (od_node(s, i)->op) {
    case SO_OP_CONV:
        return od_conv_small(s, i) ? HALF_NO : HALF_FREE;
    case SO_OP_BATCHNORM: /* the synchronised statistics are FP32 loops over the source */
        return s->m->sync_bn ? HALF_NO : HALF_SAME;
    case SO_OP_RELU:
    case SO_OP_TANH:
    case SO_OP_SIGMOID:
    case SO_OP_ADD:
    case SO_OP_MAXPOOL:
    case SO_OP_AVGPOOL:
    case SO_OP_GAP:
        return HALF_SAME;
    default:
        return HALF_NO;
    }
}

/* Node j can read a BF16 input: the roles above; flatten, whose reorder to
 * the dense layer's plain FP32 converts on the way; a dense layer run whole
 * (its BF16 primitives read the source as it is; chunks run FP32 sgemm). */
static int reads_half(od_state *s, int j)
{
    so_op op = od_node(s, j)->op;
    int chunked = s->m->chunks && s->m->chunks[j] > 1;
    return role(s, j) != HALF_NO || op == SO_OP_FLATTEN || (op == SO_OP_DENSE && !chunked);
}

/* Node i has consumers and every one can read BF16. */
static int consumers_read_half(od_state *s, int i)
{
    int any = 0;
    for (int j = i + 1; j < s->n; j++) {
        const so_node *nd = od_node(s, j);
        for (int k = 0; k < nd->ninputs; k++)
            if (nd->inputs[k] == i) {
                if (!reads_half(s, j))
                    return 0;
                any = 1;
            }
    }
    return any;
}

/* A SAME node whose tensors disagree puts them all on FP32; 1 if it changed any. */
static int settle(od_state *s, int j)
{
    const so_node *nd = od_node(s, j);
    int all = s->t[j].half, any = s->t[j].half;
    for (int k = 0; k < nd->ninputs; k++) {
        all &= s->t[nd->inputs[k]].half;
        any |= s->t[nd->inputs[k]].half;
    }
    if (all || !any)
        return 0;
    s->t[j].half = 0;
    for (int k = 0; k < nd->ninputs; k++)
        s->t[nd->inputs[k]].half = 0;
    return 1;
}

/* SCALEOUT_BF16_ACTIVATIONS=f32 keeps every tensor FP32 under BF16 compute
 * (the conversions before each convolution come back): for comparisons. */
static int storage_wanted(void)
{
    const char *e = getenv("SCALEOUT_BF16_ACTIVATIONS");
    return !(e && strcmp(e, "f32") == 0);
}

void od_half_plan(od_state *s)
{
    if (!od_bf16(s) || !storage_wanted())
        return;
    for (int i = 1; i < s->n; i++) /* node 0, the input, stays FP32 */
        s->t[i].half = role(s, i) != HALF_NO && consumers_read_half(s, i);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int j = 1; j < s->n; j++)
            if (role(s, j) == HALF_SAME)
                changed |= settle(s, j);
    }
}

/* ---- loops: one clone per ISA (SO_VEC_CLONES), split over the OpenMP team ----
 * Named half_* although static: clang 14 gives each target_clones function a
 * global resolver symbol, which would clash with another file's add_loop. */

SO_VEC_CLONES static void half_add_loop(uint16_t *restrict dst, const uint16_t *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = so_bf16_narrow(so_bf16_widen(dst[i]) + so_bf16_widen(src[i]));
}

SO_VEC_CLONES static void half_relu_loop(uint16_t *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = so_bf16_widen(x[i]) > 0.0f ? x[i] : 0;
}

SO_VEC_CLONES static void half_relu_bwd_loop(uint16_t *restrict d, const uint16_t *restrict out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = so_bf16_widen(out[i]) > 0.0f ? d[i] : 0;
}

SO_VEC_CLONES static void half_sum2_loop(uint16_t *restrict y, const uint16_t *restrict x0, const uint16_t *restrict x1,
                                    size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = so_bf16_narrow(so_bf16_widen(x0[i]) + so_bf16_widen(x1[i]));
}

SO_VEC_CLONES static void half_sum2_relu_loop(uint16_t *restrict y, const uint16_t *restrict x0,
                                         const uint16_t *restrict x1, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = so_bf16_widen(x0[i]) + so_bf16_widen(x1[i]);
        y[i] = so_bf16_narrow(v < 0.0f ? 0.0f : v);
    }
}

SO_VEC_CLONES static void half_mask_pair_loop(const uint16_t *restrict d, const uint16_t *restrict out,
                                         uint16_t *restrict d0, uint16_t *restrict d1, size_t n)
{
    for (size_t i = 0; i < n; i++) { /* a mask, not a select: GCC left the select scalar and branchy */
        uint16_t g = d[i] & (uint16_t)-(so_bf16_widen(out[i]) > 0.0f);
        d0[i] = g;
        d1[i] = g;
    }
}

SO_VEC_CLONES static void half_copy_pair_loop(const uint16_t *restrict d, uint16_t *restrict d0, uint16_t *restrict d1,
                                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        d0[i] = d[i];
        d1[i] = d[i];
    }
}

/* This thread's share [*lo, *hi) of n elements, in whole cache lines. */
static void share(size_t n, size_t *lo, size_t *hi)
{
#ifdef _OPENMP
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
#else
    size_t nt = 1, t = 0;
#endif
    size_t per = ((n + nt - 1) / nt + 31) & ~(size_t)31;
    *lo = t * per < n ? t * per : n;
    *hi = *lo + per < n ? *lo + per : n;
}

#define PAR_MIN 32768 /* the FP32 loops' threshold (od_vec_add) */

void od_half_add(uint16_t *dst, const uint16_t *src, size_t n)
{
#pragma omp parallel if (n > PAR_MIN)
    {
        size_t lo, hi;
        share(n, &lo, &hi);
        half_add_loop(dst + lo, src + lo, hi - lo);
    }
}

void od_half_store(uint16_t *dst, const uint16_t *src, size_t n, int add)
{
    if (add)
        od_half_add(dst, src, n);
    else
        memcpy(dst, src, n * sizeof *dst);
}

void od_half_relu(uint16_t *x, size_t n)
{
#pragma omp parallel if (n > PAR_MIN)
    {
        size_t lo, hi;
        share(n, &lo, &hi);
        half_relu_loop(x + lo, hi - lo);
    }
}

void od_half_relu_bwd(uint16_t *d, const uint16_t *out, size_t n)
{
#pragma omp parallel if (n > PAR_MIN)
    {
        size_t lo, hi;
        share(n, &lo, &hi);
        half_relu_bwd_loop(d + lo, out + lo, hi - lo);
    }
}

void od_half_add2(uint16_t *y, const uint16_t *x0, const uint16_t *x1, size_t n, int relu)
{
#pragma omp parallel if (n > PAR_MIN)
    {
        size_t lo, hi;
        share(n, &lo, &hi);
        if (relu)
            half_sum2_relu_loop(y + lo, x0 + lo, x1 + lo, hi - lo);
        else
            half_sum2_loop(y + lo, x0 + lo, x1 + lo, hi - lo);
    }
}

void od_half_to_pair(const uint16_t *d, const uint16_t *out, uint16_t *d0, uint16_t *d1, size_t n, int mask)
{
#pragma omp parallel if (n > PAR_MIN)
    {
        size_t lo, hi;
        share(n, &lo, &hi);
        if (mask)
            half_mask_pair_loop(d + lo, out + lo, d0 + lo, d1 + lo, hi - lo);
        else
            half_copy_pair_loop(d + lo, d0 + lo, d1 + lo, hi - lo);
    }
}
