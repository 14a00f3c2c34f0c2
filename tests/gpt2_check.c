/* The scaleout side of the check against PyTorch (bench/gpt2_check.py): loads
 * an llm.c model file and token file, trains `steps` steps with AdamW (decay
 * on 2-D tensors, optional clipping by global norm) on llm.c's batch order,
 * and writes what the PyTorch twin compares: the first forward's logits,
 * the first backward's gradients in llm.c's tensor order, every step's loss.
 *
 *   gpt2_check MODEL.bin TOKENS.bin B T STEPS BACKEND OUTDIR LR WD CLIP
 *
 * writes OUTDIR/logits.f32 (B x T x Vp), OUTDIR/grads.f32, OUTDIR/losses.txt. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/model.h"
#include "scaleout/optim.h"
#include "scaleout/zoo.h"

static int die(const char *what)
{
    fprintf(stderr, "gpt2_check: %s: %s\n", what, so_errmsg());
    return 1;
}

/* llm.c's token file: 256 int32 (magic 20240520, version, count), uint16 tokens. */
static uint16_t *read_tokens(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    int32_t h[256];
    uint16_t *t = NULL;
    if (f && fread(h, 4, 256, f) == 256 && h[0] == 20240520 && h[2] > 0 &&
        (t = malloc((size_t)h[2] * sizeof *t)) && fread(t, 2, (size_t)h[2], f) == (size_t)h[2])
        *n = (size_t)h[2];
    else {
        free(t);
        t = NULL;
    }
    if (f)
        fclose(f);
    return t;
}

/* The spec of the model file's header (256 int32: magic, version, maxT, V, L, NH, C, Vp). */
static int model_spec(const char *path, char *spec, size_t len, int *vocab)
{
    FILE *f = fopen(path, "rb");
    int32_t h[256];
    int ok = f && fread(h, 4, 256, f) == 256;
    if (f)
        fclose(f);
    if (!ok)
        return -1;
    so_gpt2_config c = {.context = h[2], .vocab = h[3], .layers = h[4], .heads = h[5], .channels = h[6],
                        .padded_vocab = h[7]};
    so_gpt2_spec(&c, spec, len);
    *vocab = c.vocab;
    return 0;
}

static int write_floats(const char *dir, const char *name, const float *v, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(v, sizeof *v, n, f) == n;
    if (f)
        ok = fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

/* The gradients in llm.c's order, one file. */
static int write_grads(const char *dir, const so_model *m, int layers)
{
    int max = 12 * layers + 4;
    size_t *off = malloc((size_t)max * sizeof *off), *count = malloc((size_t)max * sizeof *count), at = 0;
    float *out = malloc(m->nparams * sizeof *out);
    int n = off && count && out ? so_gpt2_llmc_order(m->g, layers, off, count, max) : -1;
    for (int i = 0; i < n; i++) {
        memcpy(out + at, m->grads + off[i], count[i] * sizeof *out);
        at += count[i];
    }
    int rc = n > 0 && at == m->nparams ? write_floats(dir, "grads.f32", out, at) : -1;
    free(off);
    free(count);
    free(out);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 11) {
        fprintf(stderr, "usage: gpt2_check MODEL.bin TOKENS.bin B T STEPS BACKEND OUTDIR LR WD CLIP\n");
        return 2;
    }
    int B = atoi(argv[3]), T = atoi(argv[4]), steps = atoi(argv[5]), vocab = 0;
    const char *dir = argv[7];
    float lr = (float)atof(argv[8]), wd = (float)atof(argv[9]), clip = (float)atof(argv[10]);
    char spec[256];
    size_t ntok = 0;
    uint16_t *tok = read_tokens(argv[2], &ntok);
    if (model_spec(argv[1], spec, sizeof spec, &vocab) || !tok || ntok < (size_t)steps * B * T + 1) {
        fprintf(stderr, "gpt2_check: cannot read %s or %s (or too few tokens)\n", argv[1], argv[2]);
        return 1;
    }
    so_graph *g;
    so_model *m;
    if (so_zoo_build(spec, 1, T, 1, vocab, &g))
        return die(spec);
    if (so_model_create(g, argv[6], B, 1, &m) || so_gpt2_load_llmc(m, argv[1], 0))
        return die(argv[1]);
    so_gpt2_config cfg;
    so_gpt2_graph_config(m->g, &cfg);
    so_optim_config oc;
    so_optim_defaults(&oc, SO_OPT_ADAMW);
    oc.beta2 = 0.95;
    oc.weight_decay = wd;
    so_optim *opt;
    size_t *decay = NULL;
    if (so_graph_decay_ranges(m->g, &decay, &oc.ndecay_ranges))
        return die("decay ranges");
    oc.decay_ranges = decay; /* AdamW's decay on the 2-D tensors only */
    if (so_optim_create(&oc, m->nparams, &opt))
        return die("optimizer");
    free(decay);
    float *x = malloc((size_t)B * T * sizeof *x), *logits = NULL;
    int32_t *y = malloc((size_t)B * T * sizeof *y);
    char path[1024];
    snprintf(path, sizeof path, "%s/losses.txt", dir);
    FILE *lf = fopen(path, "w");
    if (!x || !y || !lf)
        return 1;
    for (int s = 0; s < steps; s++) {
        const uint16_t *chunk = tok + (size_t)s * B * T;
        for (size_t i = 0; i < (size_t)B * T; i++) {
            x[i] = (float)chunk[i];
            y[i] = chunk[i + 1];
        }
        if (so_model_forward(m, x, y, B, 1))
            return die("forward");
        if (s == 0) {
            size_t nl = (size_t)B * T * cfg.padded_vocab;
            logits = malloc(nl * sizeof *logits);
            if (!logits || so_model_logits(m, logits) || write_floats(dir, "logits.f32", logits, nl))
                return die("logits");
        }
        fprintf(lf, "%.9g\n", (double)m->loss);
        if (so_model_backward(m))
            return die("backward");
        if (s == 0 && write_grads(dir, m, cfg.layers))
            return die("gradients");
        double norm = sqrt(so_optim_sqnorm(m->grads, m->nparams)), coef = clip / (norm + 1e-6);
        if (clip > 0 && coef < 1.0) /* torch.nn.utils.clip_grad_norm_, as the trainer's --clip-norm */
            so_optim_scale(m->grads, m->nparams, (float)coef);
        so_optim_step(opt, m->params, m->grads, lr);
        so_model_params_changed(m);
    }
    fclose(lf);
    so_optim_destroy(opt);
    so_model_destroy(m);
    free(tok);
    free(x);
    free(y);
    free(logits);
    return 0;
}
