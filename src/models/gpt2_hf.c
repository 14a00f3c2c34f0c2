/* GPT-2 as Hugging Face stores it (scaleout/gpt2.h, so_gpt2_save_hf):
 * GPT2LMHeadModel's names are the graph's own, the four matrices of each
 * block are written transposed (transformers' Conv1D keeps (in, out) where
 * torch.nn.Linear and scaleout keep (out, in)), the token table loses llm.c's
 * padding rows, and a config.json beside the file makes the directory one
 * GPT2LMHeadModel.from_pretrained loads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/ckpt.h"
#include "scaleout/err.h"
#include "scaleout/gpt2.h"

/* A block's linear weights: stored by Conv1D in Hugging Face's model. */
static int conv1d(const so_node *nd, const so_tensor_desc *t)
{
    return nd->op == SO_OP_LINEAR && !strcmp(t->suffix, "weight") && !strncmp(nd->name, "transformer.h.", 14);
}

static int write_config(const char *path, const so_gpt2_config *c)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    snprintf(slash ? slash + 1 : dir, sizeof dir - (size_t)(slash ? slash + 1 - dir : 0), "config.json");
    FILE *f = fopen(dir, "w");
    if (!f)
        return so_err(SO_EIO, "cannot create '%s'", dir);
    int ok = fprintf(f,
                     "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                     "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_embd\": %d,\n  \"n_positions\": %d,\n"
                     "  \"n_ctx\": %d,\n  \"vocab_size\": %d,\n  \"activation_function\": \"gelu_new\",\n"
                     "  \"layer_norm_epsilon\": 1e-05,\n  \"embd_pdrop\": 0.0,\n  \"resid_pdrop\": 0.0,\n"
                     "  \"attn_pdrop\": 0.0,\n  \"tie_word_embeddings\": true\n}\n",
                     c->layers, c->heads, c->channels, c->context, c->context, c->vocab) > 0;
    if (fclose(f) != 0 || !ok)
        return so_err(SO_EIO, "error writing '%s'", dir);
    return 0;
}

int so_gpt2_save_hf(const so_graph *g, const float *params, const char *path)
{
    so_gpt2_config c;
    int rc = so_gpt2_graph_config(g, &c);
    if (rc)
        return rc;
    so_st_out *t = calloc((size_t)so_graph_size(g) * 4, sizeof *t);
    if (!t)
        return so_err(SO_ENOMEM, "out of memory");
    int n = 0;
    for (int i = 1; i < so_graph_size(g); i++) {
        so_tensor_desc d[4];
        const so_node *nd = so_graph_node(g, i);
        int k = so_node_tensors(g, i, d);
        for (int e = 0; e < k; e++, n++) {
            so_st_out *o = &t[n];
            snprintf(o->name, sizeof o->name, "%s.%s", nd->name, d[e].suffix);
            o->dtype = "F32";
            o->ndim = d[e].ndim;
            memcpy(o->dims, d[e].dims, sizeof o->dims);
            o->data = params + d[e].off;
            o->bytes = d[e].count * sizeof(float);
            if (!strcmp(o->name, "transformer.wte.weight")) { /* the real vocabulary only */
                o->dims[0] = c.vocab;
                o->bytes = (size_t)c.vocab * (size_t)c.channels * sizeof(float);
            } else if (conv1d(nd, &d[e])) {
                o->dims[0] = d[e].dims[1];
                o->dims[1] = d[e].dims[0];
                o->transposed = 1;
            }
        }
    }
    rc = so_ckpt_safetensors_write(path, t, n);
    free(t);
    return rc ? rc : write_config(path, &c);
}
