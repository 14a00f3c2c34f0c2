/* GPT-2 interchange with llm.c's model file (train_gpt2.c, gpt2_124M.bin):
 * its 16 parameter tensors are stored tensor-major (all layers' ln1w, then
 * all layers' ln1b, ...), scaleout's flat buffer is node-major (block by
 * block). This file maps one order onto the other by Hugging Face's tensor
 * names (the graph's own), and reads and writes the file through the shared
 * format module (scaleout/llmc.h, llmc_file.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/llmc.h"
#include "scaleout/model.h"
#include "scaleout/zoo.h"

/* The tensor of g named `name` ("transformer.h.0.ln_1.weight"): its offset
 * and size; 0 when found, SO_EINVAL otherwise. */
static int find_tensor(const so_graph *g, const char *name, size_t *off, size_t *count)
{
    for (int i = 1; i < so_graph_size(g); i++) {
        const char *node = so_graph_node(g, i)->name;
        size_t len = strlen(node);
        if (strncmp(node, name, len) || name[len] != '.')
            continue;
        so_tensor_desc t[4];
        int nt = so_node_tensors(g, i, t);
        for (int k = 0; k < nt; k++)
            if (!strcmp(t[k].suffix, name + len + 1)) {
                *off = t[k].off;
                *count = t[k].count;
                return 0;
            }
    }
    return so_err(SO_EINVAL, "the model has no tensor %s (not a GPT-2 graph)", name);
}

/* The name of llm.c tensor t's slice for layer l. */
static void slice_name(const so_llmc_tensor *t, int l, char *buf, size_t len)
{
    if (t->per_layer)
        snprintf(buf, len, t->hf_name, l);
    else
        snprintf(buf, len, "%s", t->hf_name);
}

static so_llmc_config llmc_config(const so_gpt2_config *c)
{
    return (so_llmc_config){.max_seq_len = c->context, .vocab_size = c->vocab, .padded_vocab_size = c->padded_vocab,
                            .num_layers = c->layers, .num_heads = c->heads, .channels = c->channels};
}

int so_gpt2_llmc_order(const so_graph *g, int layers, size_t *off, size_t *count, int max)
{
    so_gpt2_config c;
    so_llmc_tensor t[SO_LLMC_NTENSORS];
    size_t total;
    int rc = so_gpt2_graph_config(g, &c);
    if (!rc && c.layers != layers)
        rc = so_err(SO_EINVAL, "llm.c order: the graph has %d layers, not %d", c.layers, layers);
    so_llmc_config lc = llmc_config(&c);
    if (!rc)
        rc = so_llmc_layout(&lc, t, &total);
    int n = 0;
    for (int k = 0; !rc && k < SO_LLMC_NTENSORS; k++)
        for (int l = 0; !rc && l < (t[k].per_layer ? layers : 1); l++) {
            char name[SO_NAME_LEN + 32];
            slice_name(&t[k], l, name, sizeof name);
            if (n >= max)
                rc = so_err(SO_EINVAL, "llm.c order: more than %d tensors", max);
            else if (!(rc = find_tensor(g, name, &off[n], &count[n])))
                n++;
        }
    return rc ? rc : n;
}

int so_gpt2_graph_config(const so_graph *g, so_gpt2_config *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 1; i < so_graph_size(g); i++) {
        const so_node *nd = so_graph_node(g, i);
        if (nd->op == SO_OP_EMBED) {
            c->channels = nd->a.out;
            c->padded_vocab = nd->a.vocab;
            c->context = nd->a.ctx;
        } else if (nd->op == SO_OP_ATTENTION) {
            c->heads = nd->a.heads;
            c->layers++;
        } else if (nd->op == SO_OP_TOKEN_XENT)
            c->vocab = nd->a.vocab;
        else if (nd->op == SO_OP_DROPOUT && nd->a.p > c->dropout)
            c->dropout = nd->a.p;
    }
    if (!c->channels || !c->layers || !c->vocab)
        return so_err(SO_EINVAL, "not a GPT-2 graph (no embedding, attention or token loss)");
    return 0;
}

/* The (offset, count) list of g in llm.c's order; *n entries, caller frees both. */
static int order_of(const so_graph *g, const so_gpt2_config *c, size_t **off, size_t **count, int *n)
{
    int max = 16 * c->layers + 16;
    *off = malloc((size_t)max * sizeof **off);
    *count = malloc((size_t)max * sizeof **count);
    if (!*off || !*count)
        return so_err(SO_ENOMEM, "out of memory");
    *n = so_gpt2_llmc_order(g, c->layers, *off, *count, max);
    return *n < 0 ? *n : 0;
}

int so_gpt2_load_llmc(so_model *m, const char *path, int part)
{
    so_gpt2_config want, got;
    so_llmc_model *f = NULL;
    int rc = part ? 0 : so_gpt2_graph_config(m->g, &want);
    if (!rc)
        rc = so_llmc_read(path, &f);
    if (!rc)
        got = (so_gpt2_config){.layers = f->cfg.num_layers, .heads = f->cfg.num_heads, .channels = f->cfg.channels,
                               .context = f->cfg.max_seq_len, .vocab = f->cfg.vocab_size,
                               .padded_vocab = f->cfg.padded_vocab_size};
    if (!rc && !part &&
        (got.layers != want.layers || got.heads != want.heads || got.channels != want.channels ||
         got.context != want.context || got.vocab != want.vocab || got.padded_vocab != want.padded_vocab)) {
        char a[160], b[160];
        so_gpt2_spec(&got, a, sizeof a);
        so_gpt2_spec(&want, b, sizeof b);
        rc = so_err(SO_EINVAL, "%s: the file holds %s, the model is %s (use --model %s)", path, a, b, a);
    }
    size_t found = 0;
    for (int k = 0; !rc && k < SO_LLMC_NTENSORS; k++)
        for (int l = 0; !rc && l < (f->t[k].per_layer ? got.layers : 1); l++) {
            size_t n, off, count;
            const float *src = so_llmc_slice(f, k, l, &n);
            char name[SO_NAME_LEN + 32];
            slice_name(&f->t[k], l, name, sizeof name);
            if (find_tensor(m->g, name, &off, &count)) {
                if (!part) /* a pipeline stage holds only some of the tensors */
                    rc = so_err(SO_EINVAL, "%s: the model has no tensor %s", path, name);
                continue;
            }
            if (count != n)
                rc = so_err(SO_EINVAL, "%s: %s has %zu floats, the model's %zu", path, name, n, count);
            else
                memcpy(m->params + off, src, n * sizeof(float));
            so_llmc_release(f, src + n); /* in file order: what is copied leaves memory */
            found += n;
        }
    if (!rc && found != m->nparams)
        rc = so_err(SO_EINVAL, "%s: %zu of the model's %zu parameters are in the file", path, found, m->nparams);
    if (!rc)
        so_model_params_changed(m);
    so_llmc_free(f);
    return rc;
}

int so_gpt2_save_llmc(const so_graph *g, const float *params, const char *path)
{
    so_gpt2_config c;
    size_t *off = NULL, *count = NULL, total = 0;
    int n = 0;
    int rc = so_gpt2_graph_config(g, &c);
    if (!rc)
        rc = order_of(g, &c, &off, &count, &n);
    for (int i = 0; !rc && i < n; i++)
        total += count[i];
    float *file = rc ? NULL : malloc(total * sizeof *file);
    if (!rc && !file)
        rc = so_err(SO_ENOMEM, "out of memory for %zu parameters", total);
    size_t at = 0;
    for (int i = 0; !rc && i < n; i++) {
        memcpy(file + at, params + off[i], count[i] * sizeof(float));
        at += count[i];
    }
    so_llmc_config lc = llmc_config(&c);
    if (!rc)
        rc = so_llmc_write(path, &lc, file, total);
    free(file);
    free(off);
    free(count);
    return rc;
}
