/* The model zoo: builders for the standard CNNs, with PyTorch/torchvision
 * module names so parameters export under the names PyTorch uses. */
#ifndef SCALEOUT_ZOO_H
#define SCALEOUT_ZOO_H
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

/* GPT-2 names and specs ("gpt2", "gpt2:L=4,H=4,C=128,T=64,V=512", ...):
 * scaleout/gpt2.h. */

/* 0 if so_zoo_find knows `name`, else SO_EINVAL with a message naming the
 * valid forms (for resnet/preresnet followed by a bad depth) or the models. */
int so_zoo_check(const char *name);

/* Builds, fuses (ReLU into producers) and finalizes model `name` for input
 * (c,h,w) and `classes` outputs. Errors name the model and the problem (e.g.
 * an input too small for its pooling). */
int so_zoo_build(const char *name, int c, int h, int w, int classes, so_graph **out);

#endif
