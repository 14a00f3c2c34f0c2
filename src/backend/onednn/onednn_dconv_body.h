/* The direct convolution of onednn_dconv.c, written once over the vector
 * operations of one ISA: included by onednn_dconv_avx512.c and
 * onednn_dconv_avx2.c, each under its own SO_ISA_BEGIN (core/isa_target.h), after
 * defining vf, VL, v_*(), OB, GO, GT and DC_OP (see onednn_dconv_avx2.c).
 * No include guard: each instance file includes it once. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

/* Layout trick: an image zero-padded to rows of pitch PW lets output position
 * p = oh*PW + ow read its input at p + off[tap] for every tap, so every tap is
 * one contiguous vector of VL output positions. The PW - OW columns past each
 * row (and the tail up to a multiple of 16, which every VL divides) are
 * computed and dropped. */
typedef struct {
    int pw, plane, len;          /* row pitch, floats per padded channel, wide length */
    int *off;                    /* per tap: channel*plane + kh*pw + kw */
    float *w;                    /* packed weights [block][tap][OB] */
    int ntaps, nin, nout;        /* taps = nin*kh*kw */
} dc_plan;

typedef struct {
    int ic, oc, ih, iw, oh, ow, kh, kw, ph, pw, relu, bias;
    int nthr;
    dc_plan f, bd;               /* forward; backward data (see plan_bd_init) */
    int front;                   /* zeros before each dy row block of bd's input */
    int f_valid, bd_valid, has_bd;
    float **tb;                  /* per-thread scratch */
    size_t tb_floats;
} od_dconv;

/* tap_conv and gw_image spell out the smaller block sizes up to these. */
_Static_assert(OB >= 6 && OB <= 8 && GO >= 2 && GO <= 4, "register blocks out of range");

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* ---- kernels ---- */

/* out[o][p] = sum_t w[t][o] * in[p + off[t]] for nb <= OB channels, p < len. */
static inline __attribute__((always_inline)) void tap_block(const float *in, const dc_plan *pl,
                                                            const float *w, float *out, const int nb)
{
    int p = 0;
    for (; p + 2 * VL <= pl->len; p += 2 * VL) {
        vf a0[OB], a1[OB];
        for (int o = 0; o < nb; o++)
            a0[o] = a1[o] = v_zero();
        const float *ip = in + p;
        for (int t = 0; t < pl->ntaps; t++) {
            vf x0 = v_loadu(ip + pl->off[t]);
            vf x1 = v_loadu(ip + pl->off[t] + VL);
            const float *wt = w + t * OB;
            for (int o = 0; o < nb; o++) {
                vf b = v_set1(wt[o]);
                a0[o] = v_fma(x0, b, a0[o]);
                a1[o] = v_fma(x1, b, a1[o]);
            }
        }
        for (int o = 0; o < nb; o++) {
            v_storeu(out + (size_t)o * pl->len + p, a0[o]);
            v_storeu(out + (size_t)o * pl->len + p + VL, a1[o]);
        }
    }
    for (; p < pl->len; p += VL) { /* len is a multiple of 16: for VL 16, one half chunk */
        vf a0[OB];
        for (int o = 0; o < nb; o++)
            a0[o] = v_zero();
        for (int t = 0; t < pl->ntaps; t++) {
            vf x0 = v_loadu(in + p + pl->off[t]);
            for (int o = 0; o < nb; o++)
                a0[o] = v_fma(x0, v_set1(w[t * OB + o]), a0[o]);
        }
        for (int o = 0; o < nb; o++)
            v_storeu(out + (size_t)o * pl->len + p, a0[o]);
    }
}

/* All output channels of one padded image into the wide buffer `out`. */
static void tap_conv(const float *in, const dc_plan *pl, float *out)
{
    for (int b = 0; b * OB < pl->nout; b++) {
        int nb = pl->nout - b * OB < OB ? pl->nout - b * OB : OB;
        const float *w = pl->w + (size_t)b * pl->ntaps * OB;
        float *o = out + (size_t)b * OB * pl->len;
        switch (nb) { /* constant block sizes keep the accumulators in registers */
        case 1: tap_block(in, pl, w, o, 1); break;
        case 2: tap_block(in, pl, w, o, 2); break;
        case 3: tap_block(in, pl, w, o, 3); break;
        case 4: tap_block(in, pl, w, o, 4); break;
        case 5: tap_block(in, pl, w, o, 5); break;
#if OB > 6
        case 6: tap_block(in, pl, w, o, 6); break;
        case 7: tap_block(in, pl, w, o, 7); break;
#endif
        default: tap_block(in, pl, w, o, OB); break;
        }
    }
}

/* acc[o][t] (VL lanes each) += dy[o][p] * in[p + off[t]] for no <= GO
 * channels and nt <= GT taps starting at t0. */
static inline __attribute__((always_inline)) void gw_block(const float *in, const dc_plan *pl,
                                                           const float *dy, float *acc, int t0,
                                                           const int no, const int nt)
{
    vf a[GO][GT];
    for (int o = 0; o < no; o++)
        for (int k = 0; k < nt; k++)
            a[o][k] = v_load(acc + ((size_t)o * pl->ntaps + t0 + k) * VL);
    for (int p = 0; p < pl->len; p += VL) {
        vf d[GO];
        for (int o = 0; o < no; o++)
            d[o] = v_load(dy + (size_t)o * pl->len + p);
        for (int k = 0; k < nt; k++) {
            vf x = v_loadu(in + p + pl->off[t0 + k]);
            for (int o = 0; o < no; o++)
                a[o][k] = v_fma(d[o], x, a[o][k]);
        }
    }
    for (int o = 0; o < no; o++)
        for (int k = 0; k < nt; k++)
            v_store(acc + ((size_t)o * pl->ntaps + t0 + k) * VL, a[o][k]);
}

#define GW_CASE(n)                                                                                \
    case n:                                                                                       \
        if (nt == GT)                                                                             \
            gw_block(in, pl, dy, acc, t, n, GT);                                                  \
        else                                                                                      \
            gw_block(in, pl, dy, acc, t, n, 1);                                                   \
        break;

/* One image's contribution to the lane-wise weight-gradient accumulators. */
static void gw_image(const float *in, const dc_plan *pl, const float *dyw, float *accv)
{
    for (int o0 = 0; o0 < pl->nout; o0 += GO) {
        int no = pl->nout - o0 < GO ? pl->nout - o0 : GO;
        const float *dy = dyw + (size_t)o0 * pl->len;
        float *acc = accv + (size_t)o0 * pl->ntaps * VL;
        for (int t = 0; t < pl->ntaps;) {
            int nt = pl->ntaps - t >= GT ? GT : 1;
            switch (no) {
                GW_CASE(1)
#if GO > 2
                GW_CASE(2)
#endif
#if GO > 3
                GW_CASE(3)
#endif
            default:
                if (nt == GT)
                    gw_block(in, pl, dy, acc, t, GO, GT);
                else
                    gw_block(in, pl, dy, acc, t, GO, 1);
                break;
            }
            t += nt;
        }
    }
}

/* acc (VL lanes) += x[0..len), len a multiple of 16. */
static void lane_accum(float *acc, const float *x, int len)
{
    vf a = v_load(acc);
    for (int p = 0; p < len; p += VL)
        a = v_add(a, v_loadu(x + p));
    v_store(acc, a);
}

static float lane_sum(const float *v) { return v_sum(v_load(v)); }

/* ---- setup ---- */

/* Geometry of a stride-1 convolution of (nin, h, w) padded by (ph, pw)
 * with an oh x ow output. */
static int plan_init(dc_plan *pl, int nin, int nout, int h, int w, int ph, int pw, int kh, int kw,
                     int oh)
{
    pl->nin = nin;
    pl->nout = nout;
    pl->ntaps = nin * kh * kw;
    pl->pw = w + 2 * pw;
    pl->len = round_up(oh * pl->pw, 16);
    /* the last chunk reads up to len + (kh-1)*pitch + kw-1; keep it inside */
    pl->plane = round_up(pl->len + (kh - 1) * pl->pw + kw - 1, 16);
    if (pl->plane < (h + 2 * ph) * pl->pw)
        pl->plane = round_up((h + 2 * ph) * pl->pw, 16);
    pl->off = malloc((size_t)pl->ntaps * sizeof *pl->off);
    size_t nb = (size_t)(nout + OB - 1) / OB;
    pl->w = so_alloc(nb * (size_t)pl->ntaps * OB * sizeof(float));
    if (!pl->off || !pl->w)
        return SO_ENOMEM;
    memset(pl->w, 0, nb * (size_t)pl->ntaps * OB * sizeof(float));
    for (int c = 0, t = 0; c < nin; c++)
        for (int y = 0; y < kh; y++)
            for (int x = 0; x < kw; x++)
                pl->off[t++] = c * pl->plane + y * pl->pw + x;
    return 0;
}

/* Backward data gathers dx on the forward's padded grid (same pitch) from dy
 * kept on the forward's wide grid after `front` zeros: dx at q = iy*pitch +
 * ix + pw sums W[o][c][y][x] * dy[o][q + (ph - y)*pitch - x]. Out-of-range
 * dy reads land in the front zeros, the zero tail, or the wide grid's kw-1
 * zero columns (which absorb the row wrap-around of the x shift), so the
 * only waste is those columns (14/10 wide for LeNet's conv2, vs 18/14 for a
 * padded-dy formulation). */
static int plan_bd_init(od_dconv *d)
{
    dc_plan *pl = &d->bd;
    d->front = round_up((d->kh - 1) * d->f.pw + d->kw - 1, 16);
    pl->nin = d->oc;
    pl->nout = d->ic;
    pl->ntaps = d->oc * d->kh * d->kw;
    pl->pw = d->f.pw;
    pl->len = round_up(d->ih * pl->pw, 16);
    pl->plane = round_up(d->front + d->ph * pl->pw + pl->len, 16);
    if (pl->plane < d->front + d->f.len)
        pl->plane = d->front + d->f.len;
    pl->off = malloc((size_t)pl->ntaps * sizeof *pl->off);
    size_t nb = (size_t)(pl->nout + OB - 1) / OB;
    pl->w = so_alloc(nb * (size_t)pl->ntaps * OB * sizeof(float));
    if (!pl->off || !pl->w)
        return SO_ENOMEM;
    memset(pl->w, 0, nb * (size_t)pl->ntaps * OB * sizeof(float));
    for (int o = 0, t = 0; o < d->oc; o++)
        for (int y = 0; y < d->kh; y++)
            for (int x = 0; x < d->kw; x++)
                pl->off[t++] = o * pl->plane + d->front + (d->ph - y) * pl->pw - x;
    return 0;
}

static void plan_fini(dc_plan *pl)
{
    free(pl->off);
    so_free(pl->w);
}

/* Per-thread scratch: padded input, padded dy, wide output, wide dy, and
 * the lane-wise weight/bias gradient accumulators. */
typedef struct {
    float *xin, *dyp, *wide, *dyw, *acc, *db;
} dc_tb;

/* Offsets of the parts in floats (each a multiple of 16 for alignment). */
static size_t tb_offsets(const od_dconv *d, size_t off[6])
{
    size_t wl = (size_t)d->oc * d->f.len;
    if (d->has_bd && (size_t)d->ic * d->bd.len > wl)
        wl = (size_t)d->ic * d->bd.len;
    size_t sz[6] = {(size_t)d->ic * d->f.plane, d->has_bd ? (size_t)d->oc * d->bd.plane : 0, wl,
                    (size_t)d->oc * d->f.len, (size_t)d->oc * d->f.ntaps * VL, (size_t)d->oc * VL};
    size_t at = 0;
    for (int i = 0; i < 6; i++) {
        off[i] = at;
        at += (sz[i] + 15) / 16 * 16;
    }
    return at;
}

static dc_tb tb_view(const od_dconv *d, int thr)
{
    size_t off[6];
    tb_offsets(d, off);
    float *b = d->tb[thr];
    return (dc_tb){b + off[0], b + off[1], b + off[2], b + off[3], b + off[4], b + off[5]};
}

static int alloc_threads(od_dconv *d)
{
    size_t off[6];
    d->nthr = omp_get_max_threads() < 1 ? 1 : omp_get_max_threads();
    d->tb_floats = tb_offsets(d, off);
    d->tb = calloc((size_t)d->nthr, sizeof *d->tb);
    if (!d->tb)
        return SO_ENOMEM;
    for (int i = 0; i < d->nthr; i++) {
        d->tb[i] = so_alloc(d->tb_floats * sizeof(float));
        if (!d->tb[i])
            return SO_ENOMEM;
        memset(d->tb[i], 0, d->tb_floats * sizeof(float)); /* pad borders stay zero */
    }
    return 0;
}

/* ---- weights ---- */

/* Forward: w[b][t][o] = W[b*OB+o][t] (flat OIHW rows are the taps). */
static void pack_fwd(od_dconv *d, const float *W)
{
    dc_plan *pl = &d->f;
    for (int o = 0; o < d->oc; o++)
        for (int t = 0; t < pl->ntaps; t++)
            pl->w[((size_t)(o / OB) * pl->ntaps + t) * OB + o % OB] = W[(size_t)o * pl->ntaps + t];
    d->f_valid = 1;
}

/* Backward data: tap (oc, y, x) of input channel c is W[oc][c][y][x]. */
static void pack_bd(od_dconv *d, const float *W)
{
    dc_plan *pl = &d->bd;
    int k2 = d->kh * d->kw;
    for (int o = 0; o < d->oc; o++)
        for (int c = 0; c < d->ic; c++)
            for (int y = 0; y < d->kh; y++)
                for (int x = 0; x < d->kw; x++) {
                    int t = (o * d->kh + y) * d->kw + x;
                    float v = W[((size_t)o * d->ic + c) * k2 + y * d->kw + x];
                    pl->w[((size_t)(c / OB) * pl->ntaps + t) * OB + c % OB] = v;
                }
    d->bd_valid = 1;
}

/* ---- per-image phases ---- */

/* Copies image n into the interior of the padded buffer (borders stay 0). */
static void pad_image(const float *src, int c, int h, int w, const dc_plan *pl, int ph, int pw, float *dst)
{
    for (int i = 0; i < c; i++)
        for (int y = 0; y < h; y++)
            memcpy(dst + (size_t)i * pl->plane + (size_t)(y + ph) * pl->pw + pw,
                   src + ((size_t)i * h + y) * w, (size_t)w * sizeof(float));
}

/* dst = wide + bias, ReLU'd when fused, dropping the pad columns. */
static void store_out(const od_dconv *d, const float *wide, const float *bias, float *dst)
{
    for (int o = 0; o < d->oc; o++) {
        float b = bias ? bias[o] : 0.0f;
        for (int y = 0; y < d->oh; y++) {
            const float *r = wide + (size_t)o * d->f.len + (size_t)y * d->f.pw;
            float *q = dst + ((size_t)o * d->oh + y) * d->ow;
            for (int x = 0; x < d->ow; x++) {
                float v = r[x] + b;
                q[x] = d->relu && v < 0.0f ? 0.0f : v;
            }
        }
    }
}

/* dy of image n (masked by the fused ReLU) into the wide grid for the weight
 * gradient and (after `front` zeros) for backward data; sums the bias gradient
 * lane-wise (a scalar running sum is latency bound). */
static void prep_dy(const od_dconv *d, const float *dy, const float *out, dc_tb *v)
{
    for (int o = 0; o < d->oc; o++) {
        for (int y = 0; y < d->oh; y++) {
            size_t r = ((size_t)o * d->oh + y) * d->ow;
            float *w = v->dyw + (size_t)o * d->f.len + (size_t)y * d->f.pw;
            float *p = d->has_bd ? v->dyp + (size_t)o * d->bd.plane + d->front + (size_t)y * d->f.pw
                                 : NULL;
#if VL == 16 /* AVX-512: masked rows; the scalar loop (two stores, a branch) was most of LeNet conv1's backward */
            for (int x = 0; x < d->ow; x += 16) {
                __mmask16 all = d->ow - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d->ow - x)) - 1), k = all;
                if (d->relu)
                    k = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, out + r + x), _mm512_setzero_ps(), _CMP_NLE_UQ);
                __m512 g = _mm512_maskz_loadu_ps(k, dy + r + x);
                _mm512_mask_storeu_ps(w + x, all, g);
                if (p)
                    _mm512_mask_storeu_ps(p + x, all, g);
            }
#else
            for (int x = 0; x < d->ow; x++) {
                float g = d->relu && out[r + x] <= 0.0f ? 0.0f : dy[r + x];
                w[x] = g;
                if (d->has_bd)
                    p[x] = g;
            }
#endif
        }
    }
    /* a separate pass: reading a row right after its narrower stores stalls */
    for (int o = 0; o < d->oc; o++)
        lane_accum(v->db + (size_t)o * VL, v->dyw + (size_t)o * d->f.len, d->f.len);
}

static void store_dx(const od_dconv *d, const float *wide, float *dx)
{
    for (int c = 0; c < d->ic; c++)
        for (int y = 0; y < d->ih; y++)
            memcpy(dx + ((size_t)c * d->ih + y) * d->iw,
                   wide + (size_t)c * d->bd.len + (size_t)y * d->bd.pw + d->pw,
                   (size_t)d->iw * sizeof(float));
}

/* ---- op ---- */

static int dconv_create(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    so_shape is = od_node(s, nd->inputs[0])->out;
    od_dconv *d = calloc(1, sizeof *d);
    if (!d)
        return so_err(SO_ENOMEM, "out of memory for node %s", nd->name);
    s->t[node].priv = d;
    *d = (od_dconv){.ic = is.c, .oc = nd->a.out, .ih = is.h, .iw = is.w, .oh = nd->out.h,
                    .ow = nd->out.w, .kh = nd->a.kh, .kw = nd->a.kw, .ph = nd->a.ph,
                    .pw = nd->a.pw, .relu = nd->a.relu, .bias = nd->a.bias,
                    .has_bd = so_graph_needs_diff(s->g, node, 0)};
    int rc = plan_init(&d->f, d->ic, d->oc, d->ih, d->iw, d->ph, d->pw, d->kh, d->kw, d->oh);
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

static int nthreads(const od_dconv *d, int batch)
{
    int n = omp_get_max_threads();
    n = n < d->nthr ? n : d->nthr;
    return n < batch ? n : batch;
}

/* dst = conv(src, W) + b, ReLU'd when fused; images split over threads. */
static int dconv_forward(od_state *s, int node, int training)
{
    (void)training;
    od_dconv *d = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    const float *W = so_model_params_at(s->m, nd->param_off);
    if (!d->f_valid)
        pack_fwd(d, W);
    const float *bias = d->bias ? W + (size_t)d->oc * d->f.ntaps : NULL;
    const float *src = od_in(s, node, 0)->buf;
    float *dst = s->t[node].buf;
    int batch = s->m->batch;
    size_t isz = (size_t)d->ic * d->ih * d->iw, osz = (size_t)d->oc * d->oh * d->ow;
#pragma omp parallel num_threads(nthreads(d, batch))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        dc_tb v = tb_view(d, id);
        for (int n = batch * id / nt; n < batch * (id + 1) / nt; n++) {
            pad_image(src + n * isz, d->ic, d->ih, d->iw, &d->f, d->ph, d->pw, v.xin);
            tap_conv(v.xin, &d->f, v.wide);
            store_out(d, v.wide, bias, dst + n * osz);
        }
    }
    return 0;
}

/* Sums the per-thread lane accumulators in thread order (deterministic for a
 * given thread count) and writes or adds them into the flat grads. */
static void reduce_grads(od_state *s, int node, od_dconv *d, int used)
{
    const so_node *nd = od_node(s, node);
    float *g = so_model_grads_at(s->m, nd->param_off);
    size_t nw = (size_t)d->oc * d->f.ntaps;
    int add = s->m->accumulate_grads;
    for (size_t i = 0; i < nw; i++) {
        float sum = 0.0f;
        for (int t = 0; t < used; t++)
            sum += lane_sum(tb_view(d, t).acc + i * VL);
        g[i] = add ? g[i] + sum : sum;
    }
    for (int o = 0; d->bias && o < d->oc; o++) {
        float sum = 0.0f;
        for (int t = 0; t < used; t++)
            sum += lane_sum(tb_view(d, t).db + (size_t)o * VL);
        g[nw + o] = add ? g[nw + o] + sum : sum;
    }
}

/* Weight, bias and (when needed) input gradients; the fused ReLU is applied
 * to dy on the fly. Each thread owns a slice of the batch. */
static int dconv_backward(od_state *s, int node)
{
    od_dconv *d = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    if (d->has_bd && !d->bd_valid)
        pack_bd(d, so_model_params_at(s->m, nd->param_off));
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    float *dx = d->has_bd ? (od_diff_staged(s, node, 0) ? s->scratch : in->dbuf) : NULL;
    int batch = s->m->batch, used = 1;
    size_t isz = (size_t)d->ic * d->ih * d->iw, osz = (size_t)d->oc * d->oh * d->ow;
#pragma omp parallel num_threads(nthreads(d, batch))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        dc_tb v = tb_view(d, id);
        if (id == 0)
            used = nt;
        memset(v.acc, 0, (size_t)d->oc * d->f.ntaps * VL * sizeof(float));
        memset(v.db, 0, (size_t)d->oc * VL * sizeof(float));
        for (int n = batch * id / nt; n < batch * (id + 1) / nt; n++) {
            pad_image(in->buf + n * isz, d->ic, d->ih, d->iw, &d->f, d->ph, d->pw, v.xin);
            prep_dy(d, t->dbuf + n * osz, t->buf + n * osz, &v);
            gw_image(v.xin, &d->f, v.dyw, v.acc);
            if (dx) {
                tap_conv(v.dyp, &d->bd, v.wide);
                store_dx(d, v.wide, dx + n * isz);
            }
        }
    }
    reduce_grads(s, node, d, used);
    if (dx)
        od_diff_finish(s, node, 0);
    return 0;
}

static void dconv_invalidate(void *priv)
{
    od_dconv *d = priv;
    d->f_valid = 0;
    d->bd_valid = 0;
}

static void dconv_destroy(void *priv)
{
    od_dconv *d = priv;
    plan_fini(&d->f);
    plan_fini(&d->bd);
    for (int i = 0; d->tb && i < d->nthr; i++)
        so_free(d->tb[i]);
    free(d->tb);
    free(d);
}

const od_op DC_OP = {dconv_create, dconv_forward, dconv_backward, dconv_destroy, dconv_invalidate};

