/* The reduction kernels of every algorithm, per element type (reduce.h).
 * F32 keeps its three loops (one per op, no branches inside, SO_VEC_CLONES:
 * one copy per ISA picked at load time, the same bits). BF16 / F16 go
 * through blocks of FP32 in L1: widen (exact), combine, round once (the
 * conversions of scaleout/dtype.h, vectorised there). F64 / I64 are plain
 * loops: they carry a few counters and statistics, not gradients. */
#include "reduce.h"

#include "core/vec_clones.h"
#include "scaleout/err.h"

#include <string.h>
#if defined(__SSE__)
#include <immintrin.h>
#endif

#define BLK 512 /* FP32 elements of a 16-bit block: two blocks stay in L1 */

int so_red_check(so_dtype dt, so_reduce_op op)
{
    if ((unsigned)dt >= SO_DTYPE_COUNT)
        return so_err(SO_EINVAL, "invalid element type %d", (int)dt);
    if ((unsigned)op > SO_REDUCE_MIN)
        return so_err(SO_EINVAL, "invalid reduce op %d", (int)op);
    if (dt == SO_DTYPE_I64 && op == SO_REDUCE_AVG)
        return so_err(SO_EINVAL, "i64 has no average (sum, max, min)");
    return 0;
}

/* ---- F32 ----------------------------------------------------------------------------
 * dst may equal a: every element is read before it is written, and the
 * compiler is told only b is distinct, so both pointers are not restrict.
 * The ternaries for max/min compile to vmaxps / vminps. */
SO_VEC_CLONES static void sum_out(float *dst, const float *a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] + b[i];
}

SO_VEC_CLONES static void max_out(float *dst, const float *a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = b[i] > a[i] ? b[i] : a[i];
}

SO_VEC_CLONES static void min_out(float *dst, const float *a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = b[i] < a[i] ? b[i] : a[i];
}

/* The last input of an average's sum with the 1/p multiply in the same pass:
 * (a + b) rounded, then times scale rounded, as the two passes give (a
 * multiply after an add is no FMA: nothing to contract). */
SO_VEC_CLONES static void sum_scale_out(float *dst, const float *a, const float *restrict b, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (a[i] + b[i]) * scale;
}

SO_VEC_CLONES static void scale_out(float *dst, const float *a, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] * scale;
}

void so_reduce_out(float *dst, const float *a, const float *b, size_t n, so_reduce_op op)
{
    if (op == SO_REDUCE_MAX)
        max_out(dst, a, b, n);
    else if (op == SO_REDUCE_MIN)
        min_out(dst, a, b, n);
    else
        sum_out(dst, a, b, n);
}

void so_reduce_acc(float *dst, const float *src, size_t n, so_reduce_op op) { so_reduce_out(dst, dst, src, n, op); }

/* ---- F64 and I64 ------------------------------------------------------------------------ */

static void red_f64(double *dst, const double *a, const double *b, size_t n, so_reduce_op op)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = op == SO_REDUCE_MAX ? (b[i] > a[i] ? b[i] : a[i])
                 : op == SO_REDUCE_MIN ? (b[i] < a[i] ? b[i] : a[i])
                                       : a[i] + b[i];
}

static void red_i64(int64_t *dst, const int64_t *a, const int64_t *b, size_t n, so_reduce_op op)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = op == SO_REDUCE_MAX ? (b[i] > a[i] ? b[i] : a[i])
                 : op == SO_REDUCE_MIN ? (b[i] < a[i] ? b[i] : a[i])
                                       : (int64_t)((uint64_t)a[i] + (uint64_t)b[i]); /* wraps, no UB */
}

/* ---- BF16 and F16 through FP32 blocks ------------------------------------------------------ */

static void widen(so_dtype dt, float *dst, const void *src, size_t n)
{
    if (dt == SO_DTYPE_BF16)
        so_bf16_to_f32(dst, src, n);
    else
        so_f16_to_f32(dst, src, n);
}

static void narrow(so_dtype dt, void *dst, const float *src, size_t n)
{
    if (dt == SO_DTYPE_BF16)
        so_f32_to_bf16(dst, src, n);
    else
        so_f32_to_f16(dst, src, n);
}

static void red_16(so_dtype dt, so_reduce_op op, uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n)
{
    float ta[BLK], tb[BLK];
    for (size_t o = 0; o < n; o += BLK) {
        size_t k = n - o < BLK ? n - o : BLK;
        widen(dt, ta, a + o, k); /* a's block is read before dst's is written */
        widen(dt, tb, b + o, k);
        so_reduce_out(ta, ta, tb, k, op);
        narrow(dt, dst + o, ta, k);
    }
}

static void red_multi_16(so_dtype dt, so_reduce_op op, uint16_t *dst, const void *const *in, int k, size_t n)
{
    float acc[BLK], t[BLK];
    for (size_t o = 0; o < n; o += BLK) {
        size_t m = n - o < BLK ? n - o : BLK;
        widen(dt, acc, (const uint16_t *)in[0] + o, m);
        for (int j = 1; j < k; j++) {
            widen(dt, t, (const uint16_t *)in[j] + o, m);
            so_reduce_out(acc, acc, t, m, op);
        }
        narrow(dt, dst + o, acc, m);
    }
}

/* ---- dispatch --------------------------------------------------------------------------------- */

void so_red(so_dtype dt, so_reduce_op op, void *dst, const void *a, const void *b, size_t n)
{
    switch (dt) {
    case SO_DTYPE_F32: so_reduce_out(dst, a, b, n, op); break;
    case SO_DTYPE_F64: red_f64(dst, a, b, n, op); break;
    case SO_DTYPE_I64: red_i64(dst, a, b, n, op); break;
    default: red_16(dt, op, dst, a, b, n);
    }
}

void so_red_multi(so_dtype dt, so_reduce_op op, void *dst, const void *const *in, int k, size_t n)
{
    if (dt == SO_DTYPE_BF16 || dt == SO_DTYPE_F16) {
        red_multi_16(dt, op, dst, in, k, n);
        return;
    }
    if (k == 1) {
        if (dst != in[0])
            memcpy(dst, in[0], n * so_dtype_size(dt));
        return;
    }
    so_red(dt, op, dst, in[0], in[1], n);
    for (int j = 2; j < k; j++)
        so_red(dt, op, dst, dst, in[j], n);
}

void so_red_multi_avg(so_dtype dt, void *dst, const void *const *in, int k, size_t n, int p)
{
    float scale = 1.0f / (float)p; /* as so_red_avg */
    if (dt != SO_DTYPE_F32 || scale == 1.0f) {
        so_red_multi(dt, SO_REDUCE_SUM, dst, in, k, n);
        so_red_avg(dt, dst, n, p);
        return;
    }
    if (k == 1) {
        scale_out(dst, in[0], n, scale);
        return;
    }
    const float *acc = in[0];
    for (int j = 1; j < k - 1; j++, acc = dst)
        sum_out(dst, acc, in[j], n);
    sum_scale_out(dst, acc, in[k - 1], n, scale);
}

void so_red_avg(so_dtype dt, void *x, size_t n, int p)
{
    float scale = 1.0f / (float)p; /* multiply, not divide: one rounding, the same on every rank */
    if (dt == SO_DTYPE_F32 && scale != 1.0f) {
        float *f = x;
        for (size_t i = 0; i < n; i++)
            f[i] *= scale;
    } else if (dt == SO_DTYPE_F64 && p != 1) {
        double *d = x;
        for (size_t i = 0; i < n; i++)
            d[i] /= p;
    } else if ((dt == SO_DTYPE_BF16 || dt == SO_DTYPE_F16) && p != 1) {
        float t[BLK];
        for (size_t o = 0; o < n; o += BLK) {
            size_t k = n - o < BLK ? n - o : BLK;
            widen(dt, t, (uint16_t *)x + o, k);
            for (size_t i = 0; i < k; i++)
                t[i] *= scale;
            narrow(dt, (uint16_t *)x + o, t, k);
        }
    }
}

/* ---- copies ---------------------------------------------------------------------------------
 * Non-temporal stores: the destination lines go to memory instead of staying
 * modified in this core's cache. Used for data another core reads next: on
 * the 2-vCPU EPYC a read of lines modified in the other vCPU's cache costs a
 * cross-core snoop each (100-350 ns, "near/far" placement), a read of lines
 * in memory / L3 streams at memory bandwidth. */
void so_copy_nt(void *dstv, const void *srcv, size_t bytes)
{
#if defined(__SSE__)
    char *dst = dstv;
    const char *src = srcv;
    size_t i = 0;
    for (; i < bytes && ((uintptr_t)(dst + i) & 15); i++)
        dst[i] = src[i];
    for (; i + 64 <= bytes; i += 64) {
        __m128 a = _mm_loadu_ps((const float *)(const void *)(src + i));
        __m128 b = _mm_loadu_ps((const float *)(const void *)(src + i + 16));
        __m128 c = _mm_loadu_ps((const float *)(const void *)(src + i + 32));
        __m128 d = _mm_loadu_ps((const float *)(const void *)(src + i + 48));
        _mm_stream_ps((float *)(void *)(dst + i), a);
        _mm_stream_ps((float *)(void *)(dst + i + 16), b);
        _mm_stream_ps((float *)(void *)(dst + i + 32), c);
        _mm_stream_ps((float *)(void *)(dst + i + 48), d);
    }
    for (; i < bytes; i++)
        dst[i] = src[i];
    _mm_sfence(); /* order the streaming stores before the flag's release store */
#else
    memcpy(dstv, srcv, bytes);
#endif
}

/* ---- MPI names -------------------------------------------------------------------------------- */

MPI_Datatype so_mpi_dtype(so_dtype dt)
{
    switch (dt) {
    case SO_DTYPE_F32: return MPI_FLOAT;
    case SO_DTYPE_F64: return MPI_DOUBLE;
    case SO_DTYPE_I64: return MPI_INT64_T;
    default: return MPI_UINT16_T;
    }
}

/* MPI_User_function for the 16-bit types: inout = in op inout, in FP32. */
static void user_op(so_dtype dt, so_reduce_op op, void *in, void *inout, int *len)
{
    red_16(dt, op, inout, in, inout, (size_t)*len);
}
static void bf16_sum(void *in, void *io, int *len, MPI_Datatype *t) { (void)t; user_op(SO_DTYPE_BF16, SO_REDUCE_SUM, in, io, len); }
static void bf16_max(void *in, void *io, int *len, MPI_Datatype *t) { (void)t; user_op(SO_DTYPE_BF16, SO_REDUCE_MAX, in, io, len); }
static void bf16_min(void *in, void *io, int *len, MPI_Datatype *t) { (void)t; user_op(SO_DTYPE_BF16, SO_REDUCE_MIN, in, io, len); }
static void f16_sum(void *in, void *io, int *len, MPI_Datatype *t) { (void)t; user_op(SO_DTYPE_F16, SO_REDUCE_SUM, in, io, len); }
static void f16_max(void *in, void *io, int *len, MPI_Datatype *t) { (void)t; user_op(SO_DTYPE_F16, SO_REDUCE_MAX, in, io, len); }
static void f16_min(void *in, void *io, int *len, MPI_Datatype *t) { (void)t; user_op(SO_DTYPE_F16, SO_REDUCE_MIN, in, io, len); }

int so_mpi_op(so_dtype dt, so_reduce_op op, MPI_Op *out)
{
    int k = op == SO_REDUCE_MAX ? 1 : op == SO_REDUCE_MIN ? 2 : 0;
    if (dt != SO_DTYPE_BF16 && dt != SO_DTYPE_F16) {
        static const MPI_Op builtin[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
        *out = builtin[k];
        return 0;
    }
    /* Made on first use by the thread that owns MPI at the time (SERIALIZED:
     * never two at once); commutative, so MPI may combine in any order. */
    static MPI_Op ops[2][3] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};
    static MPI_User_function *const fns[2][3] = {{bf16_sum, bf16_max, bf16_min}, {f16_sum, f16_max, f16_min}};
    int t = dt == SO_DTYPE_F16;
    if (ops[t][k] == MPI_OP_NULL) {
        int mrc = MPI_Op_create(fns[t][k], 1, &ops[t][k]);
        if (mrc != MPI_SUCCESS)
            return so_mpi_err(mrc, "MPI_Op_create");
    }
    *out = ops[t][k];
    return 0;
}
