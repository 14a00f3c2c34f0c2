/* --precision bf16 in the oneDNN backend (autocast: BF16 sources, weights and
 * diff_dst, FP32 accumulation). Per op, onednn in BF16 against the FP32 ref
 * backend run on BF16-rounded inputs and weights; whole models a few steps in
 * BF16 against FP32 (on BF16 activation storage, and its memory against FP32
 * storage); BF16 refused where the CPU (or SCALEOUT_MAX_ISA) lacks it.
 * Needs AVX512_BF16: every BF16 computation skips, with a message, without it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "isa_cap.h"
#include "scaleout/cpu.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/rng.h"
#include "scaleout/zoo.h"

#define BATCH 4
#define CLASSES 16 /* the op's output channels: a multiple of 16 keeps conv on oneDNN's blocked BF16 kernels */

/* Tolerances, from the reduction length K of each product (documented here,
 * used by tol_exact and tol_rounded):
 * - Forward: the operands (BF16-rounded input and weights) are exact in BF16,
 *   and a product of two BF16 values is exact in FP32, so the only difference
 *   from the FP32 reference is the order of K FP32 additions:
 *   |err| <= 2 * K * 2^-24 * sum|a*b|, with sum|a*b| estimated as K*rms(a)*rms(b).
 * - Backward: the diff_dst is rounded to BF16 (relative error <= 2^-9 per
 *   element, unbiased), so the error is a sum of K terms of random sign:
 *   |err| <= c * 2^-9 * sqrt(K) * scale(a) * scale(b), c = 8, plus the
 *   forward's term. scale is the rms for the input and weights; for the
 *   diff_dst it is its largest magnitude, because the diff is not uniform
 *   (the label's class carries most of it). Behind the GAP of these graphs
 *   one sample's diff repeats over the OH*OW positions: its rounding error
 *   too, so the bias gradient (a plain sum of them) gets sqrt(OH*OW) more;
 *   the weight and data gradients multiply the repeats by inputs or weights
 *   of random sign, and keep the sqrt(K) form. */
static double tol_exact(double K, double ra, double rb) { return 2.0 * K * K * ldexp(1.0, -24) * ra * rb + 1e-30; }
static double tol_rounded(double K, double ra, double rb) { return 8.0 * ldexp(1.0, -9) * sqrt(K) * ra * rb + tol_exact(K, ra, rb); }

static void skip_without_bf16(void)
{
    if (so_cpu_has_bf16())
        return;
    const char *cap = so_cpu_isa_cap(), *value = cap ? getenv(cap) : NULL;
    print_message("  skipped: no native AVX-512 BF16 on this CPU (%s%s%s%s%s)\n", so_isa_label(so_cpu_isa()),
                  cap ? ", capped by " : "", cap ? cap : "", cap ? "=" : "", value ? value : "");
    skip();
}

static float bf16_round(float x) { return so_bf16_to_f32_1(so_f32_to_bf16_1(x)); }
static void round_all(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = bf16_round(x[i]);
}
static double rms(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return n ? sqrt(s / (double)n) : 0.0;
}

/* ---- per op: recv (the input, whose diff is read back) -> op [-> GAP] -> loss ---- */

typedef struct {
    const char *name;
    int c, h, w;
    int dense;                   /* else a convolution: */
    int k, stride, pad, bias, relu;
} opcase;

static const opcase opcases[] = {
    {"conv3x3", 16, 8, 8, 0, 3, 1, 1, 1, 0},
    {"conv1x1", 32, 7, 7, 0, 1, 1, 0, 1, 0},
    {"conv3x3_stride2_nobias", 16, 9, 9, 0, 3, 2, 1, 0, 0},
    {"conv3x3_bias_relu", 16, 8, 8, 0, 3, 1, 1, 1, 1},
    /* Fewer than 16 input channels: the backend's own direct kernel, its
     * BF16 instance (vdpbf16ps): tap pairs over channels (even count) or
     * over columns (odd count, an odd kernel width leaving a lone tap). */
    {"dconv5x5_c6", 6, 14, 14, 0, 5, 1, 0, 1, 0},
    {"dconv5x5_c1_pad_relu", 1, 12, 12, 0, 5, 1, 2, 1, 1},
    {"dconv3x3_c3_nobias", 3, 9, 9, 0, 3, 1, 1, 0, 0},
    {"dense", 16, 4, 4, 1, 0, 0, 0, 1, 0},
    {"dense_relu", 32, 3, 3, 1, 0, 0, 0, 1, 1},
};

typedef struct {
    so_model *m;
    int recv, op, logits;        /* node indices */
    float *dx;                   /* the recv node's diff (bound) */
} opmodel;

static so_graph *op_graph(const opcase *tc)
{
    so_graph *g = so_graph_create(1, 1, 1);
    assert_non_null(g);
    int r = so_g_recv(g, "x", (so_shape){tc->c, tc->h, tc->w});
    int y = tc->dense ? so_g_dense(g, r, "op", CLASSES) : so_g_conv(g, r, "op", CLASSES, tc->k, tc->stride, tc->pad, tc->bias);
    if (tc->relu)
        y = so_g_relu(g, y);
    so_g_loss(g, tc->dense ? y : so_g_gap(g, y));
    if (tc->relu)
        assert_int_equal(so_graph_fuse(g), 0);
    assert_int_equal(so_graph_finalize(g), 0);
    return g;
}

static int find_node(const so_graph *g, so_op op)
{
    for (int i = 0; i < so_graph_size(g); i++)
        if (so_graph_node(g, i)->op == op)
            return i;
    fail_msg("no node of op %s", so_op_name(op));
    return -1;
}

static void op_open(const opcase *tc, const char *backend, so_precision p, float *x, opmodel *om)
{
    so_model_opts o = {.backend = backend, .batch = BATCH, .seed = 42, .init = SO_INIT_HE, .precision = p};
    int rc = so_model_create_opts(op_graph(tc), &o, &om->m);
    if (rc)
        print_error("%s on %s: %s\n", tc->name, backend, so_errmsg());
    assert_int_equal(rc, 0);
    om->recv = find_node(om->m->g, SO_OP_RECV);
    om->op = find_node(om->m->g, tc->dense ? SO_OP_DENSE : SO_OP_CONV);
    om->logits = find_node(om->m->g, SO_OP_SOFTMAX_XENT);
    om->logits = so_graph_node(om->m->g, om->logits)->inputs[0];
    om->dx = calloc((size_t)BATCH * tc->c * tc->h * tc->w, sizeof *om->dx);
    assert_non_null(om->dx);
    round_all(om->m->params, om->m->nparams);
    so_model_params_changed(om->m);
    assert_int_equal(so_model_bind_edge(om->m, om->recv, x, om->dx), 0);
}

static void op_step(opmodel *om, int backward)
{
    float x0[BATCH] = {0};
    int32_t y[BATCH] = {3, 0, 15, 7};
    int rc = so_model_forward(om->m, x0, y, BATCH, 1);
    if (!rc && backward)
        rc = so_model_backward(om->m);
    if (rc)
        print_error("%s\n", so_errmsg());
    assert_int_equal(rc, 0);
}

static size_t node_floats(so_model *m, int node)
{
    so_shape s = so_graph_node(m->g, node)->out;
    return (size_t)BATCH * s.c * s.h * s.w;
}

/* Largest |a-b| / tol; reports the worst element when above 1. */
static int within(const char *tc, const char *what, const float *a, const float *b, size_t n, double tol)
{
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / tol;
        if (!(r <= worst)) {
            worst = r;
            at = i;
        }
    }
    if (worst <= 1.0)
        return 1;
    print_error("%s: %s differs at %zu: bf16 %.8g fp32 %.8g (tolerance %.3g, %.1fx over)\n", tc, what, at, a[at], b[at],
                tol, worst);
    return 0;
}

/* Largest |diff_dst| of the op: the loss's (softmax - onehot)/N, divided by
 * the GAP's window for a convolution, from the reference's logits. */
static double diff_dst_max(opmodel *ref, const opcase *tc)
{
    float z[BATCH * CLASSES];
    int32_t y[BATCH] = {3, 0, 15, 7};
    assert_int_equal(so_model_node_output(ref->m, ref->logits, z), 0);
    double s = 0.0;
    for (int n = 0; n < BATCH; n++) {
        double mx = z[n * CLASSES], sum = 0.0;
        for (int k = 1; k < CLASSES; k++)
            mx = fmax(mx, z[n * CLASSES + k]);
        for (int k = 0; k < CLASSES; k++)
            sum += exp(z[n * CLASSES + k] - mx);
        for (int k = 0; k < CLASSES; k++) {
            double d = (exp(z[n * CLASSES + k] - mx) / sum - (k == y[n])) / BATCH;
            s = fmax(s, fabs(d));
        }
    }
    so_shape o = so_graph_node(ref->m->g, ref->op)->out;
    return s / (tc->dense ? 1.0 : (double)o.h * o.w);
}

static int compare_forward(const opcase *tc, opmodel *bf, opmodel *ref, double kf, double rx, double rw)
{
    size_t n = node_floats(ref->m, ref->op);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(so_model_node_output(bf->m, bf->op, a), 0);
    assert_int_equal(so_model_node_output(ref->m, ref->op, b), 0);
    int ok = within(tc->name, "forward output", a, b, n, tol_exact(kf, rx, rw));
    free(a);
    free(b);
    return ok;
}

static void op_case(const opcase *tc)
{
    skip_without_bf16();
    size_t nx = (size_t)BATCH * tc->c * tc->h * tc->w;
    float *x = malloc(nx * sizeof *x);
    assert_non_null(x);
    so_rng r;
    so_rng_seed(&r, 7);
    for (size_t i = 0; i < nx; i++)
        x[i] = bf16_round(so_rng_normal(&r));
    opmodel bf, ref;
    op_open(tc, "onednn", SO_PRECISION_BF16, x, &bf);
    op_open(tc, "ref", SO_PRECISION_FP32, x, &ref);
    op_step(&bf, 1);
    op_step(&ref, 1);
    if (!tc->dense && tc->c % 16) { /* the small-channel kernel ran in BF16, not its FP32 instance */
        so_conv_kernels k;
        assert_int_equal(so_model_conv_kernels(bf.m, bf.op, &k), 0);
        assert_string_equal(k.impl[SO_PROP_FWD], "scaleout:avx512_bf16");
    }

    const so_node *nd = so_graph_node(ref.m->g, ref.op);
    size_t nb = tc->bias ? CLASSES : 0, nw = nd->nparam - nb;
    float *W = ref.m->params + nd->param_off;
    double rx = rms(x, nx), rw = rms(W, nw), rdy = diff_dst_max(&ref, tc);
    double spatial = tc->dense ? 1.0 : (double)nd->out.h * nd->out.w;
    double kf = (double)nw / CLASSES;                             /* fwd: C_in * kh * kw */
    double kd = tc->dense ? CLASSES : (double)CLASSES * tc->k * tc->k; /* bwd data: C_out * kh * kw */
    double kw = BATCH * spatial;                                  /* bwd weights and bias: N * OH * OW */

    int ok = compare_forward(tc, &bf, &ref, kf, rx, rw);
    ok &= within(tc->name, "input diff (backward data)", bf.dx, ref.dx, nx, tol_rounded(kd, rdy, rw));
    ok &= within(tc->name, "weight gradient", bf.m->grads + nd->param_off, ref.m->grads + nd->param_off, nw,
                 tol_rounded(kw, rx, rdy));
    if (nb)
        ok &= within(tc->name, "bias gradient", bf.m->grads + nd->param_off + nw, ref.m->grads + nd->param_off + nw,
                     nb, tol_rounded(kw, 1.0, rdy) * sqrt(spatial));

    /* New parameters (negated: exact in BF16) reach the BF16 weight copy
     * through so_model_params_changed, not a stale one. */
    for (size_t i = 0; i < nd->nparam; i++) {
        bf.m->params[nd->param_off + i] = -bf.m->params[nd->param_off + i];
        ref.m->params[nd->param_off + i] = -ref.m->params[nd->param_off + i];
    }
    so_model_params_changed(bf.m);
    so_model_params_changed(ref.m);
    op_step(&bf, 0);
    op_step(&ref, 0);
    ok &= compare_forward(tc, &bf, &ref, kf, rx, rw);

    so_model_destroy(bf.m);
    so_model_destroy(ref.m);
    free(bf.dx);
    free(ref.dx);
    free(x);
    assert_true(ok);
}

static void test_op(void **state) { op_case(*state); }

/* ---- whole models: the same init and batch, a few SGD steps ---- */

static so_model *zoo_model(const char *name, int c, int hw, int batch, so_precision p)
{
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build(name, c, hw, hw, 10, &g), 0);
    so_model_opts o = {.backend = "onednn", .batch = batch, .seed = 42, .precision = p};
    so_model *m = NULL;
    int rc = so_model_create_opts(g, &o, &m);
    if (rc)
        print_error("%s: %s\n", name, so_errmsg());
    assert_int_equal(rc, 0);
    return m;
}

/* Losses of `steps` SGD steps on one fixed batch (learning rate lr). */
static void train_losses(so_model *m, const float *x, const int32_t *y, int batch, int steps, float lr, float *loss)
{
    for (int s = 0; s < steps; s++) {
        int rc = so_model_forward(m, x, y, batch, 1);
        if (!rc)
            rc = so_model_backward(m);
        if (rc)
            print_error("%s\n", so_errmsg());
        assert_int_equal(rc, 0);
        loss[s] = m->loss;
        for (size_t i = 0; i < m->nparams; i++)
            m->params[i] -= lr * m->grads[i];
        so_model_params_changed(m);
    }
}

/* BF16 tracks FP32 step by step within 2% of the first loss (BF16 rounds
 * each layer's input to 2^-9 relative; over 20 layers and a few steps of a
 * fast-falling loss the logits drift by about a percent), while both
 * descend by more than twice that, so a BF16 run that stopped learning
 * (stale weights) fails. */
static void model_case(const char *name, int c, int hw, int batch, int steps, float lr)
{
    skip_without_bf16();
    so_model *f = zoo_model(name, c, hw, batch, SO_PRECISION_FP32);
    so_model *h = zoo_model(name, c, hw, batch, SO_PRECISION_BF16);
    size_t nx = (size_t)batch * c * hw * hw;
    float *x = malloc(nx * sizeof *x), lf[16], lh[16];
    int32_t *y = malloc((size_t)batch * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    so_rng r;
    so_rng_seed(&r, 11);
    for (size_t i = 0; i < nx; i++)
        x[i] = so_rng_normal(&r);
    for (int i = 0; i < batch; i++)
        y[i] = (int32_t)so_rng_below(&r, 10);
    train_losses(f, x, y, batch, steps, lr, lf);
    train_losses(h, x, y, batch, steps, lr, lh);
    int ok = 1;
    for (int s = 0; s < steps; s++) {
        print_message("  %s step %d: loss fp32 %.5f bf16 %.5f\n", name, s, lf[s], lh[s]);
        if (!(fabsf(lh[s] - lf[s]) <= 0.02f * lf[0]))
            ok = 0;
    }
    if (!(lf[steps - 1] < 0.96f * lf[0] && lh[steps - 1] < 0.96f * lh[0]))
        ok = 0;
    so_model_destroy(f);
    so_model_destroy(h);
    free(x);
    free(y);
    assert_true(ok);
}

static void test_lenet5(void **state)
{
    (void)state;
    model_case("lenet5", 1, 28, 16, 6, 0.2f);
}

static void test_resnet20(void **state)
{
    (void)state;
    model_case("resnet20", 3, 32, 8, 6, 0.05f);
}

/* ---- BF16 activation storage, op by op ---- */

/* recv -> conv 3x3 -> bn+relu -> conv 1x1 -> bn -> add (the bn+relu again:
 * an identity shortcut whose diff is accumulated) + relu -> max pool ->
 * flatten -> dense -> loss: every tensor from the first conv to the pool is
 * stored as BF16 (onednn_half.c), the flatten converts for the dense layer. */
static so_graph *storage_graph(void)
{
    so_graph *g = so_graph_create(1, 1, 1);
    assert_non_null(g);
    int x = so_g_recv(g, "x", (so_shape){16, 8, 8});
    int r1 = so_g_relu(g, so_g_bn(g, so_g_conv(g, x, "c1", 32, 3, 1, 1, 0), "b1"));
    int b2 = so_g_bn(g, so_g_conv(g, r1, "c2", 32, 1, 1, 0, 0), "b2");
    int p = so_g_maxpool(g, so_g_relu(g, so_g_add(g, b2, r1)), 2, 2, 0);
    so_g_loss(g, so_g_dense(g, so_g_flatten(g, p), "fc", CLASSES));
    assert_int_equal(so_graph_fuse(g), 0);
    assert_int_equal(so_graph_finalize(g), 0);
    return g;
}

typedef struct {
    so_model *m;
    float *dx;
} storage_run;

static void storage_open(so_precision p, const float *x, size_t nx, storage_run *r)
{
    so_model_opts o = {.backend = "onednn", .batch = BATCH, .seed = 42, .init = SO_INIT_HE, .precision = p};
    assert_int_equal(so_model_create_opts(storage_graph(), &o, &r->m), 0);
    round_all(r->m->params, r->m->nparams);
    so_model_params_changed(r->m);
    r->dx = calloc(nx, sizeof *r->dx);
    assert_non_null(r->dx);
    assert_int_equal(so_model_bind_edge(r->m, find_node(r->m->g, SO_OP_RECV), (float *)x, r->dx), 0);
    float x0[BATCH] = {0};
    int32_t y[BATCH] = {3, 0, 15, 7};
    assert_int_equal(so_model_forward(r->m, x0, y, BATCH, 1), 0);
    assert_int_equal(so_model_backward(r->m), 0);
}

/* |a - b| / |b| over n values (RMS). */
static double rel_rms(const float *a, const float *b, size_t n)
{
    double e = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0.0 ? sqrt(e / s) : sqrt(e);
}

/* Each stored BF16 value is off by at most 2^-9 relative, the sums inside
 * the ops by FP32 reordering: five layers deep the outputs stay within a few
 * 2^-9 of FP32 (measured 2-4e-3; tolerance 2e-2). The gradients pass batch
 * norm's backward, dx = g/sd (dy - mean(dy) - xhat mean(dy xhat)), whose
 * terms cancel over a batch of 4 x 8 x 8: the rounding of dy and x comes out
 * relatively larger (measured 2-4e-2 with FP32 storage, 3-7e-2 with BF16;
 * tolerance 0.15). A tensor read as the wrong type, or a shortcut's diff
 * dropped instead of added, is off by 0.5 or more. */
static void test_storage_ops(void **state)
{
    (void)state;
    skip_without_bf16();
    size_t nx = (size_t)BATCH * 16 * 8 * 8;
    float *x = malloc(nx * sizeof *x);
    assert_non_null(x);
    so_rng r;
    so_rng_seed(&r, 5);
    for (size_t i = 0; i < nx; i++)
        x[i] = bf16_round(so_rng_normal(&r));
    storage_run h, f;
    storage_open(SO_PRECISION_BF16, x, nx, &h);
    storage_open(SO_PRECISION_FP32, x, nx, &f);
    int ok = 1;
    for (int i = 1; i < so_graph_size(f.m->g); i++) {
        const so_node *nd = so_graph_node(f.m->g, i);
        size_t n = node_floats(f.m, i);
        if (nd->op == SO_OP_SOFTMAX_XENT)
            continue;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(so_model_node_output(h.m, i, a), 0);
        assert_int_equal(so_model_node_output(f.m, i, b), 0);
        double e = rel_rms(a, b, n);
        print_message("  %-10s %-9s output off by %.2e (RMS, relative)\n", nd->name, so_op_name(nd->op), e);
        ok &= e <= 2e-2;
        if (nd->nparam) {
            double eg = rel_rms(h.m->grads + nd->param_off, f.m->grads + nd->param_off, nd->nparam);
            print_message("  %-10s %-9s gradients off by %.2e\n", nd->name, "", eg);
            ok &= eg <= 0.15;
        }
        free(a);
        free(b);
    }
    double ed = rel_rms(h.dx, f.dx, nx);
    print_message("  input diff off by %.2e\n", ed);
    ok &= ed <= 0.15;
    so_model_destroy(h.m);
    so_model_destroy(f.m);
    free(h.dx);
    free(f.dx);
    free(x);
    assert_true(ok);
}

/* Under BF16 the tensors between convolutions, batch norm, ReLU, adds and
 * pooling are stored as BF16 (onednn_half.c): ResNet-20's activation
 * memory, almost all such tensors, is well under the FP32-storage run's
 * (SCALEOUT_BF16_ACTIVATIONS=f32), whose BF16 compute is the same. */
static void test_storage(void **state)
{
    (void)state;
    skip_without_bf16();
    setenv("SCALEOUT_BF16_ACTIVATIONS", "f32", 1);
    so_model *wide = zoo_model("resnet20", 3, 32, 16, SO_PRECISION_BF16);
    unsetenv("SCALEOUT_BF16_ACTIVATIONS");
    so_model *half = zoo_model("resnet20", 3, 32, 16, SO_PRECISION_BF16);
    size_t w = so_model_activation_bytes(wide), h = so_model_activation_bytes(half);
    print_message("  resnet20 b16 activations: %zu bytes stored FP32, %zu stored BF16\n", w, h);
    assert_true(h > 0 && (double)h < 0.6 * (double)w);
    so_model_destroy(wide);
    so_model_destroy(half);
}

/* Without native BF16 (or under SCALEOUT_MAX_ISA=avx2: the _avx2 run of this
 * test) so_model_create_opts refuses BF16 with SO_EINVAL; with it, accepts. */
static void test_refused_without_bf16(void **state)
{
    (void)state;
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build("mlp", 1, 28, 28, 10, &g), 0);
    so_model_opts o = {.backend = "onednn", .batch = 2, .seed = 1, .precision = SO_PRECISION_BF16};
    so_model *m = NULL;
    int rc = so_model_create_opts(g, &o, &m);
    if (so_cpu_has_bf16()) {
        assert_int_equal(rc, 0);
        so_model_destroy(m);
    } else {
        print_message("  %s: %s\n", so_isa_label(so_cpu_isa()), so_errmsg());
        assert_int_equal(rc, SO_EINVAL);
        assert_null(m);
    }
}

int main(void)
{
    if (isa_cap_redundant())
        return 77;
    struct CMUnitTest tests[16];
    int nt = 0;
    for (size_t i = 0; i < sizeof opcases / sizeof opcases[0]; i++)
        tests[nt++] = (struct CMUnitTest){opcases[i].name, test_op, NULL, NULL, (void *)&opcases[i]};
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_lenet5);
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_resnet20);
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_storage_ops);
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_storage);
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_refused_without_bf16);
    return _cmocka_run_group_tests("onednn_bf16", tests, (size_t)nt, NULL, NULL);
}
