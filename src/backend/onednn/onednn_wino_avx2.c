/* Winograd 3x3 stride-1 convolution for AVX2+FMA (Lavin & Gray 2016) on
 * nChw8c activations: one ymm holds the 8 channels of a block. F(4x4,3x3) or
 * F(2x2,3x3) per plan (od_wino.m, chosen in onednn_wino.c). Built for
 * AVX2+FMA whatever the baseline; runs only where od_wino_wanted said AVX2. */
#include <immintrin.h>
#include <omp.h>
#include <stddef.h>

#include "backend/onednn/onednn_internal.h"
#include "core/isa_target.h"

SO_ISA_BEGIN(SO_TARGET_AVX2)

typedef __m256 vf;
#define AMAX 6 /* largest tile side alpha = m + 2 */
#define ROWS 6 /* tiles per GEMM register block: 6 x 2 ymm accumulators */
#define INL static inline __attribute__((always_inline))

INL vf v_set1(float x) { return _mm256_set1_ps(x); }
INL vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
INL vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
INL vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }   /* a*b + c */
INL vf v_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); } /* c - a*b */

/* ---- 1-D transforms (applied to columns, then rows) ---- */

/* y = B^T x: the data transform, x and y strided (in vectors). */
INL void in_1d(const vf *x, int xs, vf *y, int ys, const int m)
{
    if (m == 4) {
        vf d0 = x[0], d1 = x[xs], d2 = x[2 * xs], d3 = x[3 * xs], d4 = x[4 * xs], d5 = x[5 * xs];
        vf c2 = v_set1(2.0f), c4 = v_set1(4.0f), c5 = v_set1(5.0f);
        vf s12 = v_add(d1, d2), t12 = v_sub(d1, d2), t31 = v_sub(d3, d1), t42 = v_sub(d4, d2);
        y[0] = v_fma(c4, d0, v_fnma(c5, d2, d4));
        y[ys] = v_fnma(c4, s12, v_add(d3, d4));
        y[2 * ys] = v_fma(c4, t12, v_sub(d4, d3));
        y[3 * ys] = v_fma(c2, t31, t42);
        y[4 * ys] = v_fnma(c2, t31, t42);
        y[5 * ys] = v_fma(c4, d1, v_fnma(c5, d3, d5));
    } else {
        vf d0 = x[0], d1 = x[xs], d2 = x[2 * xs], d3 = x[3 * xs];
        y[0] = v_sub(d0, d2);
        y[ys] = v_add(d1, d2);
        y[2 * ys] = v_sub(d2, d1);
        y[3 * ys] = v_sub(d1, d3);
    }
}

/* y = A^T x: the output transform (m outputs from m + 2 points). */
INL void out_1d(const vf *x, int xs, vf *y, int ys, const int m)
{
    if (m == 4) {
        vf m1 = x[xs], m2 = x[2 * xs], m3 = x[3 * xs], m4 = x[4 * xs];
        vf a = v_add(m1, m2), b = v_sub(m1, m2), c = v_add(m3, m4), d = v_sub(m3, m4);
        y[0] = v_add(v_add(x[0], a), c);
        y[ys] = v_fma(v_set1(2.0f), d, b);
        y[2 * ys] = v_fma(v_set1(4.0f), c, a);
        y[3 * ys] = v_add(v_fma(v_set1(8.0f), d, b), x[5 * xs]);
    } else {
        vf a = x[xs], b = x[2 * xs];
        y[0] = v_add(v_add(x[0], a), b);
        y[ys] = v_sub(v_sub(a, b), x[3 * xs]);
    }
}

/* u = G g: the weight transform of 3 taps (scalar: once per weight change). */
static void w_1d(const float *g, int gs, float *u, int us, int m)
{
    float g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
    if (m == 4) {
        u[0] = g0 / 4.0f;
        u[us] = -(g0 + g1 + g2) / 6.0f;
        u[2 * us] = -(g0 - g1 + g2) / 6.0f;
        u[3 * us] = g0 / 24.0f + g1 / 12.0f + g2 / 6.0f;
        u[4 * us] = g0 / 24.0f - g1 / 12.0f + g2 / 6.0f;
        u[5 * us] = g2;
    } else {
        u[0] = g0;
        u[us] = (g0 + g1 + g2) / 2.0f;
        u[2 * us] = (g0 - g1 + g2) / 2.0f;
        u[3 * us] = g2;
    }
}

/* Threads for n work items: no more than the plan has buffers for. */
static int threads(const od_wino *w, int n)
{
    int t = omp_get_max_threads();
    t = t < w->nthr ? t : w->nthr;
    return t < n ? t : n < 1 ? 1 : n;
}

/* ---- weights ---- */

/* U[p][ob][ci][j] = (G K G^T)[p] for output channel ob*16 + j, where K is
 * W (OIHW) forward, and for backward data W rotated by 180 degrees with
 * input and output channels swapped. Blocks of 16 output channels (8 for
 * a last odd block) feed the GEMM's two ymm columns. */
void od_wino_avx2_weights(const od_wino *w, const float *W, float *U)
{
    const int a = w->m + 2, ic = w->ic, oc = w->oc;
#pragma omp parallel for schedule(static) num_threads(threads(w, oc))
    for (int co = 0; co < oc; co++) {
        int ob = co / 16, obw = oc - ob * 16 < 16 ? oc - ob * 16 : 16;
        for (int ci = 0; ci < ic; ci++) {
            float g[9], t[AMAX * 3], u[AMAX * AMAX];
            for (int k = 0; k < 9; k++)
                g[k] = w->flip ? W[((size_t)ci * oc + co) * 9 + 8 - k] : W[((size_t)co * ic + ci) * 9 + k];
            for (int x = 0; x < 3; x++)
                w_1d(g + x, 3, t + x, 3, w->m); /* columns: t = G g (a x 3) */
            for (int y = 0; y < a; y++)
                w_1d(t + y * 3, 1, u + y * a, 1, w->m); /* rows: u = t G^T */
            float *dst = U + (size_t)ob * 16 * ic + (size_t)ci * obw + (co - ob * 16);
            for (int p = 0; p < a * a; p++)
                dst[(size_t)p * ic * oc] = u[p];
        }
    }
}

/* ---- per-tile transforms ---- */

/* The a x a input patch at (y0, x0) of one nChw8c channel block, zeros
 * outside the image (padding and partial tiles), transformed: B^T d B. */
INL void in_tile(const float *blk, int h, int wd, int y0, int x0, vf *v, const int m)
{
    const int a = m + 2;
    vf d[AMAX * AMAX], t[AMAX * AMAX];
    if (y0 >= 0 && x0 >= 0 && y0 + a <= h && x0 + a <= wd) {
        for (int i = 0; i < a; i++)
            for (int j = 0; j < a; j++)
                d[i * a + j] = _mm256_loadu_ps(blk + ((size_t)(y0 + i) * wd + x0 + j) * 8);
    } else {
        for (int i = 0; i < a; i++)
            for (int j = 0; j < a; j++) {
                int y = y0 + i, x = x0 + j;
                d[i * a + j] = y >= 0 && y < h && x >= 0 && x < wd
                                   ? _mm256_loadu_ps(blk + ((size_t)y * wd + x) * 8)
                                   : _mm256_setzero_ps();
            }
    }
    for (int j = 0; j < a; j++)
        in_1d(d + j, a, t + j, a, m);
    for (int i = 0; i < a; i++)
        in_1d(t + i * a, 1, v + i * a, 1, m);
}

/* Y = A^T M A for one tile and 8 output channels, + bias, ReLU'd when fused,
 * stored where it lies inside the oh x ow output. */
INL void out_tile(const float *mt, size_t ps, float *blk, int oh, int ow, int y0, int x0, vf bias, int relu,
                  const int m)
{
    const int a = m + 2;
    vf x[AMAX * AMAX], t[4 * AMAX], y[16];
    for (int p = 0; p < a * a; p++)
        x[p] = _mm256_loadu_ps(mt + p * ps);
    for (int j = 0; j < a; j++)
        out_1d(x + j, a, t + j, a, m);
    for (int i = 0; i < m; i++)
        out_1d(t + i * a, 1, y + i * m, 1, m);
    for (int i = 0; i < m && y0 + i < oh; i++)
        for (int j = 0; j < m && x0 + j < ow; j++) {
            vf r = v_add(y[i * m + j], bias);
            if (relu)
                r = _mm256_max_ps(r, _mm256_setzero_ps());
            _mm256_storeu_ps(blk + ((size_t)(y0 + i) * ow + x0 + j) * 8, r);
        }
}

/* ---- the Winograd-domain GEMM ---- */

/* mo[r][0..8*nv) = sum_i v[r][i] * u[i][0..8*nv) for R tiles (rows of v
 * and mo strided by ic and oc). R x nv accumulators stay in registers. */
INL void gemm_rows(const float *v, const float *u, float *mo, int ic, int oc, const int R, const int nv)
{
    vf acc[ROWS][2];
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const int uw = 8 * nv;
    for (int i = 0; i < ic; i++) {
        vf u0 = _mm256_loadu_ps(u + (size_t)i * uw);
        vf u1 = nv > 1 ? _mm256_loadu_ps(u + (size_t)i * uw + 8) : u0;
        for (int r = 0; r < R; r++) {
            vf b = _mm256_broadcast_ss(v + (size_t)r * ic + i);
            acc[r][0] = v_fma(b, u0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = v_fma(b, u1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(mo + (size_t)r * oc, acc[r][0]);
        if (nv > 1)
            _mm256_storeu_ps(mo + (size_t)r * oc + 8, acc[r][1]);
    }
}

#define GEMM_CASE(R)                                                                               \
    case R:                                                                                        \
        if (nv == 2)                                                                               \
            gemm_rows(v, u, mo, ic, oc, R, 2);                                                     \
        else                                                                                       \
            gemm_rows(v, u, mo, ic, oc, R, 1);                                                     \
        break;

/* One Winograd point p of a block of nt tiles: M[p] (nt x oc) = V[p] U[p].
 * U[p][ob] (ic x 16 floats) stays in L1 across the block's tile rows. */
static void gemm_point(const float *V, const float *U, float *M, int nt, int ic, int oc)
{
    for (int ob = 0; ob * 16 < oc; ob++) {
        int nv = oc - ob * 16 >= 16 ? 2 : 1;
        const float *u = U + (size_t)ob * 16 * ic;
        for (int t = 0; t < nt; t += ROWS) {
            const float *v = V + (size_t)t * ic;
            float *mo = M + (size_t)t * oc + ob * 16;
            switch (nt - t < ROWS ? nt - t : ROWS) {
                GEMM_CASE(1)
                GEMM_CASE(2)
                GEMM_CASE(3)
                GEMM_CASE(4)
                GEMM_CASE(5)
            default:
                if (nv == 2)
                    gemm_rows(v, u, mo, ic, oc, ROWS, 2);
                else
                    gemm_rows(v, u, mo, ic, oc, ROWS, 1);
                break;
            }
        }
    }
}

/* ---- one block of tiles: transform in, 36 (or 16) GEMMs, transform out ---- */

typedef struct {
    int n, y0, x0; /* image, top-left output position */
} tile_pos;

static tile_pos tile_at(const od_wino *w, int g)
{
    int per = w->th * w->tw, r = g % per;
    return (tile_pos){g / per, r / w->tw * w->m, r % w->tw * w->m};
}

INL void block_in(const od_wino *w, const float *src, float *V, int t0, int nt, const int m)
{
    const int a = m + 2, cb = w->ic / 8;
    size_t ps = (size_t)w->tblock * w->ic, plane = (size_t)w->ih * w->iw * 8;
    for (int t = 0; t < nt; t++) {
        tile_pos tp = tile_at(w, t0 + t);
        for (int c = 0; c < cb; c++) {
            vf v[AMAX * AMAX];
            in_tile(src + ((size_t)tp.n * cb + c) * plane, w->ih, w->iw, tp.y0 - w->pad, tp.x0 - w->pad, v, m);
            float *dst = V + (size_t)t * w->ic + c * 8;
            for (int p = 0; p < a * a; p++)
                _mm256_storeu_ps(dst + p * ps, v[p]);
        }
    }
}

INL void block_out(const od_wino *w, const float *M, const float *bias, int relu, float *dst, int t0, int nt,
                   const int m)
{
    const int ob8 = w->oc / 8;
    size_t ps = (size_t)w->tblock * w->oc, plane = (size_t)w->oh * w->ow * 8;
    for (int t = 0; t < nt; t++) {
        tile_pos tp = tile_at(w, t0 + t);
        for (int o = 0; o < ob8; o++) {
            vf b = bias ? _mm256_loadu_ps(bias + o * 8) : _mm256_setzero_ps();
            out_tile(M + (size_t)t * w->oc + o * 8, ps, dst + ((size_t)tp.n * ob8 + o) * plane, w->oh, w->ow,
                     tp.y0, tp.x0, b, relu, m);
        }
    }
}

INL void run_block(const od_wino *w, const float *U, const float *src, const float *bias, int relu, float *dst,
                   float *V, float *M, int t0, const int m)
{
    const int a = m + 2;
    int nt = w->ntiles - t0 < w->tblock ? w->ntiles - t0 : w->tblock;
    block_in(w, src, V, t0, nt, m);
    for (int p = 0; p < a * a; p++)
        gemm_point(V + (size_t)p * w->tblock * w->ic, U + (size_t)p * w->ic * w->oc,
                   M + (size_t)p * w->tblock * w->oc, nt, w->ic, w->oc);
    block_out(w, M, bias, relu, dst, t0, nt, m);
}

static void run_block4(const od_wino *w, const float *U, const float *src, const float *bias, int relu, float *dst,
                       float *V, float *M, int t0)
{
    run_block(w, U, src, bias, relu, dst, V, M, t0, 4);
}

static void run_block2(const od_wino *w, const float *U, const float *src, const float *bias, int relu, float *dst,
                       float *V, float *M, int t0)
{
    run_block(w, U, src, bias, relu, dst, V, M, t0, 2);
}

/* dst = conv(src, K) (+ bias, ReLU'd when fused), blocks of tiles split
 * over the threads; each thread's V and M stay in its own L2. */
void od_wino_avx2_conv(const od_wino *w, const float *U, const float *src, const float *bias, int relu, float *dst)
{
    int nb = (w->ntiles + w->tblock - 1) / w->tblock;
#pragma omp parallel num_threads(threads(w, nb))
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        float *V = w->tb[id], *M = V + w->v_floats;
        for (int b = nb * id / n; b < nb * (id + 1) / n; b++) {
            if (w->m == 4)
                run_block4(w, U, src, bias, relu, dst, V, M, b * w->tblock);
            else
                run_block2(w, U, src, bias, relu, dst, V, M, b * w->tblock);
        }
    }
}

SO_ISA_END
