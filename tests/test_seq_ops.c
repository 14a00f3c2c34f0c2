/* The sequence ops of GPT-2 on the reference backend: finite-difference
 * gradient checks of every op (embedding, LayerNorm, Linear, causal
 * attention, GELU, the per-token loss with padded columns and ignored
 * targets, weight tying) and of a whole small GPT-2; hand-computed values;
 * shape errors and bad tokens or targets. The oneDNN kernels are compared
 * with these in test_seq_onednn.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradcheck.h"
#include "scaleout/zoo.h"

/* ---- one op each: input (1,T,C) continuous, so its diff is checked too ---- */

static void t_layernorm(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 4, 6, &x);
    gc_head(g, so_g_layernorm(g, x, "ln"));
    gc_run(g, 0);
}

static void t_linear(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 4, 5, &x);
    gc_head(g, so_g_tanh(g, so_g_linear(g, x, "fc", 3, 1, 0, 0.0f)));
    gc_run(g, 0);
    g = gc_graph(2, 3, 4, &x); /* any leading dims: rows of the last one */
    gc_head(g, so_g_linear(g, x, "fc", 2, 0, 0, 0.3f));
    gc_run(g, 0);
}

static void t_gelu(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 3, 5, &x);
    gc_head(g, so_g_gelu(g, x, "gelu"));
    gc_run(g, 0);
}

/* 2 heads of 3: the probe's diff is d loss / d qkv, each head's q, k, v. */
static void t_attention(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 5, 18, &x);
    gc_head(g, so_g_attention(g, x, "attn", 2));
    gc_run(g, 0);
}

/* The token loss alone on logits (1,3,6) of which 4 columns count: the
 * padding columns get no gradient (their finite differences are 0 too). */
static void t_token_loss(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 3, 6, &x);
    so_g_token_loss(g, x, 4);
    gc c;
    assert_int_equal(so_graph_finalize(g), 0);
    gc_open(&c, g, BATCH, 3);
    c.y[1] = -1; /* not counted */
    c.y[5] = -1;
    gc_check(&c, x);
    const float *dz = ref_probe_diff(c.m, x);
    for (int r = 0; r < BATCH * 3; r++)
        for (int j = 0; j < 6; j++)
            if ((j >= 4 || c.y[r] < 0) && dz[r * 6 + j] != 0.0f)
                fail_msg("row %d column %d: gradient %g, expected 0", r, j, (double)dz[r * 6 + j]);
    gc_close(&c);
}

/* tokens -> embed -> layernorm -> lm head tied to the token table -> loss:
 * the token table's gradient is the sum of both uses. */
static so_graph *tied_net(int vocab, int padded)
{
    so_graph *g = so_graph_create(1, 5, 1);
    int e = so_g_embed(g, 0, "transformer", 4, padded, 6, 0.5f);
    int h = so_g_layernorm(g, e, "ln_f");
    so_g_token_loss(g, so_g_linear(g, h, "lm_head", padded, 0, e, 0.0f), vocab);
    return g;
}

static void t_embed_tied(void **st)
{
    (void)st;
    gc_run(tied_net(5, 7), 0);
    gc_run(tied_net(7, 7), 0);
}

/* Untied: a separate head, and the embedding's table gets one use only. */
static void t_embed_untied(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(1, 4, 1);
    int e = so_g_embed(g, 0, "transformer", 3, 6, 4, 0.5f);
    so_g_token_loss(g, so_g_linear(g, so_g_gelu(g, e, NULL), "head", 6, 1, 0, 0.0f), 6);
    gc_run(g, 0);
}

/* The whole model, small: every tensor of every block against finite differences. */
static void t_gpt2_small(void **st)
{
    (void)st;
    so_graph *g = NULL;
    if (so_zoo_build("gpt2:L=2,H=2,C=8,T=6,V=11,Vp=12", 1, 5, 1, 11, &g))
        fail_msg("%s", so_errmsg());
    gc c;
    gc_open(&c, g, 2, 77);
    gc_check(&c, 0);
    gc_close(&c);
}

/* ---- hand values ---- */

/* embed: wte[token] + wpe[t]; layernorm of (1,2,3,4): mean 2.5, variance
 * 1.25; gelu(1) and gelu(-2) from the tanh formula by hand. */
static void t_hand_values(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(1, 2, 1);
    int e = so_g_embed(g, 0, "transformer", 4, 3, 2, 0.1f);
    int ln = so_g_layernorm(g, e, "ln");
    int ge = so_g_gelu(g, e, "gelu");
    int add[2] = {ln, ge};
    so_g_token_loss(g, so_g_linear(g, so_graph_add(g, SO_OP_ADD, NULL, add, 2, NULL), "head", 3, 0, 0, 0), 3);
    assert_int_equal(so_graph_finalize(g), 0);
    so_model *m;
    assert_int_equal(so_model_create(g, "ref", 1, 1, &m), 0);
    float *wte = m->params, *wpe = wte + 12;
    for (int k = 0; k < 12; k++)
        wte[k] = 0.0f;
    const float row2[4] = {1, 2, 3, 4}, pos1[4] = {1, -3, 0, 0};
    memcpy(wte + 8, row2, sizeof row2);
    memset(wpe, 0, 8 * sizeof *wpe);
    memcpy(wpe + 4, pos1, sizeof pos1);
    float x[2] = {2, 2}, out[8];
    int32_t y[2] = {0, 1};
    assert_int_equal(so_model_forward(m, x, y, 1, 1), 0);
    assert_int_equal(so_model_node_output(m, e, out), 0);
    const float want_e[8] = {1, 2, 3, 4, 2, -1, 3, 4};
    assert_memory_equal(out, want_e, sizeof want_e);
    assert_int_equal(so_model_node_output(m, ln, out), 0);
    for (int k = 0; k < 4; k++)
        assert_true(fabs(out[k] - (row2[k] - 2.5) / sqrt(1.25 + 1e-5)) < 1e-6);
    assert_int_equal(so_model_node_output(m, ge, out), 0);
    assert_true(fabs(out[0] - 0.8411919906082768) < 1e-6); /* gelu(1) */
    assert_true(fabs(out[5] - -0.1588080093917232) < 1e-6); /* gelu(-1) */
    so_model_destroy(m);
}

/* Attention over T = 2 with one head of 1: out_0 = v_0; out_1 is v_0 and v_1
 * weighted by softmax(q_1 k_0, q_1 k_1). */
static void t_hand_attention(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 2, 3, &x);
    int a = so_g_attention(g, x, "attn", 1);
    gc_head(g, a);
    gc c;
    assert_int_equal(so_graph_finalize(g), 0);
    gc_open(&c, g, 1, 1);
    const float qkv[6] = {9, 9, 5, /* q0 k0 v0 */ 2, 0.5f, -1 /* q1 k1 v1 */};
    memcpy(c.x, qkv, sizeof qkv);
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 1, 1), 0);
    float out[2];
    assert_int_equal(so_model_node_output(c.m, a, out), 0);
    double s0 = 2.0 * 9.0, s1 = 2.0 * 0.5, p0 = 1.0 / (1.0 + exp(s1 - s0));
    assert_true(out[0] == 5.0f);
    assert_true(fabs(out[1] - (p0 * 5.0 + (1.0 - p0) * -1.0)) < 1e-6);
    gc_close(&c);
}

/* The loss is the mean over counted targets only: ignoring positions and
 * padding samples (n < batch) changes nothing else. */
static void t_token_loss_mean(void **st)
{
    (void)st;
    gc big;
    so_graph *g = tied_net(5, 7);
    assert_int_equal(so_graph_finalize(g), 0);
    gc_open(&big, g, 3, 9);
    big.y[2] = -1;
    assert_int_equal(so_model_forward(big.m, big.x, big.y, 2, 1), 0);
    assert_int_equal(so_model_logits(big.m, big.logits), 0);
    double want = xent(big.logits, big.y, 2 * 5, 7, 5);
    assert_true(fabs(want - big.m->loss) < 1e-5 * fabs(want));
    int correct = -1;
    assert_int_equal(so_model_correct(big.m, big.y, 2, &correct), 0);
    assert_true(correct >= 0 && correct <= 9);
    /* an evaluation's sums count a sample as its fraction of positions right:
     * the accuracy is per target, at most 1, not T times the tokens right */
    double sums[3] = {0, 0, 0};
    assert_int_equal(so_model_add_scores(big.m, big.y, 2, sums), 0);
    assert_true(fabs(sums[0] - correct / 5.0) < 1e-12);
    assert_true(sums[1] == 2 && sums[0] / sums[1] <= 1.0);
    assert_true(fabs(sums[2] - 2.0 * big.m->loss) < 1e-12 * fabs(sums[2]) + 1e-30);
    gc_close(&big);
}

/* ---- errors ---- */

static void expect_msg(int rc, const char *frag)
{
    assert_int_equal(rc, SO_EINVAL);
    if (!strstr(so_errmsg(), frag))
        fail_msg("message '%s' lacks '%s'", so_errmsg(), frag);
}

static void t_errors(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(1, 9, 1);
    expect_msg(so_g_embed(g, 0, "e", 4, 10, 8, 0), "above the context 8");
    so_graph_destroy(g);
    g = so_graph_create(1, 4, 6);
    expect_msg(so_g_attention(g, 0, "a", 4), "divisible by the heads");
    so_graph_destroy(g);
    g = so_graph_create(1, 4, 6);
    int l = so_g_layernorm(g, 0, "ln");
    expect_msg(so_g_linear(g, l, "head", 5, 0, l, 0), "not an embed node");
    so_graph_destroy(g);
    g = so_graph_create(1, 4, 1);
    int e = so_g_embed(g, 0, "e", 4, 10, 8, 0);
    expect_msg(so_g_linear(g, e, "head", 9, 0, e, 0), "tied linear");
    so_graph_destroy(g);
    g = so_graph_create(1, 4, 6);
    expect_msg(so_g_token_loss(g, 0, 7), "vocab 7");
    so_graph_destroy(g);

    /* tokens and targets out of range */
    gc c;
    g = tied_net(5, 7);
    assert_int_equal(so_graph_finalize(g), 0);
    gc_open(&c, g, 2, 1);
    c.x[3] = 5.0f; /* a padding row: not a token */
    expect_msg(so_model_forward(c.m, c.x, c.y, 2, 1), "position 3");
    c.x[3] = 1.5f;
    expect_msg(so_model_forward(c.m, c.x, c.y, 2, 1), "not a token id");
    c.x[3] = 1.0f;
    c.y[7] = 5;
    expect_msg(so_model_forward(c.m, c.x, c.y, 2, 1), "sample 1, position 2");
    c.y[7] = -2;
    expect_msg(so_model_forward(c.m, c.x, c.y, 2, 1), "target -2");
    gc_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_layernorm),      cmocka_unit_test(t_linear),       cmocka_unit_test(t_gelu),
        cmocka_unit_test(t_attention),      cmocka_unit_test(t_token_loss),   cmocka_unit_test(t_embed_tied),
        cmocka_unit_test(t_embed_untied),   cmocka_unit_test(t_gpt2_small),   cmocka_unit_test(t_hand_values),
        cmocka_unit_test(t_hand_attention), cmocka_unit_test(t_token_loss_mean), cmocka_unit_test(t_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
