/* so_gpt2_generate (src/models/gpt2_gen.c) against generation without a
 * cache: greedy decoding through the key/value cache draws exactly the
 * tokens of recomputing the whole sequence every step (llm.c's way: one full
 * forward over the padded context, the argmax at the last position), on
 * both backends; sampling is reproducible from the seed, top-k 1 is greedy,
 * on_token can stop it, and bad arguments are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/model.h"
#include "scaleout/zoo.h"

#define SPEC "gpt2:L=2,H=2,C=32,T=24,V=50,Vp=64"
enum { T = 24, V = 50, VP = 64, PROMPT = 3, NEW = T - PROMPT };

static so_model *build(const char *backend, int len)
{
    so_graph *g = NULL;
    so_model *m = NULL;
    assert_int_equal(so_zoo_build(SPEC, 1, len, 1, V, &g), 0);
    assert_int_equal(so_model_create(g, backend, 1, 7, &m), 0);
    /* larger weights than GPT-2's 0.02 so the logits are far apart: no near-ties for the argmax */
    for (size_t i = 0; i < m->nparams; i++)
        m->params[i] *= 8.0f;
    so_model_params_changed(m);
    return m;
}

/* The argmax over the real vocabulary at position len - 1 of a full forward
 * of seq[0..len) (the rest of the context zeros: causal, so they do not matter). */
static int32_t full_argmax(so_model *full, const int32_t *seq, int len)
{
    float x[T] = {0}, logits[T * VP];
    for (int i = 0; i < len; i++)
        x[i] = (float)seq[i];
    assert_int_equal(so_model_forward(full, x, NULL, 1, 0), 0);
    assert_int_equal(so_model_logits(full, logits), 0);
    const float *z = logits + (size_t)(len - 1) * VP;
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        best = z[i] > z[best] ? i : best;
    return best;
}

static void t_greedy_equals_recompute(void **st)
{
    (void)st;
    for (int be = 0; be < 2; be++) {
        const char *backend = be ? "onednn" : "ref";
        so_model *dec = build(backend, 1), *full = build(backend, T);
        assert_memory_equal(dec->params, full->params, dec->nparams * sizeof(float));
        const int32_t prompt[PROMPT] = {49, 3, 17};
        int32_t got[T], want[T];
        int n = 0;
        so_gpt2_sampling c = {.tokens = NEW, .temperature = 0.0f};
        assert_int_equal(so_gpt2_generate(dec, prompt, PROMPT, &c, got, &n), 0);
        assert_int_equal(n, T);
        memcpy(want, prompt, sizeof prompt);
        for (int len = PROMPT; len < T; len++)
            want[len] = full_argmax(full, want, len);
        for (int i = 0; i < T; i++)
            if (got[i] != want[i])
                fail_msg("%s: token %d is %d with the cache, %d recomputing the sequence", backend, i, got[i], want[i]);
        /* the draw is not constant: the test would pass on a model that ignores its input otherwise */
        int distinct = 0;
        for (int i = PROMPT + 1; i < T; i++)
            distinct += got[i] != got[PROMPT];
        assert_true(distinct > 0);
        so_model_destroy(dec);
        so_model_destroy(full);
    }
}

static int stop_after_two(void *arg, int32_t tok)
{
    (void)tok;
    return ++*(int *)arg == 2;
}

static void t_sampling(void **st)
{
    (void)st;
    so_model *m = build("onednn", 1);
    const int32_t prompt[2] = {1, 2};
    int32_t a[T], b[T], g[T];
    int na, nb, ng;
    so_gpt2_sampling c = {.tokens = 10, .temperature = 1.0f, .top_k = 5, .seed = 42};
    assert_int_equal(so_gpt2_generate(m, prompt, 2, &c, a, &na), 0);
    assert_int_equal(so_gpt2_generate(m, prompt, 2, &c, b, &nb), 0);
    assert_int_equal(na, 12);
    assert_int_equal(nb, 12);
    assert_memory_equal(a, b, sizeof(int32_t) * 12); /* the seed decides */
    for (int i = 0; i < 12; i++)
        assert_true(a[i] >= 0 && a[i] < V);
    so_gpt2_sampling k1 = {.tokens = 10, .temperature = 0.7f, .top_k = 1, .seed = 9}, greedy = {.tokens = 10};
    assert_int_equal(so_gpt2_generate(m, prompt, 2, &k1, a, &na), 0);
    assert_int_equal(so_gpt2_generate(m, prompt, 2, &greedy, g, &ng), 0);
    assert_memory_equal(a, g, sizeof(int32_t) * 12); /* top-k 1 is the argmax */
    int seen = 0;
    so_gpt2_sampling stop = {.tokens = 10, .on_token = stop_after_two, .arg = &seen};
    assert_int_equal(so_gpt2_generate(m, prompt, 2, &stop, a, &na), 0);
    assert_int_equal(na, 4);
    so_gpt2_sampling past = {.tokens = 100}; /* stops at the context's end */
    int32_t *big = malloc(200 * sizeof *big);
    assert_int_equal(so_gpt2_generate(m, prompt, 2, &past, big, &na), 0);
    assert_int_equal(na, T);
    so_gpt2_sampling bad = {.tokens = 1, .temperature = -1.0f};
    assert_int_equal(so_gpt2_generate(m, prompt, 2, &bad, a, &na), SO_EINVAL);
    int32_t long_prompt[T + 1] = {0};
    assert_int_equal(so_gpt2_generate(m, long_prompt, T + 1, &greedy, big, &na), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "exceed the context"));
    free(big);
    so_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_greedy_equals_recompute),
        cmocka_unit_test(t_sampling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
