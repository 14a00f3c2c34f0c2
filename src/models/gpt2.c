/* GPT-2 (Radford et al. 2019) as llm.c's train_gpt2.c and nanoGPT define it:
 * token + position embedding, L pre-LayerNorm blocks of causal multi-head
 * attention and a GELU MLP, a final LayerNorm and the LM head tied to the
 * token embedding, with a per-token cross-entropy over the vocabulary (the
 * padded columns ignored). Module names are nanoGPT's and Hugging Face's
 * (transformer.h.0.attn.c_attn ...), so exports load by name; the PyTorch
 * twin is bench/torch_gpt2.py. Names and specs: include/scaleout/zoo.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/zoo_internal.h"
#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/zoo.h"

/* The named sizes; every one has context 1024 and GPT-2's 50257 tokens. */
static const struct {
    const char *name;
    int layers, heads, channels;
} sizes[] = {{"gpt2", 12, 12, 768}, {"gpt2-medium", 24, 16, 1024}, {"gpt2-large", 36, 20, 1280}, {"gpt2-xl", 48, 25, 1600}};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Bounds that keep every count in range: token ids travel as floats (exact below 2^24). */
#define MAX_LAYERS 1024
#define MAX_CHANNELS 65536
#define MAX_CONTEXT (1 << 20)
#define MAX_VOCAB (1 << 24)

/* llm.c pads the vocabulary to a multiple of 128 so the LM head's GEMM tiles evenly. */
static int padded(int v) { return (v + 127) / 128 * 128; }

/* The base name's index in sizes[] (len characters of name), or -1. */
static int base_size(const char *name, size_t len)
{
    for (int i = 0; i < NSIZES; i++)
        if (strlen(sizes[i].name) == len && !strncmp(name, sizes[i].name, len))
            return i;
    return -1;
}

/* One "key=value" of a spec into c; *vp_set notes an explicit Vp. */
static int parse_pair(const char *spec, const char *kv, size_t len, so_gpt2_config *c, int *vp_set)
{
    static const char *const keys[] = {"L", "H", "C", "T", "V", "Vp", "dropout"};
    const char *eq = memchr(kv, '=', len);
    char key[16], val[32];
    if (!eq || (size_t)(eq - kv) >= sizeof key || len - (size_t)(eq - kv) - 1 >= sizeof val)
        return so_err(SO_EINVAL, "--model %s: '%.*s' is not key=value (keys L, H, C, T, V, Vp, dropout)", spec,
                      (int)len, kv);
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    snprintf(val, sizeof val, "%.*s", (int)(len - (size_t)(eq - kv) - 1), eq + 1);
    int k = 0;
    while (k < 7 && strcmp(key, keys[k]))
        k++;
    if (k == 7)
        return so_err(SO_EINVAL, "--model %s: unknown key '%s' (keys L, H, C, T, V, Vp, dropout)", spec, key);
    char *end;
    if (k == 6) {
        double p = strtod(val, &end);
        if (!val[0] || *end || !(p >= 0.0 && p < 1.0))
            return so_err(SO_EINVAL, "--model %s: dropout '%s' is not a probability in [0,1)", spec, val);
        c->dropout = (float)p;
        return 0;
    }
    long v = strtol(val, &end, 10);
    static const long max[] = {MAX_LAYERS, MAX_CHANNELS, MAX_CHANNELS, MAX_CONTEXT, MAX_VOCAB, MAX_VOCAB};
    if (!val[0] || *end || val[0] == '+' || v < (k >= 4 ? 2 : 1) || v > max[k])
        return so_err(SO_EINVAL, "--model %s: %s = '%s' is not an integer in [%d, %ld]", spec, key, val,
                      k >= 4 ? 2 : 1, max[k]);
    int *field[] = {&c->layers, &c->heads, &c->channels, &c->context, &c->vocab, &c->padded_vocab};
    *field[k] = (int)v;
    *vp_set |= k == 5;
    return 0;
}

int so_gpt2_parse(const char *name, so_gpt2_config *out)
{
    if (!name)
        return 0;
    const char *colon = strchr(name, ':');
    size_t blen = colon ? (size_t)(colon - name) : strlen(name);
    int b = base_size(name, blen);
    if (b < 0)
        return 0;
    so_gpt2_config c = {sizes[b].layers, sizes[b].heads, sizes[b].channels, 1024, 50257, 0, 0.0f};
    int vp_set = 0, rc = 0;
    for (const char *kv = colon ? colon + 1 : NULL; !rc && kv;) {
        const char *comma = strchr(kv, ',');
        size_t len = comma ? (size_t)(comma - kv) : strlen(kv);
        rc = parse_pair(name, kv, len, &c, &vp_set);
        kv = comma ? comma + 1 : NULL;
    }
    if (rc)
        return rc;
    if (!vp_set)
        c.padded_vocab = padded(c.vocab);
    if (c.channels % c.heads)
        return so_err(SO_EINVAL, "--model %s: C = %d is not divisible by H = %d heads", name, c.channels, c.heads);
    if (c.padded_vocab < c.vocab)
        return so_err(SO_EINVAL, "--model %s: Vp = %d is below V = %d", name, c.padded_vocab, c.vocab);
    *out = c;
    return 1;
}

void so_gpt2_spec(const so_gpt2_config *c, char *buf, size_t len)
{
    int n = snprintf(buf, len, "gpt2:L=%d,H=%d,C=%d,T=%d,V=%d,Vp=%d", c->layers, c->heads, c->channels, c->context,
                     c->vocab, c->padded_vocab);
    if (c->dropout > 0.0f && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ",dropout=%g", (double)c->dropout);
}

/* Dropout after x when the spec asks for it (embedding, residual branches). */
static int maybe_dropout(so_graph *g, int x, float p) { return p > 0.0f ? so_g_dropout(g, x, p) : x; }

/* One block under "transformer.h.<l>": x + attn(ln_1(x)), then + mlp(ln_2(.)).
 * The residual projections start smaller, N(0, (0.02 / sqrt(2L))^2), as in
 * GPT-2 and nanoGPT, so the residual stream's variance does not grow with depth. */
static int block(so_graph *g, int x, int l, const so_gpt2_config *c)
{
    char n[SO_NAME_LEN];
    float proj_std = 0.02f / sqrtf(2.0f * (float)c->layers);
#define NAME(what) (snprintf(n, sizeof n, "transformer.h.%d.%s", l, what), n)
    int a = so_g_layernorm(g, x, NAME("ln_1"));
    a = so_g_linear(g, a, NAME("attn.c_attn"), 3 * c->channels, 1, 0, 0.02f);
    a = so_g_attention(g, a, NAME("attn"), c->heads);
    a = so_g_linear(g, a, NAME("attn.c_proj"), c->channels, 1, 0, proj_std);
    x = so_g_add(g, x, maybe_dropout(g, a, c->dropout));
    int m = so_g_layernorm(g, x, NAME("ln_2"));
    m = so_g_linear(g, m, NAME("mlp.c_fc"), 4 * c->channels, 1, 0, 0.02f);
    m = so_g_gelu(g, m, NAME("mlp.gelu"));
    m = so_g_linear(g, m, NAME("mlp.c_proj"), c->channels, 1, 0, proj_std);
#undef NAME
    return so_g_add(g, x, maybe_dropout(g, m, c->dropout));
}

/* The whole model on the input node 0 of tokens (1, T', 1), ending in the
 * token loss (so so_zoo_build adds none). `classes` is the vocabulary of the
 * data, which must fit the model's. */
int so_zoo_build_gpt2(so_graph *g, const char *model, int classes)
{
    so_gpt2_config c;
    int rc = so_gpt2_parse(model, &c);
    if (rc <= 0)
        return rc < 0 ? rc : so_err(SO_EINVAL, "%s is not a GPT-2 model", model);
    if (classes > c.vocab)
        return so_err(SO_EINVAL, "the data's vocabulary of %d tokens exceeds the model's V = %d (set V in the spec)",
                      classes, c.vocab);
    int emb = so_g_embed(g, 0, "transformer", c.channels, c.padded_vocab, c.context, 0.02f);
    int x = maybe_dropout(g, emb, c.dropout);
    for (int l = 0; l < c.layers; l++)
        x = block(g, x, l, &c);
    x = so_g_layernorm(g, x, "transformer.ln_f");
    x = so_g_linear(g, x, "lm_head", c.padded_vocab, 0, emb, 0.0f);
    return so_g_token_loss(g, x, c.vocab);
}
