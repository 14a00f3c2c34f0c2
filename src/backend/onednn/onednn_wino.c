/* scaleout's Winograd convolution where oneDNN 2.6 has none (AVX2 CPUs: Zen
 * 2/3, Haswell, Broadwell): the per-propagation rule choosing it, the plans
 * (tile size, tile blocking, per-thread buffers) and the weight transform
 * into the shared weight buffer. The kernel is onednn_wino_avx2.c. */
#include <omp.h>
#include <stdlib.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

/* Only where oneDNN has no Winograd of its own (AVX-512 keeps oneDNN's
 * jit_wino_4x3) and the CPU has AVX2+FMA. */
int od_wino_cpu(void)
{
    return so_cpu_isa() >= SO_ISA_AVX2 && !od_winograd_available();
}

/* The layout the kernel reads and writes: 8 channels = one ymm. */
static void md_8c(const od_state *s, int c, int h, int w, dnnl_memory_desc_t *md)
{
    od_md_4d(md, s->m->batch, c, h, w, dnnl_nChw8c);
}

/* Shape conditions, whatever --conv-algo says: 3x3, stride 1, no groups,
 * padding 0 or 1 (both sides alike), channels in blocks of 8 and an nChw8c
 * source (the AVX2 layout oneDNN picks for 16+ channels). */
static int wino_shape(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    const so_attrs *a = &nd->a;
    so_shape is = od_node(s, nd->inputs[0])->out;
    if (a->kh != 3 || a->kw != 3 || a->sh != 1 || a->sw != 1 || a->groups != 1 || a->ph != a->pw || a->ph > 1)
        return 0;
    if (is.c % 8 || a->out % 8)
        return 0;
    dnnl_memory_desc_t md;
    md_8c(s, is.c, is.h, is.w, &md);
    return od_md_equal(&od_in(s, node, 0)->md, &md);
}

/* F(4x4,3x3) (4x fewer multiplies than direct) unless the output is 2 more
 * than a multiple of 4 on a side, where F(2x2,3x3) (2.25x) tiles it exactly
 * and F(4x4)'s partial tiles waste 30% (14x14: 16x16 computed). Measured on
 * the capped Zen 4 core (docs/PERFORMANCE.md, "Convolution algorithm per
 * layer"): F(4x4) won on ResNet-20's 32/16/8 and ResNet-50's 56/28/7 sides,
 * F(2x2) on ResNet-50's 14x14 (256 channels: forward and backward ~10-20%).
 * The shape alone decides, so all ranks choose alike. */
static int tile_size(int h, int w)
{
    return h % 4 == 2 || w % 4 == 2 ? 2 : 4;
}

/* `auto` uses it from these channel counts (the smaller of in and out),
 * per propagation: against oneDNN's AVX2 direct kernels it won forward,
 * backward data and backward weights on every ResNet-20/50 3x3 stride-1
 * shape (16 to 512 channels; least at 16 channels, 32x32, backward data:
 * 7%). Smaller counts were not measured, so `auto` leaves them direct. */
static const int min_channels[SO_NPROPS] = {16, 16, 16}; /* forward, backward data, weights */

int od_wino_wanted(od_state *s, int node, int prop)
{
    const so_node *nd = od_node(s, node);
    so_shape is = od_node(s, nd->inputs[0])->out;
    if (s->m->conv_algo == SO_CONV_DIRECT || !od_wino_cpu() || !wino_shape(s, node))
        return 0;
    if (prop == SO_PROP_BWD_DATA && !so_graph_needs_diff(s->g, node, 0))
        return 0;
    int ch = is.c < nd->a.out ? is.c : nd->a.out;
    if (s->m->conv_algo != SO_CONV_WINOGRAD && ch < min_channels[prop])
        return 0;
    return prop == SO_PROP_BWD_DATA ? tile_size(is.h, is.w) : tile_size(nd->out.h, nd->out.w);
}

/* Tiles per block: the block's transformed input and GEMM output (a^2 x
 * tiles x (ic + oc) floats) about fill half an L2 (512 KB), at least 48
 * tiles so each 16-column slice of the weights is reused across 8 register
 * blocks, at most one thread's share of the batch. */
static int tile_block(const od_wino *w)
{
    int a = w->m + 2;
    size_t per = (size_t)a * a * (size_t)(w->ic + w->oc) * sizeof(float);
    int t = (int)((512u * 1024u / per + 5) / 6 * 6);
    if (t < 48)
        t = 48;
    int share = (w->ntiles + w->nthr - 1) / w->nthr;
    share = (share + 5) / 6 * 6;
    return t < share ? t : share;
}

int od_wino_init(od_state *s, int node, int prop, int m, od_wino *w)
{
    const so_node *nd = od_node(s, node);
    so_shape is = od_node(s, nd->inputs[0])->out;
    int bd = prop == SO_PROP_BWD_DATA;
    *w = (od_wino){.m = m, .ic = bd ? nd->a.out : is.c, .oc = bd ? is.c : nd->a.out,
                   .ih = bd ? nd->out.h : is.h, .iw = bd ? nd->out.w : is.w,
                   .oh = bd ? is.h : nd->out.h, .ow = bd ? is.w : nd->out.w,
                   /* backward data pads dy by k - 1 - p to get back to H x W */
                   .pad = bd ? 2 - nd->a.ph : nd->a.ph, .flip = bd};
    w->th = (w->oh + m - 1) / m;
    w->tw = (w->ow + m - 1) / m;
    w->ntiles = s->m->batch * w->th * w->tw;
    w->nthr = omp_get_max_threads() < 1 ? 1 : omp_get_max_threads();
    w->tblock = tile_block(w);
    int a = m + 2;
    w->v_floats = (size_t)a * a * w->tblock * w->ic;
    w->d_floats = (size_t)a * a * w->tblock * w->oc;
    w->u_floats = (size_t)a * a * w->ic * w->oc;
    size_t floats = w->v_floats + w->d_floats;
    if (prop == SO_PROP_BWD_WEIGHTS) /* each thread's dU and bias sums */
        floats += w->u_floats + (size_t)w->oc;
    else if (w->u_floats * sizeof(float) > s->wtmp_bytes)
        s->wtmp_bytes = w->u_floats * sizeof(float); /* allocated once all nodes are built */
    if (floats > s->wino_floats)
        s->wino_floats = floats;
    if (w->nthr > s->wino_nthr)
        s->wino_nthr = w->nthr;
    return 0;
}

/* Layers run one at a time, so one set of per-thread buffers, sized for the
 * largest plan, serves all (ResNet-50 b16 at 2 threads: ~120 MB, where
 * per-plan buffers took ~500 MB, mostly the 512-channel weight gradients). */
int od_wino_alloc(od_state *s)
{
    if (!s->wino_floats)
        return 0;
    s->wino_tb = calloc((size_t)s->wino_nthr, sizeof *s->wino_tb);
    if (!s->wino_tb)
        return so_err(SO_ENOMEM, "out of memory for the Winograd buffers");
    for (int i = 0; i < s->wino_nthr; i++)
        if (!(s->wino_tb[i] = so_alloc(s->wino_floats * sizeof(float))))
            return so_err(SO_ENOMEM, "out of memory for %zu bytes of Winograd buffers",
                          s->wino_floats * sizeof(float));
    return 0;
}

void od_wino_free(od_state *s)
{
    for (int i = 0; s->wino_tb && i < s->wino_nthr; i++)
        so_free(s->wino_tb[i]);
    free(s->wino_tb);
    s->wino_tb = NULL;
}

/* The weights are transformed into the shared weight buffer (s->wtmp) right
 * before each use, like od_wcache's reorders: per training step that is the
 * one transform per propagation a per-layer copy would cost too, without
 * keeping 4x every 3x3 layer's weights (ResNet-50: ~180 MB per propagation). */
int od_wino_exec(od_state *s, int node, const od_wino *w, const float *src, float *dst)
{
    const so_node *nd = od_node(s, node);
    const float *W = so_model_params_at(s->m, nd->param_off);
    const float *bias = nd->a.bias && !w->flip ? W + (size_t)w->ic * w->oc * 9 : NULL;
    od_wino plan = *w;
    plan.tb = s->wino_tb;
    od_wino_avx2_weights(&plan, W, s->wtmp);
    od_wino_avx2_conv(&plan, s->wtmp, src, bias, nd->a.relu && !w->flip, dst);
    return 0;
}

/* Reads the node's diff after the fused ReLU's mask was applied to it. */
int od_wino_wgrad(od_state *s, int node, const od_wino *w)
{
    const so_node *nd = od_node(s, node);
    float *dW = so_model_grads_at(s->m, nd->param_off);
    float *db = nd->a.bias ? dW + (size_t)w->ic * w->oc * 9 : NULL;
    od_wino plan = *w;
    plan.tb = s->wino_tb;
    od_wino_avx2_wgrad(&plan, od_in(s, node, 0)->buf, s->t[node].dbuf, dW, db, s->m->accumulate_grads);
    return 0;
}
