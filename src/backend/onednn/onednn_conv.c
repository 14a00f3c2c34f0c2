/* Convolution (PyTorch Conv2d: OIHW weights, groups, symmetric padding,
 * optional bias, optional fused ReLU as an eltwise post-op). oneDNN chooses
 * the activation and weight layouts; the flat OIHW weights are reordered into
 * the primitive's layout once per parameter change, and weight gradients are
 * reordered back into the flat OIHW grads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"

typedef struct {
    od_prim fwd, bwd_data, bwd_w, relu_bwd;
    od_wcache w_fwd, w_bwd;      /* w_bwd unused when bwd_data reads w_fwd's layout */
    int w_bwd_shared;
    dnnl_memory_t bias;          /* into m->params */
    od_gradw gw;
    float *db;                   /* diff bias (out) */
    dnnl_memory_t db_mem;
    /* scaleout's AVX2 Winograd per propagation (onednn_wino.c), run instead
     * of fwd / bwd_data / bwd_w where wino[p].m != 0; fwd is then only the
     * other primitives' hint. */
    od_wino wino[SO_NPROPS];
    od_tobf16 src_h, ddst_h;     /* --precision bf16: the source and diff_dst converted */
} od_conv;

/* scaleout's AVX2 Winograd is FP32 only: BF16 runs oneDNN's kernels. */
static int own_wino(od_state *s, int node, int prop)
{
    return od_bf16(s) ? 0 : od_wino_wanted(s, node, prop);
}

typedef struct {
    dnnl_memory_desc_t w_any, w_user, b, d_any;
    dnnl_memory_desc_t w_in;     /* the weights fwd and bwd_data read: w_any, BF16 under --precision bf16 */
    dnnl_dims_t strides, pad;
    size_t wcount;
} conv_geom;

/* Channel counts for which oneDNN 2.6 has no blocked jit kernel (see
 * conv_geometry): plain NCHW and im2col+gemm, or the backend's direct kernel. */
int od_conv_small(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    so_shape is = od_node(s, nd->inputs[0])->out;
    return nd->a.out % 16 || (is.c % 16 && so_graph_needs_diff(s->g, node, 0));
}

static void conv_geometry(od_state *s, int node, conv_geom *cg)
{
    const so_node *nd = od_node(s, node);
    const so_attrs *a = &nd->a;
    so_shape is = od_node(s, nd->inputs[0])->out;
    int64_t g = a->groups;
    if (g > 1) {
        dnnl_dims_t wd = {g, a->out / g, is.c / g, a->kh, a->kw};
        dnnl_memory_desc_init_by_tag(&cg->w_any, 5, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&cg->w_user, 5, wd, dnnl_f32, dnnl_goihw);
    } else {
        od_md_4d(&cg->w_any, a->out, is.c, a->kh, a->kw, dnnl_format_tag_any);
        od_md_4d(&cg->w_user, a->out, is.c, a->kh, a->kw, dnnl_oihw);
    }
    cg->w_in = od_md_as(&cg->w_any, od_bf16(s) ? dnnl_bf16 : dnnl_f32);
    od_md_1d(&cg->b, a->out);
    /* Channel counts that are not a multiple of 16 (LeNet's 6) would be padded
     * to 16 in the blocked layout, and oneDNN 2.6 has no jit convolution that
     * reads such a padded blocked source: the next layer fell back to its
     * reference kernel (2.5 s per step). Plain nchw keeps both on jit/gemm
     * (nhwc does not: a nchw -> nhwc convolution is ref-only too). The same
     * holds for the data gradient of a convolution reading such a source. */
    int small = od_conv_small(s, node);
    int wino = own_wino(s, node, SO_PROP_FWD) || own_wino(s, node, SO_PROP_BWD_DATA);
    /* scaleout's Winograd writes (and reads diffs in) nChw8c */
    od_md_4d(&cg->d_any, s->m->batch, a->out, nd->out.h, nd->out.w,
             wino ? dnnl_nChw8c : small ? dnnl_nchw : dnnl_format_tag_any);
    if (s->t[node].half) /* BF16 activation storage (onednn_half.c) */
        cg->d_any = od_md_as(&cg->d_any, dnnl_bf16);
    cg->strides[0] = a->sh;
    cg->strides[1] = a->sw;
    cg->pad[0] = a->ph;
    cg->pad[1] = a->pw;
    cg->wcount = (size_t)a->out * (size_t)(is.c / g) * (size_t)(a->kh * a->kw);
}

/* Winograd F(4x4, 3x3) or direct, per propagation. Measured on an AVX-512
 * core with oneDNN 2.6 (docs/PERFORMANCE.md, "Convolution algorithm"):
 * Winograd is 1.2-2.5x faster than direct from 32 channels in and out in all
 * three propagations, but about 3x slower forward and backward-data at 16
 * channels, where its weight-gradient kernel still wins. Shape-only, so all
 * ranks and resumed runs choose alike. */
typedef enum { PROP_FWD, PROP_BWD_DATA, PROP_BWD_WEIGHTS } conv_prop;

static int winograd_wanted(od_state *s, int node, conv_prop prop)
{
    const so_node *nd = od_node(s, node);
    const so_attrs *a = &nd->a;
    int ch = od_node(s, nd->inputs[0])->out.c;
    if (a->out < ch)
        ch = a->out;
    /* oneDNN 2.6 has no BF16 Winograd: BF16 convolutions run direct. */
    if (s->m->conv_algo == SO_CONV_DIRECT || !od_winograd_available() || a->kh != 3 || a->kw != 3 || a->sh != 1 || a->sw != 1 ||
        a->groups != 1 || od_bf16(s))
        return 0;
    if (s->m->conv_algo == SO_CONV_WINOGRAD)
        return 1;
    return ch >= (prop == PROP_BWD_WEIGHTS ? 16 : 32);
}

static dnnl_status_t conv_desc(od_state *s, int node, const conv_geom *cg, conv_prop prop,
                               dnnl_alg_kind_t alg, dnnl_convolution_desc_t *cd)
{
    const so_node *nd = od_node(s, node);
    /* BF16: source, weights and diff_dst in BF16 (same layouts), dst and
     * diff_src in the data type the tensors are stored in (FP32 or BF16,
     * onednn_half.c), diff_weights and bias in FP32 (FP32 accumulation). */
    dnnl_data_type_t lo = od_bf16(s) ? dnnl_bf16 : dnnl_f32;
    const dnnl_memory_desc_t *x = &od_in(s, node, 0)->md, *b = nd->a.bias ? &cg->b : NULL;
    dnnl_memory_desc_t src = od_md_as(x, lo), ddst = prop == PROP_FWD ? cg->d_any : od_md_as(&s->t[node].md, lo);
    switch (prop) {
    case PROP_FWD:
        return dnnl_convolution_forward_desc_init(cd, dnnl_forward_training, alg, &src, &cg->w_in, b,
                                                  &cg->d_any, cg->strides, cg->pad, cg->pad);
    case PROP_BWD_WEIGHTS:
        return dnnl_convolution_backward_weights_desc_init(cd, alg, &src, &cg->w_any, b, &ddst,
                                                           cg->strides, cg->pad, cg->pad);
    default:
        return dnnl_convolution_backward_data_desc_init(cd, alg, x, &cg->w_in, &ddst, cg->strides,
                                                        cg->pad, cg->pad);
    }
}

/* The primitive for one propagation: Winograd where wanted and oneDNN has a
 * kernel for the shape (it answers "unimplemented" otherwise), else direct. */
static int conv_prim(od_state *s, int node, const conv_geom *cg, conv_prop prop, const char *what, int relu,
                     const_dnnl_primitive_desc_t hint, od_prim *out)
{
    dnnl_convolution_desc_t cd;
    if (winograd_wanted(s, node, prop) &&
        conv_desc(s, node, cg, prop, dnnl_convolution_winograd, &cd) == dnnl_success &&
        !od_prim_init(s, node, what, &cd, relu, hint, out))
        return 0;
    od_prim_fini(out);
    OD_CHECK(s, node, what, conv_desc(s, node, cg, prop, dnnl_convolution_direct, &cd));
    return od_prim_init(s, node, what, &cd, relu, hint, out);
}

static int create_fwd(od_state *s, int node, od_conv *c, const conv_geom *cg)
{
    const so_node *nd = od_node(s, node);
    int rc = conv_prim(s, node, cg, PROP_FWD, "convolution forward", nd->a.relu, NULL, &c->fwd);
    dnnl_memory_desc_t dst = od_query_md(&c->fwd, dnnl_query_dst_md);
    dnnl_memory_desc_t w = od_query_md(&c->fwd, dnnl_query_weights_md);
    if (!rc)
        rc = od_tensor_alloc(s, node, &dst);
    if (!rc)
        rc = od_wcache_init(s, node, &cg->w_user, nd->param_off, &w, &c->w_fwd);
    if (!rc && nd->a.bias)
        rc = od_mem_wrap(s, node, &cg->b, so_model_params_at(s->m, nd->param_off) + cg->wcount, &c->bias);
    if (!rc && od_bf16(s) && !od_in(s, node, 0)->half)
        rc = od_tobf16_init(s, node, &od_in(s, node, 0)->md, OD_H16_SRC, &c->src_h);
    int m = rc ? 0 : own_wino(s, node, SO_PROP_FWD);
    if (m)
        rc = od_wino_init(s, node, SO_PROP_FWD, m, &c->wino[SO_PROP_FWD]);
    return rc;
}

static int create_bwd(od_state *s, int node, od_conv *c, const conv_geom *cg)
{
    const so_node *nd = od_node(s, node);
    int rc = 0, mw = own_wino(s, node, SO_PROP_BWD_WEIGHTS);
    if (mw) {
        rc = od_wino_init(s, node, SO_PROP_BWD_WEIGHTS, mw, &c->wino[SO_PROP_BWD_WEIGHTS]);
    } else {
        rc = conv_prim(s, node, cg, PROP_BWD_WEIGHTS, "convolution backward weights", 0, c->fwd.pd, &c->bwd_w);
        dnnl_memory_desc_t dw = od_query_md(&c->bwd_w, dnnl_query_diff_weights_md);
        if (!rc)
            rc = od_gradw_init(s, node, &dw, &cg->w_user, nd->param_off, &c->gw);
        if (!rc && nd->a.bias)
            rc = od_mem_alloc(s, node, &cg->b, &c->db, &c->db_mem);
    }
    if (!rc && nd->a.relu)
        rc = od_relu_bwd_init(s, node, &c->relu_bwd);
    if (!rc && od_bf16(s) && !s->t[node].half)
        rc = od_tobf16_init(s, node, &s->t[node].md, OD_H16_DIFF, &c->ddst_h);
    /* The first convolution of a network needs no data gradient: skip it. */
    if (rc || !so_graph_needs_diff(s->g, node, 0))
        return rc;
    int m = own_wino(s, node, SO_PROP_BWD_DATA);
    if (m)
        return od_wino_init(s, node, SO_PROP_BWD_DATA, m, &c->wino[SO_PROP_BWD_DATA]);
    rc = conv_prim(s, node, cg, PROP_BWD_DATA, "convolution backward data", 0, c->fwd.pd, &c->bwd_data);
    if (rc)
        return rc;
    dnnl_memory_desc_t wf = od_query_md(&c->fwd, dnnl_query_weights_md);
    dnnl_memory_desc_t wb = od_query_md(&c->bwd_data, dnnl_query_weights_md);
    c->w_bwd_shared = od_md_equal(&wf, &wb);
    if (!c->w_bwd_shared)
        rc = od_wcache_init(s, node, &cg->w_user, nd->param_off, &wb, &c->w_bwd);
    return rc;
}

static int conv_create(od_state *s, int node)
{
    /* Small channel counts on a plain source: oneDNN only has im2col+gemm
     * there, the backend's own direct kernel is several times faster. Under
     * --precision bf16 it runs its BF16 instance (vdpbf16ps): oneDNN 2.6's
     * BF16 kernels for these layers (LeNet-5's 1->6 and 6->16 5x5, batch 64,
     * one thread) take 2.3-4.7x the direct kernel's FP32 time on a Zen 5
     * core (AVX512_BF16), so the rule is the FP32 one. */
    if (od_conv_small(s, node) && od_dconv_applies(s, node) && !own_wino(s, node, SO_PROP_FWD)) {
        s->t[node].op = od_bf16(s) && so_cpu_has_bf16() ? &od_op_dconv_bf16 : od_dconv_op();
        return s->t[node].op->create(s, node);
    }
    od_conv *c = calloc(1, sizeof *c);
    if (!c)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = c;
    conv_geom cg;
    conv_geometry(s, node, &cg);
    int rc = create_fwd(s, node, c, &cg);
    if (!rc)
        rc = create_bwd(s, node, c, &cg);
    return rc;
}

/* dst = conv(src, W) + b, ReLU'd when fused: (N,C,H,W) -> (N,out,OH,OW). */
static int conv_forward(od_state *s, int node, int training)
{
    (void)training;
    od_conv *c = s->t[node].priv;
    if (c->wino[SO_PROP_FWD].m)
        return od_wino_exec(s, node, &c->wino[SO_PROP_FWD], od_in(s, node, 0)->buf, s->t[node].buf);
    dnnl_memory_t w, x = od_in(s, node, 0)->mem;
    int rc = od_bias_rebind(s, node, c->bias);
    if (!rc)
        rc = od_wcache_get(s, node, &c->w_fwd, &w);
    if (!rc && c->src_h.mem)
        rc = od_tobf16_exec(s, node, &c->src_h, od_in(s, node, 0)->mem, &x);
    if (rc)
        return rc;
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, x},
                            {DNNL_ARG_WEIGHTS, w},
                            {DNNL_ARG_DST, s->t[node].mem},
                            {DNNL_ARG_BIAS, c->bias}};
    return od_exec(s, node, "convolution forward", &c->fwd, c->bias ? 4 : 3, a);
}

/* dy: the node's diff, or its BF16 copy (conv_backward made it). */
static int conv_bwd_weights(od_state *s, int node, od_conv *c, dnnl_memory_t dy)
{
    const so_node *nd = od_node(s, node);
    if (c->wino[SO_PROP_BWD_WEIGHTS].m)
        return od_wino_wgrad(s, node, &c->wino[SO_PROP_BWD_WEIGHTS]);
    dnnl_memory_t dw, x = od_in(s, node, 0)->mem;
    int rc = od_gradw_target(s, node, &c->gw, &dw);
    if (!rc && c->src_h.mem)
        rc = od_tobf16_exec(s, node, &c->src_h, od_in(s, node, 0)->mem, &x);
    if (rc)
        return rc;
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, x},
                            {DNNL_ARG_DIFF_DST, dy},
                            {DNNL_ARG_DIFF_WEIGHTS, dw},
                            {DNNL_ARG_DIFF_BIAS, c->db_mem}};
    rc = od_exec(s, node, "convolution backward weights", &c->bwd_w, c->db_mem ? 4 : 3, a);
    if (!rc)
        rc = od_gradw_store(s, node, &c->gw);
    if (!rc && c->db) {
        size_t wcount = nd->nparam - (size_t)nd->a.out;
        od_vec_store(so_model_grads_at(s->m, nd->param_off) + wcount, c->db, (size_t)nd->a.out,
                     s->m->accumulate_grads);
    }
    return rc;
}

static int conv_bwd_data(od_state *s, int node, od_conv *c, dnnl_memory_t dy)
{
    if (c->wino[SO_PROP_BWD_DATA].m) {
        float *dx = od_diff_staged(s, node, 0) ? s->scratch : od_in(s, node, 0)->dbuf;
        int rc = od_wino_exec(s, node, &c->wino[SO_PROP_BWD_DATA], s->t[node].dbuf, dx);
        if (!rc)
            od_diff_finish(s, node, 0);
        return rc;
    }
    dnnl_memory_t w;
    int rc = od_wcache_get(s, node, c->w_bwd_shared ? &c->w_fwd : &c->w_bwd, &w);
    if (rc)
        return rc;
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, dy},
                            {DNNL_ARG_WEIGHTS, w},
                            {DNNL_ARG_DIFF_SRC, od_diff_target(s, node, 0)}};
    rc = od_exec(s, node, "convolution backward data", &c->bwd_data, 3, a);
    if (!rc)
        od_diff_finish(s, node, 0);
    return rc;
}

static int conv_backward(od_state *s, int node)
{
    od_conv *c = s->t[node].priv;
    dnnl_memory_t dy = s->t[node].dmem;
    int rc = 0;
    if (c->relu_bwd.p)
        rc = od_relu_bwd_exec(s, node, &c->relu_bwd);
    if (!rc && c->ddst_h.mem) /* after the ReLU's mask: both propagations read it */
        rc = od_tobf16_exec(s, node, &c->ddst_h, s->t[node].dmem, &dy);
    if (!rc && (c->bwd_data.p || c->wino[SO_PROP_BWD_DATA].m))
        rc = conv_bwd_data(s, node, c, dy);
    if (!rc)
        rc = conv_bwd_weights(s, node, c, dy);
    return rc;
}

static void conv_destroy(void *priv)
{
    od_conv *c = priv;
    od_prim_fini(&c->fwd);
    od_prim_fini(&c->bwd_data);
    od_prim_fini(&c->bwd_w);
    od_prim_fini(&c->relu_bwd);
    od_wcache_fini(&c->w_fwd);
    od_wcache_fini(&c->w_bwd);
    od_mem_free(&c->bias, NULL);
    od_gradw_fini(&c->gw);
    od_mem_free(&c->db_mem, &c->db);
    od_tobf16_fini(&c->src_h);
    od_tobf16_fini(&c->ddst_h);
    free(c);
}

static void conv_invalidate(void *priv)
{
    od_conv *c = priv;
    od_wcache_invalidate(&c->w_fwd);
    od_wcache_invalidate(&c->w_bwd);
}

const od_op od_op_conv = {conv_create, conv_forward, conv_backward, conv_destroy, conv_invalidate};

/* oneDNN's implementation name ("jit:avx512_core", "x64:gemm:jit",
 * "jit_wino_4x3:avx512_core", "ref:any") and the family it belongs to. */
static void prim_kernel(const od_prim *p, char *algo, size_t alen, char *impl, size_t ilen)
{
    const char *name = NULL;
    if (!p->pd || dnnl_primitive_desc_query(p->pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success || !name) {
        snprintf(algo, alen, "none");
        snprintf(impl, ilen, "none");
        return;
    }
    snprintf(impl, ilen, "%s", name);
    snprintf(algo, alen, "%s", strstr(name, "wino")   ? "winograd"
                               : strstr(name, "gemm")      ? "gemm"
                               : !strncmp(name, "ref", 3)  ? "ref"
                                                           : "direct");
}

int od_conv_kernels(void *state, int node, so_conv_kernels *out)
{
    od_state *s = state;
    int isa = od_dconv_isa(s->t[node].op);
    if (isa >= 0) { /* the backend's own direct kernel, named by the ISA it runs */
        for (int p = 0; p < SO_NPROPS; p++) {
            snprintf(out->algo[p], sizeof out->algo[p], "direct");
            snprintf(out->impl[p], sizeof out->impl[p], "scaleout:%s%s", so_isa_name((so_isa)isa),
                     s->t[node].op == &od_op_dconv_bf16 ? "_bf16" : "");
        }
        if (!so_graph_needs_diff(s->g, node, 0)) {
            snprintf(out->algo[SO_PROP_BWD_DATA], sizeof out->algo[0], "none");
            snprintf(out->impl[SO_PROP_BWD_DATA], sizeof out->impl[0], "none");
        }
        return 0;
    }
    od_conv *c = s->t[node].priv;
    const od_prim *prims[SO_NPROPS] = {&c->fwd, &c->bwd_data, &c->bwd_w};
    for (int p = 0; p < SO_NPROPS; p++)
        prim_kernel(prims[p], out->algo[p], sizeof out->algo[p], out->impl[p], sizeof out->impl[p]);
    for (int p = 0; p < SO_NPROPS; p++)
        if (c->wino[p].m) { /* scaleout's own Winograd (AVX2 only: od_wino_cpu) */
            snprintf(out->algo[p], sizeof out->algo[p], "winograd");
            snprintf(out->impl[p], sizeof out->impl[p], "scaleout:avx2");
        }
    return 0;
}
