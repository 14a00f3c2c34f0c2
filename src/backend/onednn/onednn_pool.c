/* Max pooling (with the forward_training workspace that backward needs),
 * average pooling with count_include_pad=True (PyTorch's default; the graph
 * guarantees windows never leave the padded input, so the divisor is kh*kw
 * like oneDNN's avg_include_padding) and global average pooling. */
#include <immintrin.h>

#include "core/isa_target.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"

typedef struct {
    od_prim fwd, bwd;
    float *ws;                   /* max pooling workspace */
    dnnl_memory_t ws_mem;
    int32_t *arg;                /* plain max pooling: argmax offset in the input plane */
    int fast;                    /* plain 2x2 stride-2 unpadded windows: the so_isa
                                  * of the kernel that runs them, 0 for the scalar loop */
} od_pool;

/* ---- max pooling of plain NCHW tensors ----
 * oneDNN's jit pooling vectorises over channels and crawls on plain layouts
 * (1.5-2.5 ms for LeNet's 64x6x28x28, memory traffic of ~0.05 ms), so plain
 * sources get this scalar loop with an int32 argmax workspace instead. */

static int plain_src(od_state *s, int node)
{
    dnnl_memory_desc_t plain;
    od_md_plain(s, od_node(s, node)->inputs[0], &plain);
    return od_md_equal(&od_in(s, node, 0)->md, &plain);
}

/* One (n, c) plane: max over each window (padding never wins, as in PyTorch;
 * the first maximum wins ties). */
static void pmax_plane(const so_attrs *a, so_shape is, so_shape os, const float *x, float *y,
                       int32_t *arg)
{
    for (int oy = 0; oy < os.h; oy++)
        for (int ox = 0; ox < os.w; ox++) {
            int y0 = oy * a->sh - a->ph, x0 = ox * a->sw - a->pw, best = -1;
            for (int ky = 0; ky < a->kh; ky++)
                for (int kx = 0; kx < a->kw; kx++) {
                    int iy = y0 + ky, ix = x0 + kx, at = iy * is.w + ix;
                    if (iy >= 0 && iy < is.h && ix >= 0 && ix < is.w && (best < 0 || x[at] > x[best]))
                        best = at;
                }
            y[oy * os.w + ox] = x[best];
            arg[oy * os.w + ox] = best;
        }
}

/* The common 2x2 stride-2 unpadded case with AVX-512 (p->fast names the
 * ISA allowed), 16 windows at a time: rows are split into even and odd
 * columns by a permute, then three branch-free compares (the scalar loop's
 * data-dependent compares mispredict half the time). Ties: first wins. */
SO_ISA_BEGIN(SO_TARGET_AVX512)

typedef struct {
    __mmask16 out, lo, hi;       /* n windows; their 2n inputs in two vectors */
    __m512i at;                  /* plane offset of each window's top-left */
} win16;

static win16 win_at(so_shape is, int oy, int ox0, int n)
{
    win16 w;
    int lo = 2 * n < 16 ? 2 * n : 16, hi = 2 * n - lo;
    w.out = (__mmask16)((1u << n) - 1);
    w.lo = (__mmask16)((1u << lo) - 1);
    w.hi = (__mmask16)((1u << hi) - 1);
    __m512i lane2 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    w.at = _mm512_add_epi32(_mm512_set1_epi32(2 * oy * is.w + 2 * ox0), lane2);
    return w;
}

static void pmax_plane_2x2(so_shape is, so_shape os, const float *x, float *y, int32_t *arg)
{
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const __m512i one = _mm512_set1_epi32(1), row = _mm512_set1_epi32(is.w);
    for (int oy = 0; oy < os.h; oy++)
        for (int ox = 0; ox < os.w; ox += 16) {
            int n = os.w - ox < 16 ? os.w - ox : 16;
            win16 w = win_at(is, oy, ox, n);
            const float *r0 = x + 2 * oy * is.w + 2 * ox, *r1 = r0 + is.w;
            __m512 l0 = _mm512_maskz_loadu_ps(w.lo, r0), h0 = _mm512_maskz_loadu_ps(w.hi, r0 + 16);
            __m512 l1 = _mm512_maskz_loadu_ps(w.lo, r1), h1 = _mm512_maskz_loadu_ps(w.hi, r1 + 16);
            __m512 a = _mm512_permutex2var_ps(l0, ev, h0), b = _mm512_permutex2var_ps(l0, od, h0);
            __m512 c = _mm512_permutex2var_ps(l1, ev, h1), d = _mm512_permutex2var_ps(l1, od, h1);
            __mmask16 mb = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ), md = _mm512_cmp_ps_mask(d, c, _CMP_GT_OQ);
            __m512 ma = _mm512_mask_blend_ps(mb, a, b), mc = _mm512_mask_blend_ps(md, c, d);
            __m512i ia = _mm512_mask_add_epi32(w.at, mb, w.at, one);
            __m512i ic = _mm512_add_epi32(_mm512_add_epi32(w.at, row), _mm512_maskz_mov_epi32(md, one));
            __mmask16 mm = _mm512_cmp_ps_mask(mc, ma, _CMP_GT_OQ);
            _mm512_mask_storeu_ps(y + oy * os.w + ox, w.out, _mm512_mask_blend_ps(mm, ma, mc));
            _mm512_mask_storeu_epi32(arg + oy * os.w + ox, w.out, _mm512_mask_blend_epi32(mm, ia, ic));
        }
}

/* Backward: each window's four dx written once from the argmax (no scatter;
 * rows/columns past the last window are zeroed separately). */
static void pmax_plane_2x2_bwd(so_shape is, so_shape os, const float *dy, const int32_t *arg, float *dx)
{
    if (is.h != 2 * os.h || is.w != 2 * os.w)
        memset(dx, 0, (size_t)is.h * is.w * sizeof *dx);
    const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ih = _mm512_add_epi32(il, _mm512_set1_epi32(8));
    const __m512i one = _mm512_set1_epi32(1), row = _mm512_set1_epi32(is.w);
    for (int oy = 0; oy < os.h; oy++)
        for (int ox = 0; ox < os.w; ox += 16) {
            int n = os.w - ox < 16 ? os.w - ox : 16;
            win16 w = win_at(is, oy, ox, n);
            __m512 g = _mm512_maskz_loadu_ps(w.out, dy + oy * os.w + ox);
            __m512i k = _mm512_maskz_loadu_epi32(w.out, arg + oy * os.w + ox);
            __m512i at1 = _mm512_add_epi32(w.at, row);
            __m512 a = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, w.at), g);
            __m512 b = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_add_epi32(w.at, one)), g);
            __m512 c = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, at1), g);
            __m512 d = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_add_epi32(at1, one)), g);
            float *r0 = dx + 2 * oy * is.w + 2 * ox, *r1 = r0 + is.w;
            _mm512_mask_storeu_ps(r0, w.lo, _mm512_permutex2var_ps(a, il, b));
            _mm512_mask_storeu_ps(r0 + 16, w.hi, _mm512_permutex2var_ps(a, ih, b));
            _mm512_mask_storeu_ps(r1, w.lo, _mm512_permutex2var_ps(c, il, d));
            _mm512_mask_storeu_ps(r1 + 16, w.hi, _mm512_permutex2var_ps(c, ih, d));
        }
}

SO_ISA_END

/* The same with AVX2, 8 windows at a time. Without masked permutes, a row's
 * 16 inputs are split by one in-lane shuffle into even and odd columns with
 * the windows in the order 0 1 4 5 2 3 6 7, computed on in that order and
 * put back in place by one 64-bit permute before the stores. */
SO_ISA_BEGIN(SO_TARGET_AVX2)

/* All-ones in the first n lanes (n <= 8; fewer at a row's end). */
static __m256i lanes_below(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* A row's windows ox..ox+n-1; their 2n inputs in two vectors (lanes lo, hi).
 * Masked stores are slow on AMD (vmaskmovps is microcoded), so rows of 8 or
 * more windows take full chunks only, the last one moved back to end at
 * the row's end: it redoes some windows, which writes the same values.
 * Shorter rows load with masks and store lane by lane (store_first). */
typedef struct {
    int ox, full;
    int n_out, n_lo, n_hi;       /* lanes in use */
    __m256i out, lo, hi;         /* the same as load masks, for short rows */
} win8;

static win8 win8_at(int ox, int ow)
{
    if (ow >= 8)
        return (win8){ox + 8 > ow ? ow - 8 : ox, 1, 8, 8, 8, {0}, {0}, {0}};
    int lo = 2 * ow < 8 ? 2 * ow : 8;
    return (win8){ox, 0, ow, lo, 2 * ow - lo, lanes_below(ow), lanes_below(lo), lanes_below(2 * ow - lo)};
}

static __m256 load8(const float *p, const win8 *w, __m256i m)
{
    return w->full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

/* The first n (< 8) lanes of v to p, in 4-, 2- and 1-float stores. */
static void store_first(float *p, __m256 v, int n)
{
    __m128 q = _mm256_castps256_ps128(v);
    if (n >= 4) {
        _mm_storeu_ps(p, q);
        q = _mm256_extractf128_ps(v, 1);
        p += 4;
        n -= 4;
    }
    if (n >= 2) {
        _mm_storel_pi((__m64 *)p, q);
        q = _mm_movehl_ps(q, q);
        p += 2;
        n -= 2;
    }
    if (n)
        _mm_store_ss(p, q);
}

static void store8(float *p, int n, __m256 v)
{
    if (n == 8)
        _mm256_storeu_ps(p, v);
    else
        store_first(p, v, n);
}

static void pmax_plane_2x2_avx2(so_shape is, so_shape os, const float *x, float *y, int32_t *arg)
{
    const __m256i order = _mm256_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14); /* 2 x (0 1 4 5 2 3 6 7) */
    const __m256i row = _mm256_set1_epi32(is.w);
    for (int oy = 0; oy < os.h; oy++)
        for (int ox = 0; ox < os.w; ox += 8) {
            win8 w = win8_at(ox, os.w);
            __m256i at = _mm256_add_epi32(_mm256_set1_epi32(2 * oy * is.w + 2 * w.ox), order);
            const float *r0 = x + 2 * oy * is.w + 2 * w.ox, *r1 = r0 + is.w;
            __m256 l0 = load8(r0, &w, w.lo), h0 = load8(r0 + 8, &w, w.hi);
            __m256 l1 = load8(r1, &w, w.lo), h1 = load8(r1 + 8, &w, w.hi);
            __m256 a = _mm256_shuffle_ps(l0, h0, 0x88), b = _mm256_shuffle_ps(l0, h0, 0xdd);
            __m256 c = _mm256_shuffle_ps(l1, h1, 0x88), d = _mm256_shuffle_ps(l1, h1, 0xdd);
            __m256 mb = _mm256_cmp_ps(b, a, _CMP_GT_OQ), md = _mm256_cmp_ps(d, c, _CMP_GT_OQ);
            __m256 ma = _mm256_blendv_ps(a, b, mb), mc = _mm256_blendv_ps(c, d, md);
            /* a true compare is -1 in every lane bit: subtracting it adds 1 */
            __m256i ia = _mm256_sub_epi32(at, _mm256_castps_si256(mb));
            __m256i ic = _mm256_sub_epi32(_mm256_add_epi32(at, row), _mm256_castps_si256(md));
            __m256 mm = _mm256_cmp_ps(mc, ma, _CMP_GT_OQ);
            __m256 v = _mm256_blendv_ps(ma, mc, mm);
            __m256i k = _mm256_castps_si256(
                _mm256_blendv_ps(_mm256_castsi256_ps(ia), _mm256_castsi256_ps(ic), mm));
            v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xd8));
            k = _mm256_permute4x64_epi64(k, 0xd8);
            store8(y + oy * os.w + w.ox, w.n_out, v);
            store8((float *)(arg + oy * os.w + w.ox), w.n_out, _mm256_castsi256_ps(k));
        }
}

/* Backward as pmax_plane_2x2_bwd: each window's dy goes to the one of its
 * four inputs the argmax names, interleaved back into the two rows. */
static void pmax_plane_2x2_bwd_avx2(so_shape is, so_shape os, const float *dy, const int32_t *arg,
                                    float *dx)
{
    if (is.h != 2 * os.h || is.w != 2 * os.w)
        memset(dx, 0, (size_t)is.h * is.w * sizeof *dx);
    const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i one = _mm256_set1_epi32(1), row = _mm256_set1_epi32(is.w);
    for (int oy = 0; oy < os.h; oy++)
        for (int ox = 0; ox < os.w; ox += 8) {
            win8 w = win8_at(ox, os.w);
            __m256i at = _mm256_add_epi32(_mm256_set1_epi32(2 * oy * is.w + 2 * w.ox), lane2);
            __m256i at1 = _mm256_add_epi32(at, row);
            __m256 g = load8(dy + oy * os.w + w.ox, &w, w.out);
            __m256i k = _mm256_castps_si256(load8((const float *)(arg + oy * os.w + w.ox), &w, w.out));
            __m256 a = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, at)));
            __m256 b = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_add_epi32(at, one))));
            __m256 c = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, at1)));
            __m256 d = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_add_epi32(at1, one))));
            /* unpack interleaves within 128-bit lanes; permute2f128 orders the halves */
            __m256 ab0 = _mm256_unpacklo_ps(a, b), ab1 = _mm256_unpackhi_ps(a, b);
            __m256 cd0 = _mm256_unpacklo_ps(c, d), cd1 = _mm256_unpackhi_ps(c, d);
            float *r0 = dx + 2 * oy * is.w + 2 * w.ox, *r1 = r0 + is.w;
            store8(r0, w.n_lo, _mm256_permute2f128_ps(ab0, ab1, 0x20));
            store8(r0 + 8, w.n_hi, _mm256_permute2f128_ps(ab0, ab1, 0x31));
            store8(r1, w.n_lo, _mm256_permute2f128_ps(cd0, cd1, 0x20));
            store8(r1 + 8, w.n_hi, _mm256_permute2f128_ps(cd0, cd1, 0x31));
        }
}

SO_ISA_END

static int pmax_forward(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    od_pool *p = s->t[node].priv;
    so_shape is = od_node(s, nd->inputs[0])->out, os = nd->out;
    const float *x = od_in(s, node, 0)->buf;
    float *y = s->t[node].buf;
    int planes = s->m->batch * is.c;
    size_t ip = (size_t)is.h * is.w, op = (size_t)os.h * os.w;
#pragma omp parallel for schedule(static) if (planes * op > 32768)
    for (int i = 0; i < planes; i++) {
        if (p->fast == SO_ISA_AVX512)
            pmax_plane_2x2(is, os, x + i * ip, y + i * op, p->arg + i * op);
        else if (p->fast == SO_ISA_AVX2)
            pmax_plane_2x2_avx2(is, os, x + i * ip, y + i * op, p->arg + i * op);
        else
            pmax_plane(&nd->a, is, os, x + i * ip, y + i * op, p->arg + i * op);
    }
    return 0;
}

/* dx = 0, then dy scattered to each window's argmax (adding for overlaps). */
static int pmax_backward(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    od_pool *p = s->t[node].priv;
    od_tensor *in = od_in(s, node, 0);
    so_shape is = od_node(s, nd->inputs[0])->out, os = nd->out;
    float *dx = od_diff_staged(s, node, 0) ? s->scratch : in->dbuf;
    const float *dy = s->t[node].dbuf;
    int planes = s->m->batch * is.c;
    size_t ip = (size_t)is.h * is.w, op = (size_t)os.h * os.w;
#pragma omp parallel for schedule(static) if (planes * op > 32768)
    for (int i = 0; i < planes; i++) {
        float *d = dx + i * ip;
        if (p->fast == SO_ISA_AVX512) {
            pmax_plane_2x2_bwd(is, os, dy + i * op, p->arg + i * op, d);
            continue;
        }
        if (p->fast == SO_ISA_AVX2) {
            pmax_plane_2x2_bwd_avx2(is, os, dy + i * op, p->arg + i * op, d);
            continue;
        }
        memset(d, 0, ip * sizeof *d);
        for (size_t j = 0; j < op; j++)
            d[p->arg[i * op + j]] += dy[i * op + j];
    }
    od_diff_finish(s, node, 0);
    return 0;
}

static int pmax_create(od_state *s, int node, od_pool *p)
{
    const so_node *nd = od_node(s, node);
    dnnl_memory_desc_t md;
    od_md_plain(s, node, &md);
    size_t n = (size_t)s->m->batch * nd->out.c * nd->out.h * nd->out.w;
    const so_attrs *a = &nd->a;
    int w2x2 = a->kh == 2 && a->kw == 2 && a->sh == 2 && a->sw == 2 && a->ph == 0 && a->pw == 0;
    p->fast = w2x2 && so_cpu_isa() >= SO_ISA_AVX2 ? (int)so_cpu_isa() : 0;
    p->arg = calloc(n, sizeof *p->arg);
    if (!p->arg)
        return so_err(SO_ENOMEM, "out of memory for node %s", nd->name);
    return od_tensor_alloc(s, node, &md);
}

static int pool_create_alg(od_state *s, int node, dnnl_alg_kind_t alg, int kh, int kw, int sh,
                           int sw, int ph, int pw)
{
    od_pool *p = calloc(1, sizeof *p);
    if (!p)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = p;
    if (alg == dnnl_pooling_max && plain_src(s, node) && !od_in(s, node, 0)->half) /* its loops are FP32 */
        return pmax_create(s, node, p);
    const so_node *nd = od_node(s, node);
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    dnnl_memory_desc_t d_any;
    od_md_4d(&d_any, s->m->batch, nd->out.c, nd->out.h, nd->out.w, dnnl_format_tag_any);
    if (t->half) /* the source's type (onednn_half.c: pooling reads and writes one) */
        d_any = od_md_as(&d_any, dnnl_bf16);
    dnnl_dims_t k = {kh, kw}, st = {sh, sw}, pad = {ph, pw};
    dnnl_pooling_desc_t pd;
    OD_CHECK(s, node, "pooling forward desc",
             dnnl_pooling_forward_desc_init(&pd, dnnl_forward_training, alg, &in->md, &d_any, st, k, pad, pad));
    int rc = od_prim_init(s, node, "pooling forward", &pd, 0, NULL, &p->fwd);
    dnnl_memory_desc_t dst = od_query_md(&p->fwd, dnnl_query_dst_md);
    if (!rc)
        rc = od_tensor_alloc(s, node, &dst);
    if (!rc && alg == dnnl_pooling_max) {
        dnnl_memory_desc_t ws = od_query_md(&p->fwd, dnnl_query_workspace_md);
        rc = od_mem_alloc(s, node, &ws, &p->ws, &p->ws_mem);
    }
    if (rc || !so_graph_needs_diff(s->g, node, 0))
        return rc;
    OD_CHECK(s, node, "pooling backward desc",
             dnnl_pooling_backward_desc_init(&pd, alg, &in->md, &t->md, st, k, pad, pad));
    return od_prim_init(s, node, "pooling backward", &pd, 0, p->fwd.pd, &p->bwd);
}

static int maxpool_create(od_state *s, int node)
{
    const so_attrs *a = &od_node(s, node)->a;
    return pool_create_alg(s, node, dnnl_pooling_max, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw);
}

static int avgpool_create(od_state *s, int node)
{
    const so_attrs *a = &od_node(s, node)->a;
    return pool_create_alg(s, node, dnnl_pooling_avg_include_padding, a->kh, a->kw, a->sh, a->sw,
                           a->ph, a->pw);
}

static int gap_create(od_state *s, int node)
{
    so_shape is = od_node(s, od_node(s, node)->inputs[0])->out;
    return pool_create_alg(s, node, dnnl_pooling_avg_exclude_padding, is.h, is.w, 1, 1, 0, 0);
}

/* (N,C,H,W) -> (N,C,OH,OW); the same training primitive serves eval. */
static int pool_forward(od_state *s, int node, int training)
{
    (void)training;
    od_pool *p = s->t[node].priv;
    if (p->arg)
        return pmax_forward(s, node);
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, od_in(s, node, 0)->mem},
                            {DNNL_ARG_DST, s->t[node].mem},
                            {DNNL_ARG_WORKSPACE, p->ws_mem}};
    return od_exec(s, node, "pooling forward", &p->fwd, p->ws_mem ? 3 : 2, a);
}

static int pool_backward(od_state *s, int node)
{
    od_pool *p = s->t[node].priv;
    if (p->arg)
        return so_graph_needs_diff(s->g, node, 0) ? pmax_backward(s, node) : 0;
    if (!p->bwd.p)
        return 0;
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, s->t[node].dmem},
                            {DNNL_ARG_DIFF_SRC, od_diff_target(s, node, 0)},
                            {DNNL_ARG_WORKSPACE, p->ws_mem}};
    int rc = od_exec(s, node, "pooling backward", &p->bwd, p->ws_mem ? 3 : 2, a);
    if (!rc)
        od_diff_finish(s, node, 0);
    return rc;
}

static void pool_destroy(void *priv)
{
    od_pool *p = priv;
    od_prim_fini(&p->fwd);
    od_prim_fini(&p->bwd);
    od_mem_free(&p->ws_mem, &p->ws);
    free(p->arg);
    free(p);
}

const od_op od_op_maxpool = {maxpool_create, pool_forward, pool_backward, pool_destroy, NULL};
const od_op od_op_avgpool = {avgpool_create, pool_forward, pool_backward, pool_destroy, NULL};
const od_op od_op_gap = {gap_create, pool_forward, pool_backward, pool_destroy, NULL};
