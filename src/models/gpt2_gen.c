/* Text generation with a GPT-2 (scaleout/gpt2.h, so_gpt2_generate): the
 * prompt goes through the key/value cache one position at a time
 * (so_model_decode), then each new token is drawn from the softmax of the
 * last logits over the real vocabulary, sharpened by the temperature and
 * limited to the top k, and fed back. llm.c's train_gpt2.c recomputes the
 * whole sequence for every token instead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/rng.h"

/* The k-th largest of v[0..n) (k in 1..n), by quickselect on a copy. */
static float kth_largest(const float *v, int n, int k, float *tmp)
{
    memcpy(tmp, v, (size_t)n * sizeof *tmp);
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = tmp[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (tmp[i] > pivot)
                i++;
            while (tmp[j] < pivot)
                j--;
            if (i <= j) {
                float x = tmp[i];
                tmp[i++] = tmp[j];
                tmp[j--] = x;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return tmp[want];
}

/* A token from logits z[0..V): argmax at temperature 0, else a draw from
 * softmax(z / temperature) over the tokens at or above the top-k cut. */
static int32_t draw(const float *z, int V, const so_gpt2_sampling *c, so_rng *r, float *tmp)
{
    int best = 0;
    for (int i = 1; i < V; i++)
        best = z[i] > z[best] ? i : best;
    if (c->temperature <= 0.0f)
        return best;
    float cut = c->top_k > 0 && c->top_k < V ? kth_largest(z, V, c->top_k, tmp) : -INFINITY;
    double sum = 0;
    for (int i = 0; i < V; i++) {
        tmp[i] = z[i] >= cut ? (float)exp((double)(z[i] - z[best]) / c->temperature) : 0.0f;
        sum += tmp[i];
    }
    double u = (double)so_rng_uniform(r) * sum, acc = 0;
    for (int i = 0; i < V; i++)
        if ((acc += tmp[i]) > u && tmp[i] > 0.0f)
            return i;
    return best;
}

int so_gpt2_generate(so_model *m, const int32_t *prompt, int n, const so_gpt2_sampling *c, int32_t *out, int *nout)
{
    *nout = 0;
    int V = so_graph_classes(m->g), ctx = so_graph_context(m->g);
    int width = so_graph_logits(m->g) >= 0 ? so_graph_node(m->g, so_graph_logits(m->g))->out.w : 0;
    if (n < 1 || c->tokens < 0 || !(c->temperature >= 0.0f) || c->top_k < 0)
        return so_err(SO_EINVAL, "generate: a prompt of %d tokens, %d new, temperature %g, top-k %d", n, c->tokens,
                      (double)c->temperature, c->top_k);
    if (n > ctx)
        return so_err(SO_EINVAL, "generate: the prompt's %d tokens exceed the context of %d", n, ctx);
    float *x = calloc((size_t)m->batch, sizeof *x), *logits = malloc((size_t)m->batch * width * sizeof *logits);
    float *tmp = malloc((size_t)V * sizeof *tmp);
    int rc = x && logits && tmp ? 0 : so_err(SO_ENOMEM, "generate: out of memory");
    so_rng r;
    so_rng_seed(&r, c->seed);
    int total = 0;
    for (int pos = 0; !rc && pos < ctx && pos < n + c->tokens; pos++) {
        int32_t tok = pos < n ? prompt[pos] : draw(logits, V, c, &r, tmp);
        out[total++] = tok;
        if (pos >= n && c->on_token && c->on_token(c->arg, tok))
            break;
        if (pos + 1 == n + c->tokens) /* the last token needs no logits after it */
            break;
        x[0] = (float)tok;
        rc = so_model_decode(m, x, m->batch, pos);
        if (!rc)
            rc = so_model_logits(m, logits);
    }
    *nout = total;
    free(x);
    free(logits);
    free(tmp);
    return rc;
}
