/* scaleout's AVX2 Winograd convolution (onednn_wino.c) against the ref backend
 * (outputs, loss, every gradient) on 8-64 channels, odd sizes, padding 0/1,
 * batch 1/3, fused ReLU, and the kernel report. Capped to AVX2 it reaches the
 * kernel on an AVX-512 CPU; uncapped it checks oneDNN's own Winograd. */
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
#include "scaleout/threads.h"
#include "scaleout/backend.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/rng.h"
#include "scaleout/zoo.h"

#define CLASSES 5
/* Winograd F(4x4,3x3) rounds differently from a direct sum: the transforms
 * scale terms by up to 8 (A), 5 (B) and 1/24 (G) before they cancel, so
 * fp32 errors grow with the largest term of a tile rather than with the
 * result (Lavin & Gray 2016 report ~1e-5..1e-4 relative to the output's
 * magnitude for F(4x4,3x3) in fp32). Hence an absolute part scaled by the
 * tensor's largest entry, on top of the usual relative part. */
#define RTOL 1e-4f
#define ATOL 2e-4f

typedef struct {
    const char *name;
    int h, w, batch, fuse;
} wcase;

static const wcase cases[] = {
    {"7x5_b1", 7, 5, 1, 1},   {"7x5_b3_unfused", 7, 5, 3, 0}, {"9x9_b3", 9, 9, 3, 1},
    {"9x9_b1_unfused", 9, 9, 1, 0}, {"32x32_b1", 32, 32, 1, 1}, {"32x32_b3", 32, 32, 3, 1},
    /* sides 2 mod 4 run F(2x2,3x3) (onednn_wino.c tile_size), the rest F(4x4) */
    {"14x14_b3", 14, 14, 3, 1}, {"10x7_b1_unfused", 10, 7, 1, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* c0 (3->16, oneDNN's: a plain source) gives the chain its nChw8c input;
 * then 16->8 (ReLU), 8->64 (pad 0, no bias), 64->16 (ReLU), 16->8. */
static so_graph *build(const wcase *wc)
{
    so_graph *g = so_graph_create(3, wc->h, wc->w);
    assert_non_null(g);
    int a = so_g_conv(g, 0, "c0", 16, 3, 1, 1, 1);
    a = so_g_relu(g, so_g_conv(g, a, "c1", 8, 3, 1, 1, 1));
    a = so_g_conv(g, a, "c2", 64, 3, 1, 0, 0);
    a = so_g_relu(g, so_g_conv(g, a, "c3", 16, 3, 1, 1, 1));
    a = so_g_conv(g, a, "c4", 8, 3, 1, 1, 1);
    so_g_loss(g, so_g_dense(g, so_g_gap(g, a), "head", CLASSES));
    if (wc->fuse)
        assert_int_equal(so_graph_fuse(g), 0);
    assert_int_equal(so_graph_finalize(g), 0);
    return g;
}

static so_model *open_model(so_graph *g, const char *backend, int batch, so_conv_algo algo)
{
    so_model *m = NULL;
    so_model_opts o = {.backend = backend, .batch = batch, .seed = 42, .conv_algo = algo};
    int rc = so_model_create_opts(g, &o, &m);
    if (rc)
        print_error("%s: %s\n", backend, so_errmsg());
    assert_int_equal(rc, 0);
    return m;
}

/* The kernels scaleout's Winograd replaces run it where the ISA is AVX2 and
 * oneDNN has none (the capped run); uncapped on AVX-512, oneDNN's. */
static int expect_scaleout_wino(void) { return so_cpu_isa() == SO_ISA_AVX2; }

static int find_node(const so_model *m, const char *name)
{
    for (int i = 0; i < so_graph_size(m->g); i++)
        if (!strcmp(so_graph_node(m->g, i)->name, name))
            return i;
    fail_msg("no node %s", name);
    return -1;
}

static void check_kernels(so_model *m, const char *node, const char *algo, int scaleout)
{
    so_conv_kernels k;
    assert_int_equal(so_model_conv_kernels(m, find_node(m, node), &k), 0);
    for (int p = 0; p < SO_NPROPS; p++) {
        if (strcmp(k.algo[p], algo))
            fail_msg("%s propagation %d: %s (%s), expected %s", node, p, k.algo[p], k.impl[p], algo);
        if (scaleout)
            assert_string_equal(k.impl[p], "scaleout:avx2");
        else
            assert_null(strstr(k.impl[p], "scaleout"));
    }
}

/* |a - b| <= RTOL |b| + ATOL max|b| over n floats; reports the first miss. */
static int close_enough(const char *what, const char *tc, const float *a, const float *b, size_t n)
{
    float scale = 1e-3f;
    for (size_t i = 0; i < n; i++)
        scale = fmaxf(scale, fabsf(b[i]));
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= RTOL * fabsf(b[i]) + ATOL * scale)) {
            print_error("%s: %s differs at %zu: onednn %.8g ref %.8g (scale %.3g)\n", tc, what, i, a[i], b[i],
                        scale);
            return 0;
        }
    return 1;
}

static int outputs_agree(const wcase *wc, so_model *od, so_model *ref)
{
    int ok = 1;
    for (int i = 1; i < so_graph_size(od->g); i++) {
        const so_node *nd = so_graph_node(od->g, i);
        size_t n = (size_t)nd->out.c * nd->out.h * nd->out.w * wc->batch;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        assert_true(a && b);
        assert_int_equal(so_model_node_output(od, i, a), 0);
        assert_int_equal(so_model_node_output(ref, i, b), 0);
        char what[96];
        snprintf(what, sizeof what, "output of %s", nd->name);
        ok &= close_enough(what, wc->name, a, b, n);
        free(a);
        free(b);
    }
    return ok;
}

/* Per parameter tensor, so each tolerance scales with its own gradient.
 * c0's and c1's weight gradients also check the input diffs of c1..c4
 * (backward data), which they are computed from. */
static int grads_agree(const wcase *wc, so_model *od, so_model *ref)
{
    int ok = 1;
    for (int i = 1; i < so_graph_size(od->g); i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(od->g, i, t);
        for (int k = 0; k < nt; k++) {
            if (t[k].is_buffer)
                continue;
            char what[96];
            snprintf(what, sizeof what, "gradient %s.%s", so_graph_node(od->g, i)->name, t[k].suffix);
            ok &= close_enough(what, wc->name, od->grads + t[k].off, ref->grads + t[k].off, t[k].count);
        }
    }
    float la = od->loss, lb = ref->loss;
    return ok & close_enough("loss", wc->name, &la, &lb, 1);
}

static void make_data(const wcase *wc, float **x, int32_t **y)
{
    size_t len = (size_t)wc->batch * 3 * wc->h * wc->w;
    *x = malloc(len * sizeof **x);
    *y = malloc((size_t)wc->batch * sizeof **y);
    assert_true(*x && *y);
    so_rng r;
    so_rng_seed(&r, 7);
    for (size_t i = 0; i < len; i++)
        (*x)[i] = so_rng_normal(&r);
    for (int i = 0; i < wc->batch; i++)
        (*y)[i] = (int32_t)so_rng_below(&r, CLASSES);
}

static void step(so_model *m, const float *x, const int32_t *y, int n)
{
    int rc = so_model_forward(m, x, y, n, 1);
    if (!rc)
        rc = so_model_backward(m);
    if (rc)
        print_error("%s\n", so_errmsg());
    assert_int_equal(rc, 0);
}

static void skip_without_winograd(void)
{
    if (!so_backend_has_winograd()) {
        print_message("  skipped: no Winograd convolution on %s (scaleout's needs AVX2+FMA)\n",
                      so_isa_label(so_cpu_isa()));
        skip();
    }
}

/* A training step (forward, all gradients), then new weights: the eval
 * forward must use them (the weight transform is redone per call). */
static void test_agree(void **state)
{
    const wcase *wc = *state;
    skip_without_winograd();
    so_model *ref = open_model(build(wc), "ref", wc->batch, SO_CONV_AUTO);
    so_model *od = open_model(build(wc), "onednn", wc->batch, SO_CONV_WINOGRAD);
    static const char *wino[] = {"c1", "c2", "c3", "c4"};
    for (int i = 0; i < 4; i++)
        if (expect_scaleout_wino())
            check_kernels(od, wino[i], "winograd", 1);
    float *x;
    int32_t *y;
    make_data(wc, &x, &y);
    step(ref, x, y, wc->batch);
    step(od, x, y, wc->batch);
    int ok = outputs_agree(wc, od, ref) && grads_agree(wc, od, ref);
    for (size_t i = 0; i < od->nparams; i++) {
        od->params[i] -= 0.1f * od->grads[i];
        ref->params[i] = od->params[i];
    }
    so_model_params_changed(od);
    so_model_params_changed(ref);
    assert_int_equal(so_model_forward(ref, x, y, wc->batch, 0), 0);
    assert_int_equal(so_model_forward(od, x, y, wc->batch, 0), 0);
    ok = ok && outputs_agree(wc, od, ref);
    so_model_destroy(ref);
    so_model_destroy(od);
    free(x);
    free(y);
    assert_true(ok);
}

/* ResNet-20's 3x3 stride-1 layers under the AVX2 cap: `auto` runs
 * scaleout's Winograd in all three propagations; `direct` never does. */
static void test_resnet20_report(void **state)
{
    (void)state;
    if (!expect_scaleout_wino()) {
        print_message("  skipped: scaleout's Winograd runs only on AVX2 (this run: %s)\n",
                      so_isa_label(so_cpu_isa()));
        skip();
    }
    so_graph *g;
    assert_int_equal(so_zoo_build("resnet20", 3, 32, 32, 10, &g), 0);
    so_model *m = open_model(g, "onednn", 2, SO_CONV_AUTO);
    check_kernels(m, "layer1.0.conv1", "winograd", 1);
    check_kernels(m, "layer3.2.conv2", "winograd", 1);
    so_model_destroy(m);
    assert_int_equal(so_zoo_build("resnet20", 3, 32, 32, 10, &g), 0);
    m = open_model(g, "onednn", 2, SO_CONV_DIRECT);
    check_kernels(m, "layer1.0.conv1", "direct", 0);
    check_kernels(m, "layer3.2.conv2", "direct", 0);
    so_model_destroy(m);
}

int main(void)
{
    if (isa_cap_redundant())
        return 77;
    /* 2 threads on any machine: the weight gradient splits c1's and c3's tiles
     * among them and c2's 64 output channels (od_wino_avx2_wgrad). */
    so_threads_set(2, 0);
    struct CMUnitTest tests[NCASES + 1];
    for (int i = 0; i < NCASES; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, test_agree, NULL, NULL, (void *)&cases[i]};
    tests[NCASES] = (struct CMUnitTest)cmocka_unit_test(test_resnet20_report);
    return _cmocka_run_group_tests("onednn_wino", tests, (size_t)NCASES + 1, NULL, NULL);
}
