/* The oneDNN backend's sequence ops (oneDNN matmuls for linear, scaleout's
 * kernels for the rest, onednn_seq.h) against the reference backend: from
 * the same seed and inputs every node's output, the loss, every gradient
 * and the input diffs agree. The shapes take every path: widths that are
 * not multiples of the vector width (row tails), sequence lengths that are
 * not multiples of the key block, head sizes that send attention to the
 * scalar instance, padded batches, ignored targets, tied and untied heads,
 * diffs written and added, gradients accumulated over micro-batches. Run
 * again under SCALEOUT_MAX_ISA=avx2 and sse4.2 (the scalar instance). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/onednn/onednn_gemm.h"
#include "isa_cap.h"
#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/rng.h"
#include "scaleout/zoo.h"

#define BATCH 3
#define TOL 2e-5 /* relative, in norm: summation orders differ (oneDNN's GEMM, vector lanes) */

typedef so_graph *(*build_fn)(void);

typedef struct {
    const char *name;
    build_fn build;
    int n;          /* samples fed (< BATCH: padded) */
    int ignore;     /* token targets set to -1 every `ignore` positions (0: none) */
} tcase;

/* ---- graphs ---- */

/* Continuous (1, T, C) inputs start with a linear layer, so every op's
 * input diff reaches a weight gradient that is compared. */
static int first(so_graph *g)
{
    int w = so_graph_input_shape(g).w;
    return so_g_linear(g, 0, "in", w, 1, 0, 0.0f);
}

static so_graph *g_block(void)
{
    so_graph *g = so_graph_create(1, 21, 26); /* C = 26: tails of 2 (AVX2) and 10 (AVX-512) */
    int x = first(g);
    int a = so_g_linear(g, so_g_layernorm(g, x, "ln_1"), "c_attn", 3 * 26, 1, 0, 0.0f);
    a = so_g_linear(g, so_g_attention(g, a, "attn", 2), "c_proj", 26, 1, 0, 0.0f); /* hs 13: scalar */
    x = so_g_add(g, x, a);
    int m = so_g_gelu(g, so_g_linear(g, so_g_layernorm(g, x, "ln_2"), "c_fc", 40, 1, 0, 0.0f), "gelu");
    x = so_g_add(g, x, so_g_linear(g, m, "mlp.c_proj", 26, 0, 0, 0.0f));
    so_g_loss(g, so_g_dense(g, so_g_layernorm(g, x, "ln_f"), "head", 5));
    return g;
}

/* hs = 16, 32: vector attention; T = 37 and 5: partial key blocks, fewer keys than a block */
static so_graph *attn_graph(int T, int heads, int C)
{
    so_graph *g = so_graph_create(1, T, 3 * C);
    int a = so_g_attention(g, first(g), "attn", heads);
    so_g_loss(g, so_g_dense(g, so_g_linear(g, a, "proj", 7, 1, 0, 0.0f), "head", 4));
    return g;
}
static so_graph *g_attn_vec(void) { return attn_graph(37, 3, 48); }
static so_graph *g_attn_wide(void) { return attn_graph(5, 1, 32); }

/* tokens -> embed -> ln -> tied head -> token loss over 11 of 16 columns */
static so_graph *g_tied(void)
{
    so_graph *g = so_graph_create(1, 9, 1);
    int e = so_g_embed(g, 0, "transformer", 24, 16, 12, 0.3f);
    int h = so_g_gelu(g, so_g_layernorm(g, e, "ln_f"), NULL);
    so_g_token_loss(g, so_g_linear(g, h, "lm_head", 16, 0, e, 0.0f), 11);
    return g;
}

static so_graph *g_gpt2(void)
{
    so_graph *g = NULL;
    if (so_zoo_build("gpt2:L=2,H=2,C=32,T=24,V=50,Vp=64,dropout=0.1", 1, 24, 1, 50, &g))
        fail_msg("%s", so_errmsg());
    return g;
}

static const tcase cases[] = {
    {"block", g_block, BATCH, 0},      {"block-padded", g_block, 2, 0},    {"attn-vector", g_attn_vec, BATCH, 0},
    {"attn-short", g_attn_wide, 2, 0}, {"tied", g_tied, BATCH, 4},         {"tied-padded", g_tied, 1, 3},
    {"gpt2", g_gpt2, BATCH, 0},        {"gpt2-ignore", g_gpt2, 2, 5},
};

/* ---- running both backends ---- */

static so_model *open_model(const tcase *tc, const char *backend)
{
    so_graph *g = tc->build();
    assert_non_null(g);
    if (so_graph_finalize(g))
        fail_msg("%s: %s", tc->name, so_errmsg());
    so_model *m = NULL;
    if (so_model_create(g, backend, BATCH, 11, &m))
        fail_msg("%s on %s: %s", tc->name, backend, so_errmsg());
    return m;
}

static void make_data(const so_model *m, const tcase *tc, float **x, int32_t **y)
{
    so_shape in = so_graph_input_shape(m->g);
    size_t nx = (size_t)BATCH * in.c * in.h * in.w, ny = (size_t)BATCH * so_graph_targets(m->g);
    int k = so_graph_classes(m->g), tokens = so_graph_takes_tokens(m->g);
    *x = malloc(nx * sizeof **x);
    *y = malloc(ny * sizeof **y);
    assert_non_null(*x);
    assert_non_null(*y);
    so_rng r;
    so_rng_seed(&r, 5);
    for (size_t i = 0; i < nx; i++)
        (*x)[i] = tokens ? (float)so_rng_below(&r, (uint64_t)k) : so_rng_normal(&r);
    for (size_t i = 0; i < ny; i++)
        (*y)[i] = tc->ignore && i % (size_t)tc->ignore == 1 ? -1 : (int32_t)so_rng_below(&r, (uint64_t)k);
}

/* ||a - b|| <= TOL ||b|| (+ a floor for all-but-zero tensors). */
static int agree(const char *what, const char *tcname, const float *a, const float *b, size_t n)
{
    double d = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        nb += (double)b[i] * b[i];
    }
    if (sqrt(d) <= TOL * sqrt(nb) + 1e-7)
        return 1;
    print_message("%s: %s differs: ||onednn - ref|| = %.3g, ||ref|| = %.3g\n", tcname, what, sqrt(d), sqrt(nb));
    return 0;
}

/* Every node output (the last forward's; logits before backward overwrites them). */
static int outputs_agree(const tcase *tc, so_model *od, so_model *ref)
{
    int ok = 1;
    for (int i = 1; i < so_graph_size(ref->g) - 1; i++) {
        so_shape o = so_graph_node(ref->g, i)->out;
        size_t n = (size_t)BATCH * o.c * o.h * o.w;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        assert_int_equal(so_model_node_output(od, i, a), 0);
        assert_int_equal(so_model_node_output(ref, i, b), 0);
        ok &= agree(so_graph_node(ref->g, i)->name, tc->name, a, b, n);
        free(a);
        free(b);
    }
    return ok;
}

static int grads_agree(const tcase *tc, so_model *od, so_model *ref)
{
    int ok = 1;
    for (int i = 1; i < so_graph_size(ref->g); i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(ref->g, i, t);
        for (int k = 0; k < nt; k++) {
            char what[96];
            snprintf(what, sizeof what, "d %s.%s", so_graph_node(ref->g, i)->name, t[k].suffix);
            ok &= agree(what, tc->name, od->grads + t[k].off, ref->grads + t[k].off, t[k].count);
        }
    }
    return ok;
}

static void run_case(const tcase *tc)
{
    so_model *od = open_model(tc, "onednn"), *ref = open_model(tc, "ref");
    assert_memory_equal(od->params, ref->params, od->nparams * sizeof(float));
    float *x;
    int32_t *y;
    make_data(ref, tc, &x, &y);
    for (int step = 0; step < 2; step++) { /* the second step accumulates onto the first */
        od->accumulate_grads = ref->accumulate_grads = step;
        so_rng_seed(&od->rng, 3);
        so_rng_seed(&ref->rng, 3);
        assert_int_equal(so_model_forward(od, x, y, tc->n, 1), 0);
        assert_int_equal(so_model_forward(ref, x, y, tc->n, 1), 0);
        if (fabsf(od->loss - ref->loss) > 1e-5f * fabsf(ref->loss))
            fail_msg("%s: loss onednn %.7g, ref %.7g", tc->name, (double)od->loss, (double)ref->loss);
        int ok = outputs_agree(tc, od, ref);
        assert_int_equal(so_model_backward(od), 0);
        assert_int_equal(so_model_backward(ref), 0);
        ok &= grads_agree(tc, od, ref);
        if (!ok)
            fail_msg("%s: onednn and ref disagree (step %d)", tc->name, step);
    }
    free(x);
    free(y);
    so_model_destroy(od);
    so_model_destroy(ref);
}

static void t_cases(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

/* Eval mode and a forward without targets (generation) stop at the logits. */
static void t_no_targets(void **st)
{
    (void)st;
    tcase tc = {"gpt2-eval", g_gpt2, BATCH, 0};
    so_model *od = open_model(&tc, "onednn"), *ref = open_model(&tc, "ref");
    float *x;
    int32_t *y;
    make_data(ref, &tc, &x, &y);
    assert_int_equal(so_model_forward(od, x, NULL, BATCH, 0), 0);
    assert_int_equal(so_model_forward(ref, x, NULL, BATCH, 0), 0);
    assert_true(outputs_agree(&tc, od, ref));
    size_t n = (size_t)BATCH * 24 * 64;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_int_equal(so_model_logits(od, a), 0);
    assert_int_equal(so_model_logits(ref, b), 0);
    assert_true(agree("logits", tc.name, a, b, n));
    free(a);
    free(b);
    free(x);
    free(y);
    so_model_destroy(od);
    so_model_destroy(ref);
}

/* Generation with the key/value cache: decoding a sequence token by token
 * gives, at every position, the logits of a forward over the whole
 * sequence, on both backends. */
static void t_decode(void **st)
{
    (void)st;
    const char *spec = "gpt2:L=2,H=2,C=32,T=16,V=50,Vp=64";
    enum { B = 2, T = 12, VP = 64 };
    for (int be = 0; be < 2; be++) {
        const char *backend = be ? "onednn" : "ref";
        so_graph *gf = NULL, *gd = NULL;
        so_model *full = NULL, *dec = NULL;
        assert_int_equal(so_zoo_build(spec, 1, T, 1, 50, &gf), 0);
        assert_int_equal(so_zoo_build(spec, 1, 1, 1, 50, &gd), 0);
        assert_int_equal(so_model_create(gf, backend, B, 3, &full), 0);
        assert_int_equal(so_model_create(gd, backend, B, 3, &dec), 0);
        assert_memory_equal(full->params, dec->params, full->nparams * sizeof(float));
        float tok[B * T], want[B * T * VP], got[B * VP], step[B];
        for (int i = 0; i < B * T; i++)
            tok[i] = (float)((i * 7 + 3) % 50);
        assert_int_equal(so_model_forward(full, tok, NULL, B, 0), 0);
        assert_int_equal(so_model_logits(full, want), 0);
        for (int pos = 0; pos < T; pos++) {
            for (int b = 0; b < B; b++)
                step[b] = tok[b * T + pos];
            assert_int_equal(so_model_decode(dec, step, B, pos), 0);
            assert_int_equal(so_model_logits(dec, got), 0);
            for (int b = 0; b < B; b++)
                if (!agree("decoded logits", backend, got + b * VP, want + ((size_t)b * T + pos) * VP, VP))
                    fail_msg("%s: position %d of sample %d differs from the full forward", backend, pos, b);
        }
        assert_int_equal(so_model_backward(dec), SO_EINVAL);
        assert_int_equal(so_model_decode(dec, step, B, 16), SO_EINVAL);
        assert_non_null(strstr(so_errmsg(), "outside the context"));
        assert_int_equal(so_model_decode(full, step, B, 0), SO_EINVAL);
        so_model_destroy(full);
        so_model_destroy(dec);
    }
}

/* scaleout's GEMM against a double-precision loop: every transpose, edge
 * sizes around the register tile and cache blocks (301 rows: three A blocks,
 * the last one partial), += and the bias; and the same bits on 1 and 2
 * threads. Skips below AVX2 (the matmuls run there). */
static void t_gemm(void **st)
{
    (void)st;
    const od_gemm_kernels *k = od_gemm_pick();
    if (!k) {
        print_message("skipped: scaleout's GEMM needs AVX2+FMA\n");
        return;
    }
    static const int sizes[][3] = {{1, 1, 1}, {7, 17, 5}, {13, 33, 300}, {130, 70, 520}, {6, 4100, 9}, {301, 21, 40}};
    float *work = malloc(2 * od_gemm_work(k) * sizeof(float) + 64), *w = (float *)(((uintptr_t)work + 63) & ~63ul);
    so_rng r;
    so_rng_seed(&r, 1);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (int t = 0; t < 8; t++) {
            int M = sizes[z][0], N = sizes[z][1], K = sizes[z][2], ta = t & 1, tb = t >> 1 & 1, add = t >> 2;
            float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
            float *C1 = malloc((size_t)M * N * sizeof *C1), *C2 = malloc((size_t)M * N * sizeof *C2);
            float *bias = malloc((size_t)N * sizeof *bias);
            for (int i = 0; i < M * K; i++)
                A[i] = so_rng_normal(&r);
            for (int i = 0; i < K * N; i++)
                B[i] = so_rng_normal(&r);
            for (int i = 0; i < N; i++)
                bias[i] = so_rng_normal(&r);
            for (int i = 0; i < M * N; i++)
                C1[i] = C2[i] = so_rng_normal(&r);
            float *C0 = malloc((size_t)M * N * sizeof *C0);
            memcpy(C0, C1, (size_t)M * N * sizeof *C0);
            od_gemm_args g = {ta, tb, M, N, K, A, B, ta ? M : K, tb ? K : N, C1, N, add, add ? NULL : bias};
            od_gemm(k, &g, w, 1);
            g.C = C2;
            od_gemm(k, &g, w, 2);
            assert_memory_equal(C1, C2, (size_t)M * N * sizeof *C1);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double v = add ? C0[i * N + j] : bias[j];
                    for (int p = 0; p < K; p++)
                        v += (double)(ta ? A[p * M + i] : A[i * K + p]) * (tb ? B[j * K + p] : B[p * N + j]);
                    if (fabs(C1[i * N + j] - v) > 1e-4 * (1 + sqrt((double)K)))
                        fail_msg("gemm %dx%dx%d ta %d tb %d add %d: C[%d][%d] %g, expected %g", M, N, K, ta, tb, add,
                                 i, j, (double)C1[i * N + j], v);
                }
            float *bufs[] = {A, B, C0, C1, C2, bias};
            for (size_t f = 0; f < sizeof bufs / sizeof bufs[0]; f++)
                free(bufs[f]);
        }
    free(work);
}

int main(void)
{
    if (isa_cap_redundant())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_cases),
        cmocka_unit_test(t_no_targets),
        cmocka_unit_test(t_gemm),
        cmocka_unit_test(t_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
