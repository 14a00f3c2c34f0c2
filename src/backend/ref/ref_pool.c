/* Reference pooling: max (padding never wins; ties go to the first maximum in
 * window order, as PyTorch), average with count_include_pad=True (PyTorch's
 * default: the divisor is always KH*KW) and global average. */
#include <float.h>
#include <math.h>

#include "ref_internal.h"

/* Window geometry of a pool node. */
typedef struct {
    int h, w, oh, ow, kh, kw, sh, sw, ph, pw;
} pool_geom;

static pool_geom geom(const ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    so_shape in = ref_in_shape(s, i, 0);
    const so_attrs *a = &nd->a;
    return (pool_geom){in.h, in.w, nd->out.h, nd->out.w, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw};
}

/* Clips the window of output (oh,ow) to the input: rows [*h0,*h1), cols [*w0,*w1). */
static void window(const pool_geom *g, int oh, int ow, int *h0, int *h1, int *w0, int *w1)
{
    *h0 = oh * g->sh - g->ph;
    *w0 = ow * g->sw - g->pw;
    *h1 = *h0 + g->kh < g->h ? *h0 + g->kh : g->h;
    *w1 = *w0 + g->kw < g->w ? *w0 + g->kw : g->w;
    *h0 = *h0 > 0 ? *h0 : 0;
    *w0 = *w0 > 0 ? *w0 : 0;
}

/* y (OH,OW) = window max of x (H,W); arg records where (ih*W+iw). A NaN
 * wins, as in PyTorch, so NaNs propagate instead of hiding. */
static void maxpool_plane(const pool_geom *g, const float *x, float *y, int32_t *arg)
{
    for (int oh = 0; oh < g->oh; oh++)
        for (int ow = 0; ow < g->ow; ow++) {
            int h0, h1, w0, w1, best = -1;
            window(g, oh, ow, &h0, &h1, &w0, &w1);
            float m = -FLT_MAX;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++)
                    if (best < 0 || x[ih * g->w + iw] > m || isnan(x[ih * g->w + iw])) {
                        m = x[ih * g->w + iw];
                        best = ih * g->w + iw;
                    }
            y[oh * g->ow + ow] = m;
            arg[oh * g->ow + ow] = best;
        }
}

/* y is (N,C,OH,OW), x is (N,C,H,W); planes are independent. */
int ref_maxpool_forward(ref_state *s, int i, int training)
{
    (void)training;
    pool_geom g = geom(s, i);
    long nplanes = (long)s->batch * ref_node(s, i)->out.c;
    const float *x = ref_in(s, i, 0);
#pragma omp parallel for schedule(static) if ((double)nplanes * g.h * g.w > REF_PAR_WORK)
    for (long p = 0; p < nplanes; p++)
        maxpool_plane(&g, x + (size_t)p * g.h * g.w, s->act[i] + (size_t)p * g.oh * g.ow,
                      s->argmax[i] + (size_t)p * g.oh * g.ow);
    return 0;
}

int ref_maxpool_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    pool_geom g = geom(s, i);
    long nplanes = (long)s->batch * ref_node(s, i)->out.c;
    size_t plane = (size_t)g.oh * g.ow;
    const float *dy = s->diff[i];
    const int32_t *arg = s->argmax[i];
#pragma omp parallel for schedule(static) if ((double)nplanes * g.h * g.w > REF_PAR_WORK)
    for (long p = 0; p < nplanes; p++)
        for (size_t k = 0; k < plane; k++)
            dx[(size_t)p * g.h * g.w + arg[(size_t)p * plane + k]] += dy[(size_t)p * plane + k];
    return 0;
}

/* y (OH,OW) = window sums of x (H,W) / (KH*KW): padding counts as zeros. */
static void avgpool_plane(const pool_geom *g, const float *x, float *y)
{
    float inv = 1.0f / (float)(g->kh * g->kw);
    for (int oh = 0; oh < g->oh; oh++)
        for (int ow = 0; ow < g->ow; ow++) {
            int h0, h1, w0, w1;
            window(g, oh, ow, &h0, &h1, &w0, &w1);
            float sum = 0.0f;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++)
                    sum += x[ih * g->w + iw];
            y[oh * g->ow + ow] = sum * inv;
        }
}

/* dx (H,W) += dy (OH,OW) / (KH*KW) spread over each window. */
static void avgpool_plane_bwd(const pool_geom *g, const float *dy, float *dx)
{
    float inv = 1.0f / (float)(g->kh * g->kw);
    for (int oh = 0; oh < g->oh; oh++)
        for (int ow = 0; ow < g->ow; ow++) {
            int h0, h1, w0, w1;
            window(g, oh, ow, &h0, &h1, &w0, &w1);
            float d = dy[oh * g->ow + ow] * inv;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++)
                    dx[ih * g->w + iw] += d;
        }
}

int ref_avgpool_forward(ref_state *s, int i, int training)
{
    (void)training;
    pool_geom g = geom(s, i);
    long nplanes = (long)s->batch * ref_node(s, i)->out.c;
    const float *x = ref_in(s, i, 0);
#pragma omp parallel for schedule(static) if ((double)nplanes * g.h * g.w > REF_PAR_WORK)
    for (long p = 0; p < nplanes; p++)
        avgpool_plane(&g, x + (size_t)p * g.h * g.w, s->act[i] + (size_t)p * g.oh * g.ow);
    return 0;
}

int ref_avgpool_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    pool_geom g = geom(s, i);
    long nplanes = (long)s->batch * ref_node(s, i)->out.c;
#pragma omp parallel for schedule(static) if ((double)nplanes * g.h * g.w > REF_PAR_WORK)
    for (long p = 0; p < nplanes; p++)
        avgpool_plane_bwd(&g, s->diff[i] + (size_t)p * g.oh * g.ow, dx + (size_t)p * g.h * g.w);
    return 0;
}

/* y is (N,C,1,1) = mean of each (H,W) plane of x. */
int ref_gap_forward(ref_state *s, int i, int training)
{
    (void)training;
    so_shape in = ref_in_shape(s, i, 0);
    size_t plane = (size_t)in.h * in.w, nplanes = (size_t)s->batch * in.c;
    const float *x = ref_in(s, i, 0);
    for (size_t p = 0; p < nplanes; p++) {
        float sum = 0.0f;
        for (size_t k = 0; k < plane; k++)
            sum += x[p * plane + k];
        s->act[i][p] = sum / (float)plane;
    }
    return 0;
}

int ref_gap_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    so_shape in = ref_in_shape(s, i, 0);
    size_t plane = (size_t)in.h * in.w, nplanes = (size_t)s->batch * in.c;
    for (size_t p = 0; p < nplanes; p++) {
        float d = s->diff[i][p] / (float)plane;
        for (size_t k = 0; k < plane; k++)
            dx[p * plane + k] += d;
    }
    return 0;
}
