/* scaleout/gpt2.h: GPT-2 (src/models/gpt2*.c) beyond building it through the
 * zoo: its configuration and spec strings, interchange with llm.c's model
 * file and Hugging Face's safetensors, and generation with a key/value cache.
 * Errors: 0 or SO_E* with so_errmsg() naming the file or option. */
#ifndef SCALEOUT_GPT2_H
#define SCALEOUT_GPT2_H
#include <stddef.h>
#include <stdint.h>

#include "scaleout/graph.h"
#include "scaleout/model.h"
#include "scaleout/zoo.h"

/* GPT-2 (src/models/gpt2.c, llm.c's and nanoGPT's model): "gpt2" (124M: L12
 * H12 C768), "gpt2-medium" (L24 H16 C1024), "gpt2-large" (L36 H20 C1280),
 * "gpt2-xl" (L48 H25 C1600), all with context 1024 and vocabulary 50257
 * padded to 50304, and any of them followed by ":key=value,..." with keys
 * L (layers), H (heads), C (channels, divisible by H), T (context), V
 * (vocabulary), Vp (padded vocabulary, >= V; default V rounded up to a
 * multiple of 128, llm.c's rule) and dropout (embedding and residual
 * dropout probability, default 0), e.g. "gpt2:L=4,H=4,C=128,T=64,V=512".
 * The input is (1, T', 1) token ids for a sequence length T' <= T
 * (so_zoo_build also takes (1, 1, T'), the token datasets' shape: the same
 * floats), and classes is the data's vocabulary (<= V; 0: V). */
typedef struct {
    int layers, heads, channels, context, vocab, padded_vocab;
    float dropout;
} so_gpt2_config;

/* 1 and *out filled when `name` is a GPT-2 name or spec; 0 when it is not
 * one (another model); SO_EINVAL naming the bad key or value otherwise. */
int so_gpt2_parse(const char *name, so_gpt2_config *out);
/* The spec string that builds exactly c ("gpt2:L=..,H=..,C=..,T=..,V=..,Vp=.."). */
void so_gpt2_spec(const so_gpt2_config *c, char *buf, size_t len);
/* The configuration of a GPT-2 graph (from its embedding, blocks and loss). */
int so_gpt2_graph_config(const so_graph *g, so_gpt2_config *c);

/* llm.c interchange (src/models/gpt2_llmc.c). llm.c stores its 16 tensors
 * tensor-major (wte, wpe, then ln_1.weight of every layer, ...); the flat
 * buffer is block by block. so_gpt2_llmc_order gives, in llm.c's order,
 * each tensor's offset in the flat buffer and its size (up to max
 * entries); it returns how many (12 L + 4), or an error. */
int so_gpt2_llmc_order(const so_graph *g, int layers, size_t *off, size_t *count, int max);
/* Parameters from llm.c's model file (magic 20240326, version 3); the
 * header must describe m's GPT-2 (the message names the spec that would).
 * part: m is a pipeline stage's slice, its tensors are taken by name and
 * the header is checked against the tensors it has. */
int so_gpt2_load_llmc(so_model *m, const char *path, int part);
/* The flat parameters of GPT-2 graph g as llm.c's model file. */
int so_gpt2_save_llmc(const so_graph *g, const float *params, const char *path);

/* Hugging Face's layout as safetensors: GPT2LMHeadModel's names
 * (transformer.h.0.attn.c_attn.weight, ...), the four matrices of a block
 * transposed as its Conv1D stores them (in, out), the token table cut to
 * the real vocabulary (V rows), lm_head left out (tied: Hugging Face ties
 * it on load). Beside `path` a config.json (GPT2Config: n_layer, n_head,
 * n_embd, n_positions, vocab_size), so the directory loads with
 * GPT2LMHeadModel.from_pretrained. */
int so_gpt2_save_hf(const so_graph *g, const float *params, const char *path);

/* Sampling (so_gpt2_generate). */
typedef struct {
    int tokens;                  /* new tokens to draw (stops earlier at the context's end) */
    float temperature;           /* logits / temperature before the softmax; 0: the most likely token */
    int top_k;                   /* draw among the k most likely tokens; 0: all */
    uint64_t seed;
    /* called with each new token; a non-zero return stops (NULL: none) */
    int (*on_token)(void *arg, int32_t token);
    void *arg;
} so_gpt2_sampling;

/* Feeds prompt[0..n) (n >= 1) through m, a GPT-2 built for one token per
 * sample (so_model_decode; sample 0 is used), then draws c->tokens tokens,
 * each fed back through the key/value cache. out (n + c->tokens ids) gets
 * the prompt and the new tokens, *nout how many in all. */
int so_gpt2_generate(so_model *m, const int32_t *prompt, int n, const so_gpt2_sampling *c, int32_t *out, int *nout);

#endif
