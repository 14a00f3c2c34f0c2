/* The model zoo: builders for the standard CNNs, with PyTorch/torchvision
 * module names so parameters export under the names PyTorch uses. */
#ifndef SCALEOUT_ZOO_H
#define SCALEOUT_ZOO_H
#include <stddef.h>

#include "scaleout/graph.h"

typedef struct {
    const char *name;
    const char *description;
    int c, h, w;       /* default input shape */
    int classes;       /* default number of classes */
} so_zoo_entry;

/* All named models, in display order; *n receives the count. */
const so_zoo_entry *so_zoo_list(int *n);

/* The CIFAR ResNets of any depth, named by form ("resnet<6n+2>",
 * "preresnet<9n+2>"); *n receives the count. A name resolves by this rule:
 * 1. a name in so_zoo_list is that model (resnet18/34/50/101/152 ImageNet,
 *    resnet20/32/56/110 basic-block CIFAR, resnet164/1001 pre-activation);
 * 2. else resnetN with N = 6n+2 (n >= 1) is the basic-block CIFAR ResNet;
 * 3. else resnetN or preresnetN with N = 9n+2 (n >= 1) is the pre-activation
 *    bottleneck ResNet (preresnet164 = resnet164).
 * N has no leading zeros and is at most 100000. */
const so_zoo_entry *so_zoo_families(int *n);

/* The entry of `name`: its so_zoo_list entry, or for a resnetN of rule 2/3
 * (or a GPT-2 spec, below) its family's (whose name is the form); else NULL. */
const so_zoo_entry *so_zoo_find(const char *name);

/* The defaults of `name` into *out: so_zoo_find's entry, with a GPT-2
 * spec's own context (h) and vocabulary (classes). SO_EINVAL as
 * so_zoo_check. */
int so_zoo_resolve(const char *name, so_zoo_entry *out);

/* GPT-2 (src/models/gpt2.c, llm.c's and nanoGPT's model): "gpt2" (124M: L12
 * H12 C768), "gpt2-medium" (L24 H16 C1024), "gpt2-large" (L36 H20 C1280),
 * "gpt2-xl" (L48 H25 C1600), all with context 1024 and vocabulary 50257
 * padded to 50304, and any of them followed by ":key=value,..." with keys
 * L (layers), H (heads), C (channels, divisible by H), T (context), V
 * (vocabulary), Vp (padded vocabulary, >= V; default V rounded up to a
 * multiple of 128, llm.c's rule) and dropout (embedding and residual
 * dropout probability, default 0), e.g. "gpt2:L=4,H=4,C=128,T=64,V=512".
 * The input is (1, T', 1) token ids for a sequence length T' <= T. */
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
 * header must describe m's GPT-2 (the message names the spec that would). */
struct so_model;
int so_gpt2_load_llmc(struct so_model *m, const char *path);
/* The flat parameters of GPT-2 graph g as llm.c's model file. */
int so_gpt2_save_llmc(const so_graph *g, const float *params, const char *path);

/* 0 if so_zoo_find knows `name`, else SO_EINVAL with a message naming the
 * valid forms (for resnet/preresnet followed by a bad depth) or the models. */
int so_zoo_check(const char *name);

/* Builds, fuses (ReLU into producers) and finalizes model `name` for input
 * (c,h,w) and `classes` outputs. Errors name the model and the problem (e.g.
 * an input too small for its pooling). */
int so_zoo_build(const char *name, int c, int h, int w, int classes, so_graph **out);

#endif
