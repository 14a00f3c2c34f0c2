/* Reference 2-D convolution (PyTorch Conv2d): OIHW weights, stride, symmetric
 * zero padding, groups, optional bias, optional fused ReLU. Direct loops, no
 * im2col: for each kernel tap the valid output span is computed once, so the
 * innermost loop runs over a contiguous output row without bounds checks. */
#include "ref_internal.h"

/* Geometry of one conv node. */
typedef struct {
    int c, h, w;        /* input (per sample) */
    int oc, oh, ow;     /* output */
    int kh, kw, sh, sw, ph, pw;
    int cin_g, cout_g;  /* channels per group */
} conv_geom;

static conv_geom geom(const ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    so_shape in = ref_in_shape(s, i, 0);
    const so_attrs *a = &nd->a;
    return (conv_geom){in.c, in.h, in.w, nd->out.c, nd->out.h, nd->out.w, a->kh, a->kw, a->sh, a->sw,
                       a->ph, a->pw, in.c / a->groups, nd->out.c / a->groups};
}

/* y (OH,OW) += w (cin_g,KH,KW) * x (cin_g,H,W): one output plane. */
static void plane_fwd(const conv_geom *g, const float *x, const float *w, float *y)
{
    for (int ic = 0; ic < g->cin_g; ic++) {
        const float *xp = x + (size_t)ic * g->h * g->w;
        for (int kh = 0; kh < g->kh; kh++) {
            int oh0, oh1;
            ref_span(g->h, g->oh, g->sh, g->ph, kh, &oh0, &oh1);
            for (int kw = 0; kw < g->kw; kw++) {
                int ow0, ow1;
                ref_span(g->w, g->ow, g->sw, g->pw, kw, &ow0, &ow1);
                float wv = w[((size_t)ic * g->kh + kh) * g->kw + kw];
                for (int oh = oh0; oh < oh1; oh++) {
                    long base = (long)(oh * g->sh - g->ph + kh) * g->w - g->pw + kw;
                    float *yr = y + (size_t)oh * g->ow;
                    for (int ow = ow0; ow < ow1; ow++)
                        yr[ow] += wv * xp[base + (long)ow * g->sw];
                }
            }
        }
    }
}

/* y is (N,OC,OH,OW), x is (N,C,H,W); output planes are independent. */
int ref_conv_forward(ref_state *s, int i, int training)
{
    (void)training;
    const so_node *nd = ref_node(s, i);
    conv_geom g = geom(s, i);
    const float *x = ref_in(s, i, 0), *w = ref_params(s, i);
    const float *bias = nd->a.bias ? w + (size_t)g.oc * g.cin_g * g.kh * g.kw : NULL;
    float *y = s->act[i];
    size_t plane = (size_t)g.oh * g.ow, inplane = (size_t)g.h * g.w;
    long nplanes = (long)s->batch * g.oc;
    double work = (double)nplanes * plane * g.cin_g * g.kh * g.kw;
#pragma omp parallel for schedule(static) if (work > REF_PAR_WORK)
    for (long p = 0; p < nplanes; p++) {
        int n = (int)(p / g.oc), oc = (int)(p % g.oc), grp = oc / g.cout_g;
        float *yp = y + (size_t)p * plane;
        for (size_t k = 0; k < plane; k++)
            yp[k] = bias ? bias[oc] : 0.0f;
        const float *xg = x + ((size_t)n * g.c + (size_t)grp * g.cin_g) * inplane;
        plane_fwd(&g, xg, w + (size_t)oc * g.cin_g * g.kh * g.kw, yp);
    }
    if (nd->a.relu)
        ref_relu_inplace(y, (size_t)nplanes * plane);
    return 0;
}

/* dx (H,W) of input channel icg of a group += sum over the group's output
 * channels of w[oc][icg] correlated back with dy (OH,OW). dy points at the
 * group's first output plane of this sample, w at the group's first filter. */
static void plane_bwd_data(const conv_geom *g, int icg, const float *dy, const float *w, float *dx)
{
    for (int o = 0; o < g->cout_g; o++) {
        const float *dyp = dy + (size_t)o * g->oh * g->ow;
        const float *wk = w + ((size_t)o * g->cin_g + icg) * g->kh * g->kw;
        for (int kh = 0; kh < g->kh; kh++) {
            int oh0, oh1;
            ref_span(g->h, g->oh, g->sh, g->ph, kh, &oh0, &oh1);
            for (int kw = 0; kw < g->kw; kw++) {
                int ow0, ow1;
                ref_span(g->w, g->ow, g->sw, g->pw, kw, &ow0, &ow1);
                float wv = wk[kh * g->kw + kw];
                for (int oh = oh0; oh < oh1; oh++) {
                    long base = (long)(oh * g->sh - g->ph + kh) * g->w - g->pw + kw;
                    const float *dr = dyp + (size_t)oh * g->ow;
                    for (int ow = ow0; ow < ow1; ow++)
                        dx[base + (long)ow * g->sw] += wv * dr[ow];
                }
            }
        }
    }
}

/* dx is (N,C,H,W); each input plane is written by one iteration. */
static void conv_bwd_data(const ref_state *s, const conv_geom *g, const float *dy, const float *w, float *dx)
{
    size_t plane = (size_t)g->oh * g->ow, inplane = (size_t)g->h * g->w;
    long nplanes = (long)s->batch * g->c;
    double work = (double)s->batch * g->oc * plane * g->cin_g * g->kh * g->kw;
#pragma omp parallel for schedule(static) if (work > REF_PAR_WORK)
    for (long p = 0; p < nplanes; p++) {
        int n = (int)(p / g->c), ic = (int)(p % g->c), grp = ic / g->cin_g;
        const float *dyg = dy + ((size_t)n * g->oc + (size_t)grp * g->cout_g) * plane;
        const float *wg = w + (size_t)grp * g->cout_g * g->cin_g * g->kh * g->kw;
        plane_bwd_data(g, ic % g->cin_g, dyg, wg, dx + (size_t)p * inplane);
    }
}

/* d loss / d w[oc][icg][kh][kw] = sum over samples and output positions of
 * dy[n][oc][oh][ow] * x[n][ic][oh*sh-ph+kh][ow*sw-pw+kw]; double sums. */
static double tap_grad(const ref_state *s, const conv_geom *g, const float *x, const float *dy, int oc, int ic,
                       int kh, int kw)
{
    int oh0, oh1, ow0, ow1;
    ref_span(g->h, g->oh, g->sh, g->ph, kh, &oh0, &oh1);
    ref_span(g->w, g->ow, g->sw, g->pw, kw, &ow0, &ow1);
    double sum = 0.0;
    for (int n = 0; n < s->batch; n++) {
        const float *xp = x + ((size_t)n * g->c + ic) * g->h * g->w;
        const float *dyp = dy + ((size_t)n * g->oc + oc) * g->oh * g->ow;
        for (int oh = oh0; oh < oh1; oh++) {
            long base = (long)(oh * g->sh - g->ph + kh) * g->w - g->pw + kw;
            const float *dr = dyp + (size_t)oh * g->ow;
            float row = 0.0f;
            for (int ow = ow0; ow < ow1; ow++)
                row += dr[ow] * xp[base + (long)ow * g->sw];
            sum += row;
        }
    }
    return sum;
}

/* dw is (OC,cin_g,KH,KW) then bias (OC); one output channel per iteration. */
static void conv_bwd_weights(const ref_state *s, const conv_geom *g, const float *x, const float *dy, float *dw,
                             int bias)
{
    size_t plane = (size_t)g->oh * g->ow;
    float *db = dw + (size_t)g->oc * g->cin_g * g->kh * g->kw;
    double work = (double)s->batch * g->oc * plane * g->cin_g * g->kh * g->kw;
#pragma omp parallel for schedule(static) if (work > REF_PAR_WORK)
    for (int oc = 0; oc < g->oc; oc++) {
        int grp = oc / g->cout_g;
        float *wk = dw + (size_t)oc * g->cin_g * g->kh * g->kw;
        for (int icg = 0; icg < g->cin_g; icg++)
            for (int kh = 0; kh < g->kh; kh++)
                for (int kw = 0; kw < g->kw; kw++)
                    wk[(icg * g->kh + kh) * g->kw + kw] +=
                        (float)tap_grad(s, g, x, dy, oc, grp * g->cin_g + icg, kh, kw);
        if (!bias)
            continue;
        double sum = 0.0;
        for (int n = 0; n < s->batch; n++) {
            const float *dyp = dy + ((size_t)n * g->oc + oc) * plane;
            for (size_t k = 0; k < plane; k++)
                sum += dyp[k];
        }
        db[oc] += (float)sum;
    }
}

int ref_conv_backward(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    conv_geom g = geom(s, i);
    const float *dy = ref_out_diff(s, i);
    conv_bwd_weights(s, &g, ref_in(s, i, 0), dy, ref_dw(s, i), nd->a.bias);
    float *dx = ref_dx(s, i, 0);
    if (dx)
        conv_bwd_data(s, &g, dy, ref_params(s, i), dx);
    return 0;
}
