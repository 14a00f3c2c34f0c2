/* GPT-2's linear layers under --precision bf16 (onednn_linear_bf16.c)
 * against FP32 references, with the parameters rounded to BF16 on both sides
 * (so the weight copy loses nothing). Skips (77) where the CPU, or a
 * SCALEOUT_MAX_ISA cap, has no AVX-512 BF16.
 *
 * Tolerances, from the reduction length K (u16 = 2^-8, BF16's unit
 * roundoff; u32 = 2^-24):
 * - forward, per element against a double loop over the same model's input
 *   rounded to BF16: |y - ref| <= K u32 sum_k |x_k w_k| (+ 1e-6): the
 *   products of two BF16 values are exact in FP32, only the FP32
 *   accumulation rounds (one rounding per addition, at most K);
 * - losses and gradients, in norm against the FP32 reference backend:
 *   ||a - b|| <= r (u16 + K u32) sqrt(K) ||b||, with r = 4 BF16 roundings of
 *   FP32 values on the longest path (the input of each of the two products
 *   and dY of each) each perturbing a term by <= u16, and sqrt(K) the ratio
 *   sum |a_k b_k| / |sum a_k b_k| of random-sign operands. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/onednn/onednn_linear_bf16.h"
#include "scaleout/cpu.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/rng.h"

#define BATCH 3
#define U16 (1.0 / 256)
#define U32 (1.0 / 16777216)
#define ROUNDINGS 4

typedef so_graph *(*build_fn)(void);

typedef struct {
    const char *name;
    build_fn build;
    int n;          /* samples fed (< BATCH: padded) */
    int kmax;       /* longest reduction: features or rows (BATCH x T) */
} tcase;

/* tokens -> embed -> ln -> fc (bias) -> gelu -> untied head -> token loss over 20 of 24 */
static so_graph *g_untied(void)
{
    so_graph *g = so_graph_create(1, 21, 1);
    int e = so_g_embed(g, 0, "transformer", 40, 24, 21, 0.3f);
    int h = so_g_gelu(g, so_g_linear(g, so_g_layernorm(g, e, "ln"), "fc", 56, 1, 0, 0.0f), "gelu");
    so_g_token_loss(g, so_g_linear(g, h, "head", 24, 0, 0, 0.0f), 20);
    return g;
}

/* tokens -> embed -> ln -> gelu -> tied head (the token table) -> token loss */
static so_graph *g_tied(void)
{
    so_graph *g = so_graph_create(1, 9, 1);
    int e = so_g_embed(g, 0, "transformer", 24, 16, 12, 0.3f);
    int h = so_g_gelu(g, so_g_layernorm(g, e, "ln_f"), NULL);
    so_g_token_loss(g, so_g_linear(g, h, "lm_head", 16, 0, e, 0.0f), 11);
    return g;
}

static const tcase cases[] = {
    {"untied", g_untied, BATCH, BATCH * 21}, {"untied-padded", g_untied, 2, BATCH * 21},
    {"tied", g_tied, BATCH, 24},             {"tied-padded", g_tied, 1, 24},
};

static so_model *open_model(const tcase *tc, const char *backend, so_precision p)
{
    so_graph *g = tc->build();
    assert_non_null(g);
    if (so_graph_finalize(g))
        fail_msg("%s: %s", tc->name, so_errmsg());
    so_model_opts o = {.backend = backend, .batch = BATCH, .seed = 11, .precision = p};
    so_model *m = NULL;
    if (so_model_create_opts(g, &o, &m))
        fail_msg("%s on %s: %s", tc->name, backend, so_errmsg());
    for (size_t i = 0; i < m->nparams; i++) /* BF16-exact master weights: the copy loses nothing */
        m->params[i] = so_bf16_to_f32_1(so_f32_to_bf16_1(m->params[i]));
    so_model_params_changed(m);
    return m;
}

static void make_data(const so_model *m, float *x, int32_t *y)
{
    so_shape in = so_graph_input_shape(m->g);
    int k = so_graph_classes(m->g);
    so_rng r;
    so_rng_seed(&r, 5);
    for (int i = 0; i < BATCH * in.h; i++) {
        x[i] = (float)so_rng_below(&r, (uint64_t)k);
        y[i] = i % 7 == 3 ? -1 : (int32_t)so_rng_below(&r, (uint64_t)k);
    }
}

static float *node_output(so_model *m, int node)
{
    so_shape o = so_graph_node(m->g, node)->out;
    float *v = malloc((size_t)BATCH * o.c * o.h * o.w * sizeof *v);
    assert_non_null(v);
    assert_int_equal(so_model_node_output(m, node, v), 0);
    return v;
}

/* Every linear node's output against a double loop over its own input
 * (read from the same model) rounded to BF16, element by element. */
static void check_forward(const tcase *tc, so_model *m)
{
    for (int i = 1; i < so_graph_size(m->g); i++) {
        const so_node *nd = so_graph_node(m->g, i);
        if (nd->op != SO_OP_LINEAR)
            continue;
        const so_node *in = so_graph_node(m->g, nd->inputs[0]);
        int K = in->out.w, N = nd->a.out, R = tc->n * in->out.c * in->out.h;
        float *x = node_output(m, nd->inputs[0]), *y = node_output(m, i);
        const float *w = m->params + (nd->a.tie ? so_graph_node(m->g, nd->a.tie)->param_off : nd->param_off);
        const float *b = nd->a.bias ? m->params + nd->param_off + (size_t)N * K : NULL;
        for (int r = 0; r < R; r++)
            for (int j = 0; j < N; j++) {
                double v = b ? b[j] : 0.0, mag = 0.0;
                for (int k = 0; k < K; k++) {
                    double p = (double)so_bf16_to_f32_1(so_f32_to_bf16_1(x[(size_t)r * K + k])) * w[(size_t)j * K + k];
                    v += p;
                    mag += fabs(p);
                }
                double got = y[(size_t)r * N + j];
                if (fabs(got - v) > K * U32 * mag + 1e-6)
                    fail_msg("%s: %s[%d][%d] = %.9g, BF16 reference %.9g (bound %.3g)", tc->name, nd->name, r, j, got,
                             v, K * U32 * mag + 1e-6);
            }
        free(x);
        free(y);
    }
}

/* ||a - b|| <= tol ||b|| (+ a floor for all-but-zero tensors). */
static int agree(const char *what, const char *tcname, const float *a, const float *b, size_t n, double tol)
{
    double d = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        nb += (double)b[i] * b[i];
    }
    if (sqrt(d) <= tol * sqrt(nb) + 1e-7)
        return 1;
    print_message("%s: %s differs: ||bf16 - fp32|| = %.3g, ||fp32|| = %.3g, tolerance %.3g\n", tcname, what, sqrt(d),
                  sqrt(nb), tol);
    return 0;
}

static int grads_agree(const tcase *tc, so_model *bf, so_model *ref, double tol)
{
    int ok = 1;
    for (int i = 1; i < so_graph_size(ref->g); i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(ref->g, i, t);
        for (int k = 0; k < nt; k++) {
            char what[96];
            snprintf(what, sizeof what, "d %s.%s", so_graph_node(ref->g, i)->name, t[k].suffix);
            ok &= agree(what, tc->name, bf->grads + t[k].off, ref->grads + t[k].off, t[k].count, tol);
        }
    }
    return ok;
}

/* Two steps, the second accumulating onto the first. */
static void run_case(const tcase *tc)
{
    so_model *bf = open_model(tc, "onednn", SO_PRECISION_BF16), *ref = open_model(tc, "ref", SO_PRECISION_FP32);
    assert_memory_equal(bf->params, ref->params, bf->nparams * sizeof(float));
    double tol = ROUNDINGS * (U16 + tc->kmax * U32) * sqrt((double)tc->kmax);
    float x[BATCH * 64];
    int32_t y[BATCH * 64];
    make_data(ref, x, y);
    for (int step = 0; step < 2; step++) {
        bf->accumulate_grads = ref->accumulate_grads = step;
        assert_int_equal(so_model_forward(bf, x, y, tc->n, 1), 0);
        assert_int_equal(so_model_forward(ref, x, y, tc->n, 1), 0);
        if (fabs((double)bf->loss - ref->loss) > tol * fabs((double)ref->loss))
            fail_msg("%s: loss bf16 %.7g, fp32 %.7g", tc->name, (double)bf->loss, (double)ref->loss);
        check_forward(tc, bf);
        assert_int_equal(so_model_backward(bf), 0);
        assert_int_equal(so_model_backward(ref), 0);
        if (!grads_agree(tc, bf, ref, tol))
            fail_msg("%s: bf16 and fp32 gradients disagree (step %d)", tc->name, step);
    }
    so_model_destroy(bf);
    so_model_destroy(ref);
}

static void t_cases(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

/* The products really run in BF16: on inputs that are not BF16-exact the
 * head's logits differ from the FP32 onednn backend's, and a change of the
 * parameters reaches the BF16 weight copy (params_changed). */
static void t_really_bf16(void **st)
{
    (void)st;
    const tcase *tc = &cases[0];
    so_model *bf = open_model(tc, "onednn", SO_PRECISION_BF16), *fp = open_model(tc, "onednn", SO_PRECISION_FP32);
    float x[BATCH * 21];
    int32_t y[BATCH * 21];
    make_data(fp, x, y);
    int head = so_graph_size(bf->g) - 2;
    assert_int_equal(so_model_forward(bf, x, y, BATCH, 0), 0);
    assert_int_equal(so_model_forward(fp, x, y, BATCH, 0), 0);
    size_t n = (size_t)BATCH * 21 * 24;
    float *a = node_output(bf, head), *b = node_output(fp, head);
    assert_true(memcmp(a, b, n * sizeof *a) != 0);
    free(a);
    for (size_t i = 0; i < bf->nparams; i++)
        bf->params[i] = -bf->params[i];
    so_model_params_changed(bf);
    assert_int_equal(so_model_forward(bf, x, y, BATCH, 0), 0);
    check_forward(tc, bf);
    free(b);
    so_model_destroy(bf);
    so_model_destroy(fp);
}

/* The tied head's BF16 copy of the token table: rebuilt when the table
 * changes through the per-node path (what ZeRO's gathers and --init-from of
 * one unit report: the embedding's node only), and only then. */
static void t_tied_copy_follows_table(void **st)
{
    (void)st;
    const tcase *tc = &cases[2];
    so_model *bf = open_model(tc, "onednn", SO_PRECISION_BF16);
    float x[BATCH * 12];
    int32_t y[BATCH * 12];
    make_data(bf, x, y);
    int embed = 1, head = so_graph_size(bf->g) - 2;
    assert_int_equal(so_graph_node(bf->g, head)->a.tie, embed);
    assert_int_equal(so_model_forward(bf, x, y, BATCH, 1), 0);
    assert_int_equal(so_model_backward(bf), 0);
    unsigned long built = od_linear_bf16_weight_builds();
    for (int pass = 0; pass < 3; pass++) { /* nothing changed: no conversion */
        assert_int_equal(so_model_forward(bf, x, y, BATCH, 1), 0);
        assert_int_equal(so_model_backward(bf), 0);
    }
    assert_int_equal(od_linear_bf16_weight_builds(), built);
    const so_node *e = so_graph_node(bf->g, embed);
    for (size_t i = 0; i < e->nparam; i++) /* a new table, BF16-exact: check_forward's reference is exact */
        bf->params[e->param_off + i] = so_bf16_to_f32_1(so_f32_to_bf16_1(-0.5f * bf->params[e->param_off + i]));
    so_model_params_changed_nodes(bf, embed, embed + 1);
    assert_int_equal(so_model_forward(bf, x, y, BATCH, 1), 0);
    check_forward(tc, bf); /* a stale copy fails here */
    assert_int_equal(so_model_backward(bf), 0);
    assert_int_equal(od_linear_bf16_weight_builds(), built + 2); /* the forward's copy and the backward's */
    so_model_destroy(bf);
}

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* Accounted bytes less the oneDNN scratchpad, which follows the kernels
 * oneDNN picks (BF16 ones need other sizes than FP32 ones), and less the
 * shared transient buffer (checked on its own below), not the copies. */
static size_t accounted(const so_model *m)
{
    const od_state *s = m->bs;
    return so_model_activation_bytes(m) - s->pad_bytes - s->wtmp_bytes;
}

/* The BF16 copies are in the accounted memory: per linear layer its weights
 * twice (the backward's plain copy, the forward's in the matmul's layout,
 * padded to at most 64 x 64 blocks) and its input (R,K), 2 bytes each. */
static void t_copies_accounted(void **st)
{
    (void)st;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c += 2) {
        const tcase *tc = &cases[c];
        so_model *bf = open_model(tc, "onednn", SO_PRECISION_BF16), *fp = open_model(tc, "onednn", SO_PRECISION_FP32);
        size_t lo = 0, hi = 0, dy_max = 0;
        for (int i = 1; i < so_graph_size(bf->g); i++) {
            const so_node *nd = so_graph_node(bf->g, i);
            if (nd->op != SO_OP_LINEAR)
                continue;
            so_shape in = so_graph_node(bf->g, nd->inputs[0])->out;
            size_t K = (size_t)in.w, N = (size_t)nd->a.out, R = (size_t)BATCH * in.c * in.h;
            lo += 2 * (2 * N * K + R * K);
            hi += 2 * (N * K + round_up(K, 64) * round_up(N, 64) + R * K);
            dy_max = R * N > dy_max ? R * N : dy_max;
        }
        /* The shared transient buffer holds each linear's BF16 dY in turn.
         * accounted() takes it out of both totals: were it not in them, the
         * difference below would be off by the two precisions' buffers. */
        const od_state *bs = bf->bs;
        if (bs->wtmp_bytes < 2 * dy_max)
            fail_msg("%s: the transient buffer (%zu bytes) holds no BF16 dY of %zu bytes", tc->name,
                     bs->wtmp_bytes, 2 * dy_max);
        size_t b = accounted(bf), f = accounted(fp);
        if (b < f + lo || b > f + hi)
            fail_msg("%s: accounted bf16 %zu, fp32 %zu bytes: the difference is not the BF16 copies' %zu-%zu",
                     tc->name, b, f, lo, hi);
        so_model_destroy(bf);
        so_model_destroy(fp);
    }
}

int main(void)
{
    if (!so_cpu_has_bf16()) {
        printf("skipped: no AVX-512 BF16 on this CPU (or under SCALEOUT_MAX_ISA): --precision bf16 cannot run\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_cases),
        cmocka_unit_test(t_really_bf16),
        cmocka_unit_test(t_tied_copy_follows_table),
        cmocka_unit_test(t_copies_accounted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
