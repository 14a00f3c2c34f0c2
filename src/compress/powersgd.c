/* PowerSGD's matrix kernels (Vogels et al. 2019; torch's powerSGD_hook):
 * one step of subspace iteration per training step on each weight matrix M,
 * rows x cols, with a rank-r Q kept from the last step (warm start):
 *     P = M Q            (allreduced: the sum over ranks of M_k Q)
 *     P = orthonormal(P)
 *     Q = M^T P          (allreduced, then / ranks)
 *     M ~ P Q^T
 * P and Q^T are small (rows x r, r x cols). M Q and P^T M run on each rank's
 * own M (any summation order, FMA allowed); orthonormalisation and P Q^T run
 * on what every rank received, so they are element-wise or scalar in a fixed
 * order: every rank gets the same bits. */
#include <math.h>
#include <string.h>

#include "compress_internal.h"
#include "core/isa_target.h"
#include "core/vec_clones.h"
#include "scaleout/compress.h"
#include "scaleout/rng.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

static void p_scalar(float *P, const float *M, const float *Qt, size_t rows, size_t cols, int r)
{
    for (size_t i = 0; i < rows; i++)
        for (int j = 0; j < r; j++) {
            const float *m = M + i * cols, *q = Qt + (size_t)j * cols;
            float acc = 0;
            for (size_t c = 0; c < cols; c++)
                acc += m[c] * q[c];
            P[i * (size_t)r + (size_t)j] = acc;
        }
}

static void q_scalar(float *Qt, const float *M, const float *P, size_t rows, size_t cols, int r)
{
    memset(Qt, 0, (size_t)r * cols * sizeof *Qt);
    for (size_t i = 0; i < rows; i++)
        for (int j = 0; j < r; j++) {
            const float *m = M + i * cols;
            float *q = Qt + (size_t)j * cols, p = P[i * (size_t)r + (size_t)j];
            for (size_t c = 0; c < cols; c++)
                q[c] += p * m[c];
        }
}

#ifdef HAVE_X86
SO_ISA_BEGIN(SO_TARGET_AVX2)
static float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Row i of M is read once for up to 4 columns of Q at a time. */
static void p_avx2(float *P, const float *M, const float *Qt, size_t rows, size_t cols, int r)
{
    for (size_t i = 0; i < rows; i++) {
        const float *m = M + i * cols;
        for (int j0 = 0; j0 < r; j0 += 4) {
            int nj = r - j0 < 4 ? r - j0 : 4;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            size_t c = 0;
            for (; c + 8 <= cols; c += 8) {
                __m256 mv = _mm256_loadu_ps(m + c);
                for (int j = 0; j < nj; j++)
                    acc[j] = _mm256_fmadd_ps(mv, _mm256_loadu_ps(Qt + (size_t)(j0 + j) * cols + c), acc[j]);
            }
            for (int j = 0; j < nj; j++) {
                float s = hsum(acc[j]);
                for (size_t t = c; t < cols; t++)
                    s += m[t] * Qt[(size_t)(j0 + j) * cols + t];
                P[i * (size_t)r + (size_t)(j0 + j)] = s;
            }
        }
    }
}

static void q_avx2(float *Qt, const float *M, const float *P, size_t rows, size_t cols, int r)
{
    memset(Qt, 0, (size_t)r * cols * sizeof *Qt);
    for (size_t i = 0; i < rows; i++) {
        const float *m = M + i * cols;
        for (int j = 0; j < r; j++) {
            float *q = Qt + (size_t)j * cols, p = P[i * (size_t)r + (size_t)j];
            __m256 pv = _mm256_set1_ps(p);
            size_t c = 0;
            for (; c + 8 <= cols; c += 8)
                _mm256_storeu_ps(q + c, _mm256_fmadd_ps(pv, _mm256_loadu_ps(m + c), _mm256_loadu_ps(q + c)));
            for (; c < cols; c++)
                q[c] += p * m[c];
        }
    }
}
SO_ISA_END
#endif

void so_compress_psgd_p(float *P, const float *M, const float *Qt, size_t rows, size_t cols, int r)
{
#ifdef HAVE_X86
    if (cx_avx2()) {
        p_avx2(P, M, Qt, rows, cols, r);
        return;
    }
#endif
    p_scalar(P, M, Qt, rows, cols, r);
}

void so_compress_psgd_q(float *Qt, const float *M, const float *P, size_t rows, size_t cols, int r)
{
#ifdef HAVE_X86
    if (cx_avx2()) {
        q_avx2(Qt, M, P, rows, cols, r);
        return;
    }
#endif
    q_scalar(Qt, M, P, rows, cols, r);
}

/* Modified Gram-Schmidt in double over r vectors of len values, vector j's
 * value i at v[i * si + j * sj], one after another. */
static void gram_schmidt(float *v, size_t len, size_t r, size_t si, size_t sj)
{
    for (size_t j = 0; j < r; j++) {
        float *x = v + j * sj;
        for (size_t k = 0; k < j; k++) {
            const float *y = v + k * sj;
            double d = 0;
            for (size_t i = 0; i < len; i++)
                d += (double)y[i * si] * x[i * si];
            for (size_t i = 0; i < len; i++)
                x[i * si] = (float)(x[i * si] - d * y[i * si]);
        }
        double sq = 0;
        for (size_t i = 0; i < len; i++)
            sq += (double)x[i * si] * x[i * si];
        double norm = sqrt(sq);
        if (norm < 1e-8) /* as torch: a zero column does not divide by zero */
            norm = 1e-8;
        for (size_t i = 0; i < len; i++)
            x[i * si] = (float)(x[i * si] / norm);
    }
}

/* P's columns: value i of column j at P[i r + j]. */
void so_compress_psgd_orthonormalize(float *P, size_t rows, int r) { gram_schmidt(P, rows, (size_t)r, (size_t)r, 1); }

/* Q's columns are Qt's rows: value i of column j at Qt[j cols + i]. */
void so_compress_psgd_orthonormalize_qt(float *Qt, size_t cols, int r) { gram_schmidt(Qt, cols, (size_t)r, 1, cols); }

SO_VEC_CLONES static void axpy_row(float *restrict out, const float *restrict q, float p, size_t cols, int first)
{
    if (first)
        for (size_t c = 0; c < cols; c++)
            out[c] = p * q[c];
    else
        for (size_t c = 0; c < cols; c++)
            out[c] += p * q[c];
}

SO_VEC_CLONES static void scale_row(float *restrict out, size_t cols, float s)
{
    for (size_t c = 0; c < cols; c++)
        out[c] *= s;
}

void so_compress_psgd_approx(float *out, const float *P, const float *Qt, size_t rows, size_t cols, int r,
                             float scale)
{
    for (size_t i = 0; i < rows; i++) {
        float *o = out + i * cols;
        for (int j = 0; j < r; j++)
            axpy_row(o, Qt + (size_t)j * cols, P[i * (size_t)r + (size_t)j], cols, j == 0);
        if (scale != 1.0f)
            scale_row(o, cols, scale);
    }
}

void so_compress_psgd_init(float *Qt, size_t cols, int r, uint64_t key)
{
    so_rng g;
    so_rng_seed(&g, key);
    for (size_t i = 0; i < (size_t)r * cols; i++)
        Qt[i] = so_rng_normal(&g);
}
