/* VGG-11/16/19 (Simonyan & Zisserman, configurations A, D, E) as torchvision
 * 0.14 defines them without batchnorm: 3x3 convs with bias and ReLU, 2x2 max
 * pools, AdaptiveAvgPool2d((7, 7)), classifier 4096-4096-classes with dropout.
 * Module names follow torchvision's Sequential indices (features.N, classifier.N). */
#include <stdio.h>
#include <string.h>

#include "models/zoo_internal.h"
#include "scaleout/err.h"

#define M 0 /* a 2x2 max pool in a configuration */

static const struct {
    const char *name;
    int layers[24]; /* conv output channels or M, ended by -1 */
} configs[] = {
    {"vgg11", {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M, -1}},
    {"vgg16", {64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M, -1}},
    {"vgg19", {64, 64, M, 128, 128, M, 256, 256, 256, 256, M, 512, 512, 512, 512, M, 512, 512, 512, 512, M, -1}},
};

/* Appends the features; torchvision counts 2 Sequential slots per conv (conv,
 * ReLU) and 1 per pool, which gives the features.N names. */
static int features(so_graph *g, const int *layers)
{
    char name[SO_NAME_LEN];
    int x = 0, index = 0;
    for (int i = 0; layers[i] >= 0; i++) {
        if (layers[i] == M) {
            x = so_g_maxpool(g, x, 2, 2, 0);
            index += 1;
            continue;
        }
        snprintf(name, sizeof name, "features.%d", index);
        x = so_g_relu(g, so_g_conv(g, x, name, layers[i], 3, 1, 1, 1));
        index += 2;
    }
    return x;
}

/* 224x224 gives 7x7 after the five pools, where the adaptive pool is the identity. */
int so_zoo_build_vgg(so_graph *g, const char *model, int classes)
{
    int v = -1;
    for (int i = 0; i < (int)(sizeof configs / sizeof configs[0]); i++)
        if (!strcmp(configs[i].name, model))
            v = i;
    if (v < 0)
        return so_err(SO_EINVAL, "no VGG configuration named '%s'", model);
    so_graph_set_torch_init(g, SO_TORCH_INIT_VGG); /* torchvision's VGG._initialize_weights */
    int x = so_zoo_adaptive_avgpool(g, features(g, configs[v].layers), 7, 7, "224x224");
    if (x < 0)
        return x;
    /* classifier: 0 Linear, 1 ReLU, 2 Dropout, 3 Linear, 4 ReLU, 5 Dropout, 6 Linear */
    x = so_g_dropout(g, so_g_relu(g, so_g_dense(g, x, "classifier.0", 4096)), 0.5f);
    x = so_g_dropout(g, so_g_relu(g, so_g_dense(g, x, "classifier.3", 4096)), 0.5f);
    return so_g_dense(g, x, "classifier.6", classes);
}
