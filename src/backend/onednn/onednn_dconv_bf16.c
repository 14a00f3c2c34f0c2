/* BF16 instance of the small-channel direct convolution (onednn_dconv.c,
 * same wide-grid layout as onednn_dconv_body.h) for --precision bf16 on CPUs
 * with AVX512_BF16. vdpbf16ps multiplies pairs of BF16 values and adds both
 * products into an FP32 lane, so a pair of taps (two input channels, or two
 * adjacent columns when the channel count is odd) of the forward and
 * backward-data passes, and a pair of positions of the weight gradient, is
 * one instruction where FP32 needs two FMAs. Accumulation stays FP32. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "core/isa_target.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

#define OB 8 /* output channels per forward register block (2 x 8 accumulators) */
#define GO 4 /* output channels per weight-gradient register block */
#define GT 5 /* taps per weight-gradient register block */

/* Geometry of one pass on the wide grid (see onednn_dconv_body.h): `len`
 * and `plane` are multiples of 32 here, one vdpbf16ps chunk of positions. */
typedef struct {
    int pw, plane, len;          /* row pitch, elements per padded channel, wide length */
    int nin, nout, nsingle;      /* nsingle = nin*kh*kw taps */
    int *off;                    /* per tap: its offset (the weight gradient reads these) */
    int npairs, shift;           /* tap pairs; a pair's second tap reads at +shift */
    int *poff;                   /* per pair: the first tap's offset */
    int *pt;                     /* per pair: its two taps (-1: none, weight 0) */
    uint32_t *w;                 /* packed BF16 weight pairs [block][pair][OB] */
} bp_plan;

typedef struct {
    int ic, oc, ih, iw, oh, ow, kh, kw, ph, pw, relu, bias;
    int nthr;
    bp_plan f, bd;               /* forward; backward data */
    int front;                   /* zeros before each dy row block of bd's input */
    int f_valid, bd_valid, has_bd;
    char **tb;                   /* per-thread scratch */
} od_dconvh;

/* Per-thread scratch (tb_view). */
typedef struct {
    float *xin, *dyp, *wide, *dyw, *acc, *db;
    uint32_t *x2, *dy2;          /* BF16 tap pairs of xin and dyp */
    uint16_t *x16, *dy16;        /* plain BF16 copies of xin and dyw */
} bp_tb;

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* The whole op: it runs only where conv_create chose it (so_cpu_has_bf16). */
#define DCB_TARGET "avx512f,avx512bw,avx512vl,avx512dq,fma,avx512bf16"
SO_ISA_BEGIN(DCB_TARGET)

/* ---- kernels ---- */

/* out[o][p] = sum over pairs t of w[t][o] . x2[p + poff[t]] for nb <= OB channels. */
static inline __attribute__((always_inline)) void tap_block(const uint32_t *x2, const bp_plan *pl,
                                                            const uint32_t *w, float *out, const int nb)
{
    for (int p = 0; p < pl->len; p += 32) {
        __m512 a0[OB], a1[OB];
        for (int o = 0; o < nb; o++)
            a0[o] = a1[o] = _mm512_setzero_ps();
        const uint32_t *ip = x2 + p;
        for (int t = 0; t < pl->npairs; t++) {
            __m512bh x0 = (__m512bh)_mm512_loadu_si512(ip + pl->poff[t]);
            __m512bh x1 = (__m512bh)_mm512_loadu_si512(ip + pl->poff[t] + 16);
            const uint32_t *wt = w + t * OB;
            for (int o = 0; o < nb; o++) {
                __m512bh b = (__m512bh)_mm512_set1_epi32((int)wt[o]);
                a0[o] = _mm512_dpbf16_ps(a0[o], x0, b);
                a1[o] = _mm512_dpbf16_ps(a1[o], x1, b);
            }
        }
        for (int o = 0; o < nb; o++) {
            _mm512_storeu_ps(out + (size_t)o * pl->len + p, a0[o]);
            _mm512_storeu_ps(out + (size_t)o * pl->len + p + 16, a1[o]);
        }
    }
}

/* All output channels of one image into the wide buffer `out`. */
static void tap_conv(const uint32_t *x2, const bp_plan *pl, float *out)
{
    for (int b = 0; b * OB < pl->nout; b++) {
        int nb = pl->nout - b * OB < OB ? pl->nout - b * OB : OB;
        const uint32_t *w = pl->w + (size_t)b * pl->npairs * OB;
        float *o = out + (size_t)b * OB * pl->len;
        switch (nb) { /* constant block sizes keep the accumulators in registers */
        case 1: tap_block(x2, pl, w, o, 1); break;
        case 2: tap_block(x2, pl, w, o, 2); break;
        case 3: tap_block(x2, pl, w, o, 3); break;
        case 4: tap_block(x2, pl, w, o, 4); break;
        case 5: tap_block(x2, pl, w, o, 5); break;
        case 6: tap_block(x2, pl, w, o, 6); break;
        case 7: tap_block(x2, pl, w, o, 7); break;
        default: tap_block(x2, pl, w, o, OB); break;
        }
    }
}

/* acc[o][t] (16 lanes each) += dy[o][p] * in[p + off[t]] over pairs of
 * positions, for no <= GO channels and nt <= GT taps starting at t0. */
static inline __attribute__((always_inline)) void gw_block(const uint16_t *in, const bp_plan *pl,
                                                           const uint16_t *dy, float *acc, int t0,
                                                           const int no, const int nt)
{
    __m512 a[GO][GT];
    for (int o = 0; o < no; o++)
        for (int k = 0; k < nt; k++)
            a[o][k] = _mm512_load_ps(acc + ((size_t)o * pl->nsingle + t0 + k) * 16);
    for (int p = 0; p < pl->len; p += 32) {
        __m512bh d[GO];
        for (int o = 0; o < no; o++)
            d[o] = (__m512bh)_mm512_load_si512(dy + (size_t)o * pl->len + p);
        for (int k = 0; k < nt; k++) {
            __m512bh x = (__m512bh)_mm512_loadu_si512(in + p + pl->off[t0 + k]);
            for (int o = 0; o < no; o++)
                a[o][k] = _mm512_dpbf16_ps(a[o][k], d[o], x);
        }
    }
    for (int o = 0; o < no; o++)
        for (int k = 0; k < nt; k++)
            _mm512_store_ps(acc + ((size_t)o * pl->nsingle + t0 + k) * 16, a[o][k]);
}

#define GW_TAPS(n)                                                                                 \
    do {                                                                                           \
        if (nt == GT)                                                                              \
            gw_block(in, pl, dy, acc, t, n, GT);                                                   \
        else                                                                                       \
            gw_block(in, pl, dy, acc, t, n, 1);                                                    \
    } while (0)

/* One image's contribution to the lane-wise weight-gradient accumulators. */
static void gw_image(const uint16_t *in, const bp_plan *pl, const uint16_t *dyw, float *accv)
{
    for (int o0 = 0; o0 < pl->nout; o0 += GO) {
        int no = pl->nout - o0 < GO ? pl->nout - o0 : GO;
        const uint16_t *dy = dyw + (size_t)o0 * pl->len;
        float *acc = accv + (size_t)o0 * pl->nsingle * 16;
        for (int t = 0; t < pl->nsingle;) {
            int nt = pl->nsingle - t >= GT ? GT : 1;
            switch (no) {
            case 1: GW_TAPS(1); break;
            case 2: GW_TAPS(2); break;
            case 3: GW_TAPS(3); break;
            default: GW_TAPS(GO); break;
            }
            t += nt;
        }
    }
}

/* x2[q] = (bf16 in[q], bf16 in[q + shift]) for q in [begin, end), both
 * multiples of 16: the low half of each 32-bit pair is vdpbf16ps's first. */
static void pair_pack(const float *in, int shift, size_t begin, size_t end, uint32_t *x2)
{
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                           22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (size_t q = begin; q < end; q += 16) {
        __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + q + shift), _mm512_loadu_ps(in + q));
        _mm512_storeu_si512(x2 + q, _mm512_permutexvar_epi16(inter, (__m512i)h));
    }
}

/* The pairs of every channel a pair's first tap lies in. */
static void pair_image(const float *in, const bp_plan *pl, uint32_t *x2)
{
    if (pl->shift != pl->plane) {
        pair_pack(in, pl->shift, 0, (size_t)pl->nin * pl->plane, x2);
        return;
    }
    for (int c = 0; c < pl->nin; c += 2)
        pair_pack(in, pl->shift, (size_t)c * pl->plane, (size_t)(c + 1) * pl->plane, x2);
}

/* out = bf16(in), n a multiple of 16. */
static void to_bf16(const float *in, size_t n, uint16_t *out)
{
    for (size_t q = 0; q < n; q += 16)
        _mm256_storeu_si256((__m256i *)(out + q), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(in + q)));
}

/* acc (16 lanes) += x[0..len), len a multiple of 16. */
static void lane_accum(float *acc, const float *x, int len)
{
    __m512 a = _mm512_load_ps(acc);
    for (int p = 0; p < len; p += 16)
        a = _mm512_add_ps(a, _mm512_loadu_ps(x + p));
    _mm512_store_ps(acc, a);
}

static float lane_sum(const float *v) { return _mm512_reduce_add_ps(_mm512_load_ps(v)); }

/* ---- setup ---- */

/* Pairs the taps (c, y, x), t = (c*kh + y)*kw + x: channels c and c+1 when
 * nin is even (the second reads a plane further), else columns x and x+1
 * (one element apart; `dir` -1 when the offset falls as x grows, as in
 * backward data), an odd last column alone with a zero partner. */
static int make_pairs(bp_plan *pl, int kh, int kw, int dir)
{
    int chan = pl->nin % 2 == 0, k2 = kh * kw, n = 0;
    pl->shift = chan ? pl->plane : 1;
    pl->pt = malloc((size_t)2 * pl->nsingle * sizeof *pl->pt);
    pl->poff = malloc((size_t)pl->nsingle * sizeof *pl->poff);
    if (!pl->pt || !pl->poff)
        return SO_ENOMEM;
    for (int c = 0; c < pl->nin; c++)
        for (int y = 0; y < kh; y++)
            for (int x = 0; x < kw; x++) {
                int t = (c * kh + y) * kw + x, a = t, b = -1;
                if (chan ? c % 2 : x % 2)
                    continue;
                if (chan)
                    b = t + k2;
                else if (x + 1 < kw) {
                    a = dir > 0 ? t : t + 1;
                    b = dir > 0 ? t + 1 : t;
                }
                pl->pt[2 * n] = a;
                pl->pt[2 * n + 1] = b;
                pl->poff[n++] = pl->off[a];
            }
    pl->npairs = n;
    size_t nb = (size_t)(pl->nout + OB - 1) / OB;
    pl->w = so_alloc(nb * (size_t)n * OB * sizeof *pl->w);
    if (!pl->w)
        return SO_ENOMEM;
    memset(pl->w, 0, nb * (size_t)n * OB * sizeof *pl->w);
    return 0;
}

/* Forward: a stride-1 convolution of (ic, ih, iw) padded by (ph, pw). */
static int plan_fwd_init(od_dconvh *d)
{
    bp_plan *pl = &d->f;
    pl->nin = d->ic;
    pl->nout = d->oc;
    pl->nsingle = d->ic * d->kh * d->kw;
    pl->pw = d->iw + 2 * d->pw;
    pl->len = round_up(d->oh * pl->pw, 32);
    pl->plane = round_up(pl->len + (d->kh - 1) * pl->pw + d->kw - 1, 32);
    if (pl->plane < (d->ih + 2 * d->ph) * pl->pw)
        pl->plane = round_up((d->ih + 2 * d->ph) * pl->pw, 32);
    pl->off = malloc((size_t)pl->nsingle * sizeof *pl->off);
    if (!pl->off)
        return SO_ENOMEM;
    for (int c = 0, t = 0; c < d->ic; c++)
        for (int y = 0; y < d->kh; y++)
            for (int x = 0; x < d->kw; x++)
                pl->off[t++] = c * pl->plane + y * pl->pw + x;
    return make_pairs(pl, d->kh, d->kw, 1);
}

/* Backward data as onednn_dconv_body.h's plan_bd_init: dx on the forward's
 * padded grid gathered from dy kept after `front` zeros. */
static int plan_bd_init(od_dconvh *d)
{
    bp_plan *pl = &d->bd;
    d->front = round_up((d->kh - 1) * d->f.pw + d->kw - 1, 32);
    pl->nin = d->oc;
    pl->nout = d->ic;
    pl->nsingle = d->oc * d->kh * d->kw;
    pl->pw = d->f.pw;
    pl->len = round_up(d->ih * pl->pw, 32);
    pl->plane = round_up(d->front + d->ph * pl->pw + pl->len, 32);
    if (pl->plane < d->front + d->f.len)
        pl->plane = d->front + d->f.len;
    pl->off = malloc((size_t)pl->nsingle * sizeof *pl->off);
    if (!pl->off)
        return SO_ENOMEM;
    for (int o = 0, t = 0; o < d->oc; o++)
        for (int y = 0; y < d->kh; y++)
            for (int x = 0; x < d->kw; x++)
                pl->off[t++] = o * pl->plane + d->front + (d->ph - y) * pl->pw - x;
    return make_pairs(pl, d->kh, d->kw, -1);
}

static void plan_fini(bp_plan *pl)
{
    free(pl->off);
    free(pl->poff);
    free(pl->pt);
    so_free(pl->w);
}

/* Byte offsets of the scratch parts, each 64-byte aligned; returns the total.
 * xin and dyp get 16 spare zero floats: column pairs read one element on. */
static size_t tb_offsets(const od_dconvh *d, size_t off[10])
{
    size_t fin = (size_t)d->ic * d->f.plane, bdin = d->has_bd ? (size_t)d->oc * d->bd.plane : 0;
    size_t wl = (size_t)d->oc * d->f.len;
    if (d->has_bd && (size_t)d->ic * d->bd.len > wl)
        wl = (size_t)d->ic * d->bd.len;
    size_t sz[10] = {(fin + 16) * 4, fin * 4, (fin + 32) * 2, d->has_bd ? (bdin + 16) * 4 : 0, bdin * 4,
                     wl * 4, (size_t)d->oc * d->f.len * 4, (size_t)d->oc * d->f.len * 2,
                     (size_t)d->oc * d->f.nsingle * 16 * 4, (size_t)d->oc * 16 * 4};
    size_t at = 0;
    for (int i = 0; i < 10; i++) {
        off[i] = at;
        at += (sz[i] + 63) / 64 * 64;
    }
    return at;
}

static bp_tb tb_view(const od_dconvh *d, int thr)
{
    size_t o[10];
    tb_offsets(d, o);
    char *b = d->tb[thr];
    return (bp_tb){.xin = (float *)(b + o[0]), .x2 = (uint32_t *)(b + o[1]), .x16 = (uint16_t *)(b + o[2]),
                   .dyp = (float *)(b + o[3]), .dy2 = (uint32_t *)(b + o[4]), .wide = (float *)(b + o[5]),
                   .dyw = (float *)(b + o[6]), .dy16 = (uint16_t *)(b + o[7]), .acc = (float *)(b + o[8]),
                   .db = (float *)(b + o[9])};
}

static int alloc_threads(od_dconvh *d)
{
    size_t off[10];
    d->nthr = omp_get_max_threads() < 1 ? 1 : omp_get_max_threads();
    size_t bytes = tb_offsets(d, off);
    d->tb = calloc((size_t)d->nthr, sizeof *d->tb);
    if (!d->tb)
        return SO_ENOMEM;
    for (int i = 0; i < d->nthr; i++) {
        d->tb[i] = so_alloc(bytes);
        if (!d->tb[i])
            return SO_ENOMEM;
        memset(d->tb[i], 0, bytes); /* pad borders stay zero */
    }
    return 0;
}

/* ---- weights ---- */

/* Weight of tap t for output o: forward W[o][t]; backward data, tap
 * (oc, y, x) of input channel o is W[oc][o][y][x]. */
static float tap_weight(const od_dconvh *d, const float *W, int bd, int t, int o)
{
    int k2 = d->kh * d->kw;
    if (!bd)
        return W[(size_t)o * d->f.nsingle + t];
    return W[((size_t)(t / k2) * d->ic + o) * k2 + t % k2];
}

static void pack(od_dconvh *d, const float *W, int bd)
{
    bp_plan *pl = bd ? &d->bd : &d->f;
    for (int i = 0; i < pl->npairs; i++)
        for (int o = 0; o < pl->nout; o++) {
            int a = pl->pt[2 * i], b = pl->pt[2 * i + 1];
            uint32_t lo = so_f32_to_bf16_1(tap_weight(d, W, bd, a, o));
            uint32_t hi = b < 0 ? 0 : so_f32_to_bf16_1(tap_weight(d, W, bd, b, o));
            pl->w[((size_t)(o / OB) * pl->npairs + i) * OB + o % OB] = lo | hi << 16;
        }
}

/* ---- per-image phases (FP32 staging, as onednn_dconv_body.h) ---- */

static void pad_image(const float *src, const od_dconvh *d, float *dst)
{
    for (int i = 0; i < d->ic; i++)
        for (int y = 0; y < d->ih; y++)
            memcpy(dst + (size_t)i * d->f.plane + (size_t)(y + d->ph) * d->f.pw + d->pw,
                   src + ((size_t)i * d->ih + y) * d->iw, (size_t)d->iw * sizeof(float));
}

/* Lanes [0, n - x) of a 16-lane chunk at x. */
static __mmask16 tail_mask(int n, int x) { return n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1); }

/* dst = wide + bias, ReLU'd when fused (NaN kept), dropping the pad columns. */
static void store_out(const od_dconvh *d, const float *wide, const float *bias, float *dst)
{
    for (int o = 0; o < d->oc; o++) {
        __m512 b = _mm512_set1_ps(bias ? bias[o] : 0.0f);
        for (int y = 0; y < d->oh; y++) {
            const float *r = wide + (size_t)o * d->f.len + (size_t)y * d->f.pw;
            float *q = dst + ((size_t)o * d->oh + y) * d->ow;
            for (int x = 0; x < d->ow; x += 16) {
                __mmask16 k = tail_mask(d->ow, x);
                __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, r + x), b);
                _mm512_mask_storeu_ps(q + x, k, d->relu ? _mm512_max_ps(_mm512_setzero_ps(), v) : v);
            }
        }
    }
}

/* dy (masked by the fused ReLU) onto the wide grids in FP32, the bias
 * gradient summed from it in FP32, then its BF16 forms. */
static void prep_dy(const od_dconvh *d, const float *dy, const float *out, bp_tb *v)
{
    for (int o = 0; o < d->oc; o++)
        for (int y = 0; y < d->oh; y++) {
            size_t r = ((size_t)o * d->oh + y) * d->ow;
            float *w = v->dyw + (size_t)o * d->f.len + (size_t)y * d->f.pw;
            float *p = d->has_bd ? v->dyp + (size_t)o * d->bd.plane + d->front + (size_t)y * d->f.pw : NULL;
            for (int x = 0; x < d->ow; x += 16) { /* zero where the ReLU's output was <= 0 */
                __mmask16 k = tail_mask(d->ow, x);
                if (d->relu)
                    k = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, out + r + x), _mm512_setzero_ps(),
                                                _CMP_NLE_UQ);
                __m512 g = _mm512_maskz_loadu_ps(k, dy + r + x);
                __mmask16 all = tail_mask(d->ow, x);
                _mm512_mask_storeu_ps(w + x, all, g);
                if (p)
                    _mm512_mask_storeu_ps(p + x, all, g);
            }
        }
    for (int o = 0; o < d->oc; o++)
        lane_accum(v->db + (size_t)o * 16, v->dyw + (size_t)o * d->f.len, d->f.len);
    to_bf16(v->dyw, (size_t)d->oc * d->f.len, v->dy16);
    if (d->has_bd)
        pair_image(v->dyp, &d->bd, v->dy2);
}

static void store_dx(const od_dconvh *d, const float *wide, float *dx)
{
    for (int c = 0; c < d->ic; c++)
        for (int y = 0; y < d->ih; y++)
            memcpy(dx + ((size_t)c * d->ih + y) * d->iw, wide + (size_t)c * d->bd.len + (size_t)y * d->bd.pw + d->pw,
                   (size_t)d->iw * sizeof(float));
}

/* ---- op ---- */

static int dconvh_create(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    so_shape is = od_node(s, nd->inputs[0])->out;
    od_dconvh *d = calloc(1, sizeof *d);
    if (!d)
        return so_err(SO_ENOMEM, "out of memory for node %s", nd->name);
    s->t[node].priv = d;
    *d = (od_dconvh){.ic = is.c, .oc = nd->a.out, .ih = is.h, .iw = is.w, .oh = nd->out.h, .ow = nd->out.w,
                     .kh = nd->a.kh, .kw = nd->a.kw, .ph = nd->a.ph, .pw = nd->a.pw, .relu = nd->a.relu,
                     .bias = nd->a.bias, .has_bd = so_graph_needs_diff(s->g, node, 0)};
    int rc = plan_fwd_init(d);
    if (!rc && d->has_bd)
        rc = plan_bd_init(d);
    if (!rc)
        rc = alloc_threads(d);
    if (rc)
        return so_err(SO_ENOMEM, "out of memory for node %s", nd->name);
    dnnl_memory_desc_t md;
    od_md_plain(s, node, &md);
    return od_tensor_alloc(s, node, &md);
}

static int nthreads(const od_dconvh *d, int batch)
{
    int n = omp_get_max_threads();
    n = n < d->nthr ? n : d->nthr;
    return n < batch ? n : batch;
}

static int dconvh_forward(od_state *s, int node, int training)
{
    (void)training;
    od_dconvh *d = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    const float *W = so_model_params_at(s->m, nd->param_off);
    if (!d->f_valid) {
        pack(d, W, 0);
        d->f_valid = 1;
    }
    const float *bias = d->bias ? W + (size_t)d->oc * d->f.nsingle : NULL;
    const float *src = od_in(s, node, 0)->buf;
    float *dst = s->t[node].buf;
    int batch = s->m->batch;
    size_t isz = (size_t)d->ic * d->ih * d->iw, osz = (size_t)d->oc * d->oh * d->ow;
#pragma omp parallel num_threads(nthreads(d, batch))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        bp_tb v = tb_view(d, id);
        for (int n = batch * id / nt; n < batch * (id + 1) / nt; n++) {
            pad_image(src + n * isz, d, v.xin);
            pair_image(v.xin, &d->f, v.x2);
            tap_conv(v.x2, &d->f, v.wide);
            store_out(d, v.wide, bias, dst + n * osz);
        }
    }
    return 0;
}

/* The per-thread lane accumulators summed in thread order (deterministic
 * for a given thread count), written or added into the flat grads. */
static void reduce_grads(od_state *s, int node, od_dconvh *d, int used)
{
    float *g = so_model_grads_at(s->m, od_node(s, node)->param_off);
    size_t nw = (size_t)d->oc * d->f.nsingle;
    int add = s->m->accumulate_grads;
    for (size_t i = 0; i < nw; i++) {
        float sum = 0.0f;
        for (int t = 0; t < used; t++)
            sum += lane_sum(tb_view(d, t).acc + i * 16);
        g[i] = add ? g[i] + sum : sum;
    }
    for (int o = 0; d->bias && o < d->oc; o++) {
        float sum = 0.0f;
        for (int t = 0; t < used; t++)
            sum += lane_sum(tb_view(d, t).db + (size_t)o * 16);
        g[nw + o] = add ? g[nw + o] + sum : sum;
    }
}

static int dconvh_backward(od_state *s, int node)
{
    od_dconvh *d = s->t[node].priv;
    if (d->has_bd && !d->bd_valid) {
        pack(d, so_model_params_at(s->m, od_node(s, node)->param_off), 1);
        d->bd_valid = 1;
    }
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    float *dx = d->has_bd ? (od_diff_staged(s, node, 0) ? s->scratch : in->dbuf) : NULL;
    int batch = s->m->batch, used = 1;
    size_t isz = (size_t)d->ic * d->ih * d->iw, osz = (size_t)d->oc * d->oh * d->ow;
#pragma omp parallel num_threads(nthreads(d, batch))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        bp_tb v = tb_view(d, id);
        if (id == 0)
            used = nt;
        memset(v.acc, 0, (size_t)d->oc * d->f.nsingle * 16 * sizeof(float));
        memset(v.db, 0, (size_t)d->oc * 16 * sizeof(float));
        for (int n = batch * id / nt; n < batch * (id + 1) / nt; n++) {
            pad_image(in->buf + n * isz, d, v.xin);
            to_bf16(v.xin, (size_t)d->ic * d->f.plane, v.x16);
            prep_dy(d, t->dbuf + n * osz, t->buf + n * osz, &v);
            gw_image(v.x16, &d->f, v.dy16, v.acc);
            if (dx) {
                tap_conv(v.dy2, &d->bd, v.wide);
                store_dx(d, v.wide, dx + n * isz);
            }
        }
    }
    reduce_grads(s, node, d, used);
    if (dx)
        od_diff_finish(s, node, 0);
    return 0;
}

static void dconvh_invalidate(void *priv)
{
    od_dconvh *d = priv;
    d->f_valid = 0;
    d->bd_valid = 0;
}

static void dconvh_destroy(void *priv)
{
    od_dconvh *d = priv;
    plan_fini(&d->f);
    plan_fini(&d->bd);
    for (int i = 0; d->tb && i < d->nthr; i++)
        so_free(d->tb[i]);
    free(d->tb);
    free(d);
}

SO_ISA_END

const od_op od_op_dconv_bf16 = {dconvh_create, dconvh_forward, dconvh_backward, dconvh_destroy, dconvh_invalidate};
