/* AlexNet as torchvision 0.14 defines it (the "one weird trick" single-tower
 * variant, 61,100,840 parameters for 1000 classes), with torchvision's module
 * names (features.0, classifier.1, ...) so state_dicts map one to one. */
#include <stdio.h>

#include "models/zoo_internal.h"

/* features: conv (index in torchvision's Sequential) -> ReLU [-> MaxPool(3, 2)] */
static const struct {
    int index, out, k, stride, pad, pool;
} convs[] = {
    {0, 64, 11, 4, 2, 1}, {3, 192, 5, 1, 2, 1}, {6, 384, 3, 1, 1, 0}, {8, 256, 3, 1, 1, 0}, {10, 256, 3, 1, 1, 1},
};

/* Input 3x224x224 gives a 6x6 map after features.12 (224 -> 55 -> 27 -> 13 -> 6),
 * so torchvision's AdaptiveAvgPool2d((6, 6)) is the identity; smaller inputs
 * are refused rather than silently changing the classifier's input. */
int so_zoo_build_alexnet(so_graph *g, const char *model, int classes)
{
    (void)model;
    char name[SO_NAME_LEN];
    int x = 0;
    for (int i = 0; i < (int)(sizeof convs / sizeof convs[0]); i++) {
        snprintf(name, sizeof name, "features.%d", convs[i].index);
        x = so_g_relu(g, so_g_conv(g, x, name, convs[i].out, convs[i].k, convs[i].stride, convs[i].pad, 1));
        if (convs[i].pool)
            x = so_g_maxpool(g, x, 3, 2, 0);
    }
    x = so_zoo_adaptive_avgpool(g, x, 6, 6, "224x224");
    if (x < 0)
        return x;
    /* classifier: 0 Dropout, 1 Linear, 2 ReLU, 3 Dropout, 4 Linear, 5 ReLU, 6 Linear */
    x = so_g_dropout(g, x, 0.5f);
    x = so_g_relu(g, so_g_dense(g, x, "classifier.1", 4096));
    x = so_g_dropout(g, x, 0.5f);
    x = so_g_relu(g, so_g_dense(g, x, "classifier.4", 4096));
    return so_g_dense(g, x, "classifier.6", classes);
}
