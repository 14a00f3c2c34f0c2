/* Small CNNs for 28x28 inputs: LeNet-5 and "smallcnn", the stronger model the
 * Fashion-MNIST demo uses to reach >= 92% test accuracy in 10 epochs.
 * PyTorch twins with the same module names: bench/torch_models.py. */
#include <stdio.h>

#include "models/zoo_internal.h"

/* LeNet-5 (LeCun et al. 1998), modern rendition, for 1x28x28:
 *   conv1  Conv2d(C, 6, 5, padding=2) -> ReLU -> MaxPool2d(2)   28 -> 28 -> 14
 *   conv2  Conv2d(6, 16, 5)           -> ReLU -> MaxPool2d(2)   14 -> 10 -> 5
 *   fc1    Linear(16*5*5, 120) -> ReLU
 *   fc2    Linear(120, 84)     -> ReLU
 *   fc3    Linear(84, classes)
 * The original used scaled tanh and trainable average subsampling; ReLU and max
 * pooling train faster at the same parameter count (61,706 for 10 classes) and
 * let every activation fuse into its conv/dense. padding=2 makes a 28x28 image
 * play the role of LeNet's 32x32 input. */
int so_zoo_build_lenet5(so_graph *g, const char *model, int classes)
{
    (void)model;
    int x = so_g_relu(g, so_g_conv(g, 0, "conv1", 6, 5, 1, 2, 1));
    x = so_g_maxpool(g, x, 2, 2, 0);
    x = so_g_relu(g, so_g_conv(g, x, "conv2", 16, 5, 1, 0, 1));
    x = so_g_maxpool(g, x, 2, 2, 0);
    x = so_g_relu(g, so_g_dense(g, x, "fc1", 120));
    x = so_g_relu(g, so_g_dense(g, x, "fc2", 84));
    return so_g_dense(g, x, "fc3", classes);
}

/* smallcnn: two VGG-style blocks, then a small classifier:
 *   conv1/bn1 32, conv2/bn2 32, maxpool 2        (3x3 convs, pad 1, no bias: BN follows)
 *   conv3/bn3 64, conv4/bn4 64, maxpool 2        28 -> 14 -> 7
 *   dropout 0.25, fc1 Linear(64*7*7, 128) ReLU, dropout 0.5, fc2 Linear(128, classes)
 * 468,010 parameters for 10 classes. Batchnorm makes it train quickly at the
 * demo's learning rates; the dropouts keep 10 epochs from overfitting. */
static const struct {
    int out;
    int pool; /* 2x2 max pool after this conv */
} smallcnn_convs[] = {{32, 0}, {32, 1}, {64, 0}, {64, 1}};

int so_zoo_build_smallcnn(so_graph *g, const char *model, int classes)
{
    (void)model;
    char conv[SO_NAME_LEN], bn[SO_NAME_LEN];
    int x = 0;
    for (int i = 0; i < (int)(sizeof smallcnn_convs / sizeof smallcnn_convs[0]); i++) {
        snprintf(conv, sizeof conv, "conv%d", i + 1);
        snprintf(bn, sizeof bn, "bn%d", i + 1);
        x = so_zoo_conv_bn(g, x, conv, bn, smallcnn_convs[i].out, 3, 1, 1, 1);
        if (smallcnn_convs[i].pool)
            x = so_g_maxpool(g, x, 2, 2, 0);
    }
    x = so_g_dropout(g, x, 0.25f);
    x = so_g_relu(g, so_g_dense(g, x, "fc1", 128));
    x = so_g_dropout(g, x, 0.5f);
    return so_g_dense(g, x, "fc2", classes);
}
