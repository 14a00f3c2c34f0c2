/* GPT-2 interchange with llm.c's model file (train_gpt2.c, gpt2_124M.bin):
 * its 16 parameter tensors are stored tensor-major (all layers' ln1w, then
 * all layers' ln1b, ...), scaleout's flat buffer is node-major (block by
 * block). This file maps one order onto the other by tensor name, and
 * reads and writes the file through the format module (llmc_format.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/llmc_format.h"
#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/model.h"
#include "scaleout/zoo.h"

/* llm.c's tensors in file order: the module under transformer (per layer
 * "h.<l>.<module>" when per_layer) and which of its tensors. */
static const struct {
    const char *module;
    int per_layer;
    const char *suffix;
} llmc_tensors[16] = {
    {"", 0, "wte.weight"},         {"", 0, "wpe.weight"},        {"ln_1", 1, "weight"},
    {"ln_1", 1, "bias"},           {"attn.c_attn", 1, "weight"}, {"attn.c_attn", 1, "bias"},
    {"attn.c_proj", 1, "weight"},  {"attn.c_proj", 1, "bias"},   {"ln_2", 1, "weight"},
    {"ln_2", 1, "bias"},           {"mlp.c_fc", 1, "weight"},    {"mlp.c_fc", 1, "bias"},
    {"mlp.c_proj", 1, "weight"},   {"mlp.c_proj", 1, "bias"},    {"ln_f", 0, "weight"},
    {"ln_f", 0, "bias"},
};

/* The tensor `suffix` of the node named `node`: its offset and size. */
static int find_tensor(const so_graph *g, const char *node, const char *suffix, size_t *off, size_t *count)
{
    for (int i = 1; i < so_graph_size(g); i++) {
        if (strcmp(so_graph_node(g, i)->name, node))
            continue;
        so_tensor_desc t[4];
        int nt = so_node_tensors(g, i, t);
        for (int k = 0; k < nt; k++)
            if (!strcmp(t[k].suffix, suffix)) {
                *off = t[k].off;
                *count = t[k].count;
                return 0;
            }
    }
    return so_err(SO_EINVAL, "the model has no tensor %s.%s (not a GPT-2 graph)", node, suffix);
}

int so_gpt2_llmc_order(const so_graph *g, int layers, size_t *off, size_t *count, int max)
{
    int n = 0;
    for (int k = 0; k < 16; k++)
        for (int l = 0; l < (llmc_tensors[k].per_layer ? layers : 1); l++) {
            char node[SO_NAME_LEN];
            if (llmc_tensors[k].per_layer)
                snprintf(node, sizeof node, "transformer.h.%d.%s", l, llmc_tensors[k].module);
            else
                snprintf(node, sizeof node, "transformer%s%s", llmc_tensors[k].module[0] ? "." : "",
                         llmc_tensors[k].module);
            if (n >= max)
                return so_err(SO_EINVAL, "llm.c order: more than %d tensors", max);
            int rc = find_tensor(g, node, llmc_tensors[k].suffix, &off[n], &count[n]);
            if (rc)
                return rc;
            n++;
        }
    return n;
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

/* Floats of llm.c tensor k per layer (or in all, for tensors without layers). */
static size_t llmc_slice_count(const so_gpt2_config *c, int k)
{
    size_t C = (size_t)c->channels;
    static const int mult[16] = {0, 0, 1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 4, 1, 1, 1}; /* x C, x C again for matrices */
    if (k == 0)
        return (size_t)c->padded_vocab * C;
    if (k == 1)
        return (size_t)c->context * C;
    int matrix = k == 4 || k == 6 || k == 10 || k == 12;
    return (size_t)mult[k] * C * (matrix ? C : 1);
}

/* Where a model's tensor named like llm.c tensor k of layer l is; 0 when
 * the graph has no such tensor. */
static int node_tensor(const so_graph *g, int k, int l, size_t *off, size_t *count)
{
    char node[SO_NAME_LEN];
    if (llmc_tensors[k].per_layer)
        snprintf(node, sizeof node, "transformer.h.%d.%s", l, llmc_tensors[k].module);
    else
        snprintf(node, sizeof node, "transformer%s%s", llmc_tensors[k].module[0] ? "." : "", llmc_tensors[k].module);
    return find_tensor(g, node, llmc_tensors[k].suffix, off, count) == 0;
}

int so_gpt2_load_llmc(so_model *m, const char *path, int part)
{
    so_gpt2_config want, got;
    float *file = NULL;
    size_t nfile = 0;
    int rc = part ? 0 : so_gpt2_graph_config(m->g, &want);
    if (!rc)
        rc = llmc_model_read(path, &got, &file, &nfile);
    if (!rc && !part &&
        (got.layers != want.layers || got.heads != want.heads || got.channels != want.channels ||
         got.context != want.context || got.vocab != want.vocab || got.padded_vocab != want.padded_vocab)) {
        char a[160], b[160];
        so_gpt2_spec(&got, a, sizeof a);
        so_gpt2_spec(&want, b, sizeof b);
        rc = so_err(SO_EINVAL, "%s: the file holds %s, the model is %s (use --model %s)", path, a, b, a);
    }
    size_t at = 0, found = 0;
    for (int k = 0; !rc && k < 16; k++)
        for (int l = 0; !rc && l < (llmc_tensors[k].per_layer ? got.layers : 1); l++) {
            size_t n = llmc_slice_count(&got, k), off, count;
            if (node_tensor(m->g, k, l, &off, &count)) {
                if (count != n)
                    rc = so_err(SO_EINVAL, "%s: tensor %d of layer %d has %zu floats, the model's %zu", path, k, l, n,
                                count);
                else
                    memcpy(m->params + off, file + at, n * sizeof(float));
                found += n;
            } else if (!part)
                rc = so_err(SO_EINVAL, "%s: the model has no tensor for llm.c's tensor %d of layer %d", path, k, l);
            at += n;
        }
    if (!rc && found != m->nparams)
        rc = so_err(SO_EINVAL, "%s: %zu of the model's %zu parameters are in the file", path, found, m->nparams);
    if (!rc)
        so_model_params_changed(m);
    free(file);
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
    if (!rc)
        rc = llmc_model_write(path, &c, file, total);
    free(file);
    free(off);
    free(count);
    return rc;
}
