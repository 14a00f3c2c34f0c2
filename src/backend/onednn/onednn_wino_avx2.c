/* Winograd 3x3 stride-1 convolution for AVX2+FMA (Lavin & Gray 2016) on
 * nChw8c activations: one ymm holds the 8 channels of a block. F(4x4,3x3) or
 * F(2x2,3x3) per plan (od_wino.m, chosen in onednn_wino.c). Built for
 * AVX2+FMA whatever the baseline; runs only where od_wino_wanted said AVX2. */
#include <immintrin.h>
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "core/isa_target.h"

SO_ISA_BEGIN(SO_TARGET_AVX2)

typedef __m256 vf;
#define AMAX 6 /* largest tile side alpha = m + 2 */
#define ROWS 6 /* tiles per GEMM register block: 6 x 2 ymm accumulators */
#define INL static inline __attribute__((always_inline))
/* Weight gradients split the output channels among the threads below this
 * many tiles per thread (od_wino_avx2_wgrad). */
#define WGRAD_TILES_PER_THREAD 200

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

/* y = A x: the transform of an m x m dy tile for the weight gradient (the
 * transpose of the output transform: dL/dU = (A dy A^T) . V). */
INL void dy_1d(const vf *x, int xs, vf *y, int ys, const int m)
{
    if (m == 4) {
        vf x0 = x[0], x1 = x[xs], x2 = x[2 * xs], x3 = x[3 * xs];
        vf e = v_add(x0, x2), o = v_add(x1, x3), e4 = v_fma(v_set1(4.0f), x2, x0);
        vf o8 = v_fma(v_set1(8.0f), x3, v_add(x1, x1));
        y[0] = x0;
        y[ys] = v_add(e, o);
        y[2 * ys] = v_sub(e, o);
        y[3 * ys] = v_add(e4, o8);
        y[4 * ys] = v_sub(e4, o8);
        y[5 * ys] = x3;
    } else {
        vf x0 = x[0], x1 = x[xs];
        y[0] = x0;
        y[ys] = v_add(x0, x1);
        y[2 * ys] = v_sub(x0, x1);
        y[3 * ys] = v_sub(_mm256_setzero_ps(), x1);
    }
}

/* k = G^T x: 3 weight-gradient taps from m + 2 Winograd points. */
INL void gt_1d(const vf *x, int xs, vf *k, int ks, const int m)
{
    vf x1 = x[xs], x2 = x[2 * xs];
    if (m == 4) {
        vf x3 = x[3 * xs], x4 = x[4 * xs], s12 = v_add(x1, x2), s34 = v_add(x3, x4);
        vf c6 = v_set1(1.0f / 6.0f), c12 = v_set1(1.0f / 12.0f);
        k[0] = v_fma(v_set1(0.25f), x[0], v_fma(v_set1(1.0f / 24.0f), s34, _mm256_mul_ps(v_set1(-1.0f / 6.0f), s12)));
        k[ks] = v_fma(c6, v_sub(x2, x1), _mm256_mul_ps(c12, v_sub(x3, x4)));
        k[2 * ks] = v_fma(c6, v_sub(s34, s12), x[5 * xs]);
    } else {
        vf h = _mm256_mul_ps(v_set1(0.5f), v_add(x1, x2));
        k[0] = v_add(x[0], h);
        k[ks] = _mm256_mul_ps(v_set1(0.5f), v_sub(x1, x2));
        k[2 * ks] = v_add(h, x[3 * xs]);
    }
}

/* u = G g: the weight transform of 3 taps, 8 output channels at once. */
INL void w_1d(const vf *g, int gs, vf *u, int us, const int m)
{
    vf g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
    if (m == 4) {
        vf s02 = v_add(g0, g2), e = v_fma(v_set1(1.0f / 24.0f), g0, _mm256_mul_ps(v_set1(1.0f / 6.0f), g2));
        u[0] = _mm256_mul_ps(v_set1(0.25f), g0);
        u[us] = _mm256_mul_ps(v_set1(-1.0f / 6.0f), v_add(s02, g1));
        u[2 * us] = _mm256_mul_ps(v_set1(-1.0f / 6.0f), v_sub(s02, g1));
        u[3 * us] = v_fma(v_set1(1.0f / 12.0f), g1, e);
        u[4 * us] = v_fnma(v_set1(1.0f / 12.0f), g1, e);
        u[5 * us] = g2;
    } else {
        vf h = _mm256_mul_ps(v_set1(0.5f), v_add(g0, g2)), h1 = _mm256_mul_ps(v_set1(0.5f), g1);
        u[0] = g0;
        u[us] = v_add(h, h1);
        u[2 * us] = v_sub(h, h1);
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
 * a last odd block) feed the GEMM's two ymm columns; 8 output channels are
 * transformed at once (a gather: they are 9 ic or 9 floats apart in W). */
/* Output channels co .. co + 7. (Every vector body is a function called
 * from the OpenMP regions: clang does not give their outlined code the
 * target attribute.) */
static void weights_8(const od_wino *w, const float *W, float *U, int co)
{
    const int a = w->m + 2, ic = w->ic, oc = w->oc;
    const int step = w->flip ? 9 : ic * 9;
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(step));
    int ob = co / 16, obw = oc - ob * 16 < 16 ? oc - ob * 16 : 16;
    for (int ci = 0; ci < ic; ci++) {
        vf g[9], t[AMAX * 3], u[AMAX * AMAX];
        const float *base = w->flip ? W + ((size_t)ci * oc + co) * 9 : W + ((size_t)co * ic + ci) * 9;
        for (int k = 0; k < 9; k++) /* flip: tap k of K is tap 8 - k of W */
            g[k] = _mm256_i32gather_ps(base + (w->flip ? 8 - k : k), idx, 4);
        for (int x = 0; x < 3; x++)
            w_1d(g + x, 3, t + x, 3, w->m); /* columns: t = G g (a x 3) */
        for (int y = 0; y < a; y++)
            w_1d(t + y * 3, 1, u + y * a, 1, w->m); /* rows: u = t G^T */
        float *dst = U + (size_t)ob * 16 * ic + (size_t)ci * obw + (co - ob * 16);
        for (int p = 0; p < a * a; p++)
            _mm256_storeu_ps(dst + (size_t)p * ic * oc, u[p]);
    }
}

void od_wino_avx2_weights(const od_wino *w, const float *W, float *U)
{
#pragma omp parallel for schedule(static) num_threads(threads(w, w->oc / 8))
    for (int c8 = 0; c8 < w->oc / 8; c8++)
        weights_8(w, W, U, c8 * 8);
}

/* ---- per-tile transforms ---- */

/* A pixel window of one nChw8c block, clipped to the image without
 * branches per pixel: each row and column is read at an offset clamped into
 * the image and masked to zero where it falls outside (padding, partial
 * tiles at the right and bottom edges). */
typedef struct {
    size_t roff[AMAX], coff[AMAX];  /* float offsets of rows and columns */
    vf rmask[AMAX], cmask[AMAX];
} window;

INL void window_at(window *wn, int h, int wd, int y0, int x0, int n)
{
    const vf ones = _mm256_castsi256_ps(_mm256_set1_epi32(-1)), zero = _mm256_setzero_ps();
    for (int k = 0; k < n; k++) {
        int y = y0 + k, x = x0 + k;
        wn->roff[k] = (size_t)(y < 0 ? 0 : y >= h ? h - 1 : y) * wd * 8;
        wn->coff[k] = (size_t)(x < 0 ? 0 : x >= wd ? wd - 1 : x) * 8;
        wn->rmask[k] = y >= 0 && y < h ? ones : zero;
        wn->cmask[k] = x >= 0 && x < wd ? ones : zero;
    }
}

INL vf window_load(const float *blk, const window *wn, int i, int j)
{
    vf x = _mm256_loadu_ps(blk + wn->roff[i] + wn->coff[j]);
    return _mm256_and_ps(x, _mm256_and_ps(wn->rmask[i], wn->cmask[j]));
}

/* V[p * ps] = (B^T d B)[p] for the a x a input patch d at (y0, x0): rows
 * first (d B into r), then columns straight into V. */
INL void in_tile(const float *blk, int h, int wd, int y0, int x0, float *V, size_t ps, const int m)
{
    const int a = m + 2;
    window wn;
    vf r[AMAX * AMAX];
    window_at(&wn, h, wd, y0, x0, a);
#pragma GCC unroll 6
    for (int i = 0; i < a; i++) {
        vf x[AMAX];
#pragma GCC unroll 6
        for (int j = 0; j < a; j++)
            x[j] = window_load(blk, &wn, i, j);
        in_1d(x, 1, r + i * a, 1, m);
    }
#pragma GCC unroll 6
    for (int j = 0; j < a; j++) {
        vf v[AMAX];
        in_1d(r + j, a, v, 1, m);
#pragma GCC unroll 6
        for (int i = 0; i < a; i++)
            _mm256_storeu_ps(V + (size_t)(i * a + j) * ps, v[i]);
    }
}

/* Y = A^T M A for one tile and 8 output channels, + bias, ReLU'd when fused,
 * stored where it lies inside the oh x ow output. */
INL void out_tile(const float *mt, size_t ps, float *blk, int oh, int ow, int y0, int x0, vf bias, int relu,
                  const int m)
{
    const int a = m + 2;
    vf r[AMAX * 4];
#pragma GCC unroll 6
    for (int i = 0; i < a; i++) {
        vf x[AMAX];
#pragma GCC unroll 6
        for (int j = 0; j < a; j++)
            x[j] = _mm256_loadu_ps(mt + (size_t)(i * a + j) * ps);
        out_1d(x, 1, r + i * m, 1, m); /* rows: r = M A (a x m) */
    }
    int ni = oh - y0 < m ? oh - y0 : m, nj = ow - x0 < m ? ow - x0 : m;
#pragma GCC unroll 4
    for (int j = 0; j < m; j++) {
        vf y[4];
        out_1d(r + j, m, y, 1, m); /* columns: A^T r */
        if (j >= nj)
            continue;
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            vf v = v_add(y[i], bias);
            if (relu)
                v = _mm256_max_ps(v, _mm256_setzero_ps());
            if (i < ni)
                _mm256_storeu_ps(blk + ((size_t)(y0 + i) * ow + x0 + j) * 8, v);
        }
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

/* Prefetching. Activations larger than L2 (ResNet-20 at batch 64) stalled
 * the memory-bound transforms on L3 or DRAM at every tile (2.3x slower per
 * image than at batch 16; direct kernels hide it behind 4x more arithmetic):
 * a tile reads 6 short row pieces per channel block, too short for the
 * hardware prefetcher. So images of up to 256 KB are prefetched whole when
 * the input transform reaches them (a long sequential run), and while the
 * compute-bound GEMMs of a block run, its output lines and the next block's
 * input lines are prefetched tile by tile, a slice per Winograd point. Each
 * half alone gained little on the capped Zen 4; together 3.2 -> 2.3 ms per
 * ResNet-20 16-channel forward at batch 64. */
typedef struct {
    const float *base;           /* the nChw8c tensor */
    int nb, h, w;                /* channel blocks, image size */
    int dy, dx, nr, nc;          /* window of a tile: offset from its output position, size */
    int write;
} pf_spec;

static void prefetch_tile(const pf_spec *f, tile_pos tp)
{
    int y0 = tp.y0 + f->dy, x0 = tp.x0 + f->dx;
    int xa = x0 < 0 ? 0 : x0, xb = x0 + f->nc - 1 >= f->w ? f->w - 1 : x0 + f->nc - 1;
    size_t plane = (size_t)f->h * f->w * 8;
    const float *img = f->base + (size_t)tp.n * f->nb * plane;
    for (int b = 0; b < f->nb; b++)
        for (int y = y0 < 0 ? 0 : y0; y < y0 + f->nr && y < f->h; y++) {
            const float *row = img + b * plane + (size_t)y * f->w * 8;
            for (int x = xa;; x += 2) { /* two pixels per 64-byte line, and the last */
                x = x > xb ? xb : x;
                if (f->write)
                    __builtin_prefetch(row + (size_t)x * 8, 1, 2);
                else
                    __builtin_prefetch(row + (size_t)x * 8, 0, 2);
                if (x == xb)
                    break;
            }
        }
}

/* Image n of the tensor, whole, when it is at most 256 KB (all channel
 * blocks): called at a block's first tile and at each new image. */
static void prefetch_image(const pf_spec *f, int n)
{
    size_t bytes = (size_t)f->nb * f->h * f->w * 8 * sizeof(float);
    if (bytes > 256u * 1024u)
        return;
    const char *img = (const char *)(f->base + (size_t)n * f->nb * f->h * f->w * 8);
    for (size_t q = 0; q < bytes; q += 64)
        __builtin_prefetch(img + q, 0, 2);
}

/* Slice `part` of `parts` of the tiles [t0, t0 + nt). */
static void prefetch_tiles(const od_wino *w, const pf_spec *f, int t0, int nt, int part, int parts)
{
    int end = t0 + nt < w->ntiles ? t0 + nt : w->ntiles;
    nt = end - t0;
    for (int t = t0 + nt * part / parts; t < t0 + nt * (part + 1) / parts; t++)
        prefetch_tile(f, tile_at(w, t));
}

static void block_in(const od_wino *w, const float *src, float *V, int t0, int nt, const int m)
{
    const int cb = w->ic / 8;
    size_t ps = (size_t)w->tblock * w->ic, plane = (size_t)w->ih * w->iw * 8;
    pf_spec f = {src, cb, w->ih, w->iw, 0, 0, 0, 0, 0};
    for (int t = 0; t < nt; t++) {
        tile_pos tp = tile_at(w, t0 + t);
        if (t == 0 || (tp.y0 == 0 && tp.x0 == 0))
            prefetch_image(&f, tp.n);
        for (int c = 0; c < cb; c++)
            in_tile(src + ((size_t)tp.n * cb + c) * plane, w->ih, w->iw, tp.y0 - w->pad, tp.x0 - w->pad,
                    V + (size_t)t * w->ic + c * 8, ps, m);
    }
}

static void block_out(const od_wino *w, const float *M, const float *bias, int relu, float *dst, int t0, int nt,
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
    pf_spec in = {src, w->ic / 8, w->ih, w->iw, -w->pad, -w->pad, a, a, 0};
    pf_spec out = {dst, w->oc / 8, w->oh, w->ow, 0, 0, m, m, 1};
    block_in(w, src, V, t0, nt, m);
    for (int p = 0; p < a * a; p++) {
        prefetch_tiles(w, &out, t0, nt, p, a * a);
        prefetch_tiles(w, &in, t0 + w->tblock, w->tblock, p, a * a);
        gemm_point(V + (size_t)p * w->tblock * w->ic, U + (size_t)p * w->ic * w->oc,
                   M + (size_t)p * w->tblock * w->oc, nt, w->ic, w->oc);
    }
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

/* ---- weight gradient: dW = G^T [sum over tiles (A dy A^T) . (B^T d B)] G ---- */

/* D[p * ps] = (A dy A^T)[p] for the m x m dy tile at (y0, x0) (zeros
 * past the edge), whose sum is added into *bsum (the bias gradient). */
INL void dy_tile(const float *blk, int oh, int ow, int y0, int x0, float *D, size_t ps, vf *bsum, const int m)
{
    const int a = m + 2;
    window wn;
    vf r[4 * AMAX], sum = *bsum;
    window_at(&wn, oh, ow, y0, x0, m);
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
        vf x[4];
#pragma GCC unroll 4
        for (int j = 0; j < m; j++) {
            x[j] = window_load(blk, &wn, i, j);
            sum = v_add(sum, x[j]);
        }
        dy_1d(x, 1, r + i * a, 1, m); /* rows: r = dy A^T (m x a) */
    }
    *bsum = sum;
#pragma GCC unroll 6
    for (int j = 0; j < a; j++) {
        vf v[AMAX];
        dy_1d(r + j, a, v, 1, m); /* columns: A r */
#pragma GCC unroll 6
        for (int i = 0; i < a; i++)
            _mm256_storeu_ps(D + (size_t)(i * a + j) * ps, v[i]);
    }
}

/* The block's dy tiles of output channels [o0, o1) (multiples of 8), and
 * their bias sums. */
static void block_dy(const od_wino *w, const float *dy, float *D, float *bsum, int t0, int nt, int o0, int o1,
                     const int m)
{
    const int ob8 = w->oc / 8;
    size_t ps = (size_t)w->tblock * w->oc, plane = (size_t)w->oh * w->ow * 8;
    pf_spec f = {dy, ob8, w->oh, w->ow, 0, 0, 0, 0, 0};
    for (int t = 0; t < nt; t++) {
        tile_pos tp = tile_at(w, t0 + t);
        if (t == 0 || (tp.y0 == 0 && tp.x0 == 0))
            prefetch_image(&f, tp.n);
        for (int o = o0 / 8; o < o1 / 8; o++) {
            vf b = _mm256_loadu_ps(bsum + o * 8);
            dy_tile(dy + ((size_t)tp.n * ob8 + o) * plane, w->oh, w->ow, tp.y0, tp.x0,
                    D + (size_t)t * w->oc + o * 8, ps, &b, m);
            _mm256_storeu_ps(bsum + o * 8, b);
        }
    }
}

/* acc[r][0..8*nv) += sum_t d[t][r] * v[t][0..8*nv) for R output channels:
 * a reduction over the block's nt tiles into the running dU rows. */
INL void gemm_wrows(const float *d, const float *v, float *acc, int nt, int oc, int ic, const int R, const int nv)
{
    vf c[ROWS][2];
    for (int r = 0; r < R; r++) {
        c[r][0] = _mm256_loadu_ps(acc + (size_t)r * ic);
        c[r][1] = nv > 1 ? _mm256_loadu_ps(acc + (size_t)r * ic + 8) : c[r][0];
    }
    for (int t = 0; t < nt; t++) {
        vf u0 = _mm256_loadu_ps(v + (size_t)t * ic);
        vf u1 = nv > 1 ? _mm256_loadu_ps(v + (size_t)t * ic + 8) : u0;
        for (int r = 0; r < R; r++) {
            vf b = _mm256_broadcast_ss(d + (size_t)t * oc + r);
            c[r][0] = v_fma(b, u0, c[r][0]);
            if (nv > 1)
                c[r][1] = v_fma(b, u1, c[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(acc + (size_t)r * ic, c[r][0]);
        if (nv > 1)
            _mm256_storeu_ps(acc + (size_t)r * ic + 8, c[r][1]);
    }
}

#define WGEMM_CASE(R)                                                                              \
    case R:                                                                                        \
        if (nv == 2)                                                                               \
            gemm_wrows(d, v, acc, nt, oc, ic, R, 2);                                               \
        else                                                                                       \
            gemm_wrows(d, v, acc, nt, oc, ic, R, 1);                                               \
        break;

/* One Winograd point: rows [o0, o1) of dU[p] (oc x ic) += D[p]^T V[p]
 * over nt tiles. */
static void wgemm_point(const float *D, const float *V, float *dU, int nt, int o0, int o1, int oc, int ic)
{
    for (int c0 = 0; c0 < ic; c0 += 16) {
        int nv = ic - c0 >= 16 ? 2 : 1;
        for (int o = o0; o < o1; o += ROWS) {
            const float *d = D + o, *v = V + c0;
            float *acc = dU + (size_t)o * ic + c0;
            switch (o1 - o < ROWS ? o1 - o : ROWS) {
                WGEMM_CASE(1)
                WGEMM_CASE(2)
                WGEMM_CASE(3)
                WGEMM_CASE(4)
                WGEMM_CASE(5)
            default:
                if (nv == 2)
                    gemm_wrows(d, v, acc, nt, oc, ic, ROWS, 2);
                else
                    gemm_wrows(d, v, acc, nt, oc, ic, ROWS, 1);
                break;
            }
        }
    }
}

/* dU rows [o0, o1) and their bias sums += the block of tiles from t0. */
INL void wgrad_block(const od_wino *w, const float *src, const float *dy, float *V, float *D, float *dU,
                     float *bsum, int t0, int o0, int o1, const int m)
{
    const int a = m + 2;
    int nt = w->ntiles - t0 < w->tblock ? w->ntiles - t0 : w->tblock;
    pf_spec in = {src, w->ic / 8, w->ih, w->iw, -w->pad, -w->pad, a, a, 0};
    pf_spec d = {dy, w->oc / 8, w->oh, w->ow, 0, 0, m, m, 0};
    block_in(w, src, V, t0, nt, m);
    block_dy(w, dy, D, bsum, t0, nt, o0, o1, m);
    for (int p = 0; p < a * a; p++) {
        prefetch_tiles(w, &in, t0 + w->tblock, w->tblock, p, a * a);
        prefetch_tiles(w, &d, t0 + w->tblock, w->tblock, p, a * a);
        wgemm_point(D + (size_t)p * w->tblock * w->oc, V + (size_t)p * w->tblock * w->ic,
                    dU + (size_t)p * w->oc * w->ic, nt, o0, o1, w->oc, w->ic);
    }
}

static void wgrad_block_m(const od_wino *w, const float *src, const float *dy, float *V, float *D, float *dU,
                          float *bsum, int t0, int o0, int o1)
{
    if (w->m == 4)
        wgrad_block(w, src, dy, V, D, dU, bsum, t0, o0, o1, 4);
    else
        wgrad_block(w, src, dy, V, D, dU, bsum, t0, o0, o1, 2);
}

/* dW (flat OIHW) = or += G^T dU G for output channel o, 8 input channels
 * at a time; db = or += the bias sums. */
INL void wgrad_out(const od_wino *w, const float *dU, const float *bsum, float *dW, float *db, int add, int o,
                   const int m)
{
    const int a = m + 2;
    for (int c = 0; c < w->ic; c += 8) {
        vf x[AMAX * AMAX], t[3 * AMAX], k[9];
        for (int p = 0; p < a * a; p++)
            x[p] = _mm256_loadu_ps(dU + (size_t)p * w->oc * w->ic + (size_t)o * w->ic + c);
        for (int j = 0; j < a; j++)
            gt_1d(x + j, a, t + j, a, m); /* columns: t = G^T x (3 x a) */
        for (int i = 0; i < 3; i++)
            gt_1d(t + i * a, 1, k + i * 3, 1, m); /* rows: k = t G */
        float kv[9][8];
        for (int i = 0; i < 9; i++)
            _mm256_storeu_ps(kv[i], k[i]);
        float *g = dW + ((size_t)o * w->ic + c) * 9;
        for (int l = 0; l < 8; l++)
            for (int i = 0; i < 9; i++)
                g[l * 9 + i] = add ? g[l * 9 + i] + kv[i][l] : kv[i][l];
    }
    if (db)
        db[o] = add ? db[o] + bsum[o] : bsum[o];
}

static void wgrad_out_o(const od_wino *w, const float *dU, const float *bsum, float *dW, float *db, int add, int o)
{
    if (w->m == 4)
        wgrad_out(w, dU, bsum, dW, db, add, o, 4);
    else
        wgrad_out(w, dU, bsum, dW, db, add, o, 2);
}

/* Per thread dU over its blocks of tiles, summed over the threads in a
 * fixed order (deterministic for a thread count). */
static void wgrad_by_tiles(const od_wino *w, const float *src, const float *dy, float *dW, float *db, int add)
{
    int nb = (w->ntiles + w->tblock - 1) / w->tblock;
    size_t nu = w->u_floats;
#pragma omp parallel num_threads(threads(w, nb))
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        float *V = w->tb[id], *D = V + w->v_floats, *dU = D + w->d_floats, *bsum = dU + nu;
        for (size_t i = 0; i < nu + (size_t)w->oc; i++)
            dU[i] = 0.0f;
        for (int b = nb * id / n; b < nb * (id + 1) / n; b++)
            wgrad_block_m(w, src, dy, V, D, dU, bsum, b * w->tblock, 0, w->oc);
#pragma omp barrier
        float *sum = w->tb[0] + w->v_floats + w->d_floats;
        for (int t = 1; t < n; t++) {
            const float *other = w->tb[t] + w->v_floats + w->d_floats;
#pragma omp for schedule(static)
            for (size_t i = 0; i < nu + (size_t)w->oc; i++)
                sum[i] += other[i];
        }
#pragma omp for schedule(static)
        for (int o = 0; o < w->oc; o++)
            wgrad_out_o(w, sum, sum + nu, dW, db, add, o);
    }
}

/* Each thread its own output channels over every block of tiles, into one
 * shared dU: nothing to zero or sum per thread (the input tiles are
 * transformed by every thread, 1 / its channels of the GEMM's work). */
static void wgrad_by_channels(const od_wino *w, const float *src, const float *dy, float *dW, float *db, int add)
{
    int nb = (w->ntiles + w->tblock - 1) / w->tblock, ob8 = w->oc / 8, a = w->m + 2;
    float *dU = w->tb[0] + w->v_floats + w->d_floats, *bsum = dU + w->u_floats;
#pragma omp parallel num_threads(threads(w, ob8))
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        int o0 = ob8 * id / n * 8, o1 = ob8 * (id + 1) / n * 8;
        float *V = w->tb[id], *D = V + w->v_floats;
        for (int p = 0; p < a * a; p++)
            memset(dU + ((size_t)p * w->oc + o0) * w->ic, 0, (size_t)(o1 - o0) * w->ic * sizeof *dU);
        memset(bsum + o0, 0, (size_t)(o1 - o0) * sizeof *bsum);
        for (int b = 0; b < nb; b++)
            wgrad_block_m(w, src, dy, V, D, dU, bsum, b * w->tblock, o0, o1);
        for (int o = o0; o < o1; o++)
            wgrad_out_o(w, dU, bsum, dW, db, add, o);
    }
}

/* Weight (and bias) gradients of the forward plan's convolution from its
 * source and output diff. Few tiles under many channels (ResNet-50's 7x7
 * layers) split the output channels among the threads: split by tiles, each
 * thread's dU (36 ic oc floats, 38 MB at 512 channels) costs more to zero
 * and sum than its share of the GEMM takes (at 512 channels, 7x7, batch 16,
 * 2 threads: backward 29.5 against 33.0 ms, data and weights). */
void od_wino_avx2_wgrad(const od_wino *w, const float *src, const float *dy, float *dW, float *db, int add)
{
    int n = threads(w, w->oc / 8);
    if (n > 1 && w->oc / 8 >= 2 * n && w->ntiles < WGRAD_TILES_PER_THREAD * n)
        wgrad_by_channels(w, src, dy, dW, db, add);
    else
        wgrad_by_tiles(w, src, dy, dW, db, add);
}

SO_ISA_END
