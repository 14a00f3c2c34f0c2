/* Pre-activation bottleneck ResNet-(9n+2) for 32x32 inputs: ResNet-164 and
 * ResNet-1001 of He et al. 2016, "Identity Mappings in Deep Residual Networks",
 * built as their reference code (KaimingHe/resnet-1k-layers, resnet-pre-act.lua)
 * does. Module names follow the PyTorch twin in bench/torch_models.py. */
#include <stdio.h>

#include "models/zoo_internal.h"
#include "scaleout/err.h"

/* The reference's structure, which fixes the parameter count:
 * - stem: one 3x3 conv to 16 channels, no BN (the first unit pre-activates it);
 * - unit: BN-ReLU-conv1 1x1 (carrying the stride, as the reference does),
 *   BN-ReLU-conv2 3x3, BN-ReLU-conv3 1x1 to 4*planes; no conv biases; no
 *   ReLU after the addition;
 * - where the shape changes (the first unit of each stage), bn1-ReLU is shared
 *   by both paths and the shortcut is a bare 1x1 conv (downsample.0, no BN);
 * - after the last stage: BN-ReLU ("bn"), global average pool, fc.
 * ResNet-164 has 1,703,258 parameters and ResNet-1001 10,327,706 (10 classes),
 * as torch counts the twin; without the BN affine parameters 1,679,034 and
 * 10,178,490: the paper's 1.7M and 10.2M (its table counts conv and fc weights). */
#define NAME_BUF (SO_NAME_LEN + 16)

/* bn<i> + ReLU + conv<i> of the unit at `prefix`. */
static int bn_relu_conv(so_graph *g, int in, const char *prefix, int i, int out, int k, int stride)
{
    char conv[NAME_BUF], bn[NAME_BUF];
    snprintf(conv, sizeof conv, "%s.conv%d", prefix, i);
    snprintf(bn, sizeof bn, "%s.bn%d", prefix, i);
    return so_g_conv(g, so_g_relu(g, so_g_bn(g, in, bn)), conv, out, k, stride, k / 2, 0);
}

static int unit(so_graph *g, int in, const char *prefix, int planes, int stride)
{
    if (in < 0)
        return in;
    int cin = so_graph_node(g, in)->out.c;
    if (stride == 1 && cin == 4 * planes) {
        int x = bn_relu_conv(g, in, prefix, 1, planes, 1, 1);
        x = bn_relu_conv(g, x, prefix, 2, planes, 3, 1);
        return so_g_add(g, bn_relu_conv(g, x, prefix, 3, 4 * planes, 1, 1), in);
    }
    char name[NAME_BUF];
    snprintf(name, sizeof name, "%s.bn1", prefix);
    int a = so_g_relu(g, so_g_bn(g, in, name)); /* shared pre-activation */
    snprintf(name, sizeof name, "%s.conv1", prefix);
    int x = so_g_conv(g, a, name, planes, 1, stride, 0, 0);
    x = bn_relu_conv(g, x, prefix, 2, planes, 3, 1);
    x = bn_relu_conv(g, x, prefix, 3, 4 * planes, 1, 1);
    snprintf(name, sizeof name, "%s.downsample.0", prefix);
    return so_g_add(g, x, so_g_conv(g, a, name, 4 * planes, 1, stride, 0, 0));
}

int so_zoo_build_preresnet(so_graph *g, const char *model, int classes)
{
    int depth = so_zoo_name_depth(model);
    if (depth < 11 || (depth - 2) % 9)
        return so_err(SO_EINVAL, "no pre-activation ResNet named '%s' (depth 9n+2)", model);
    int x = so_g_conv(g, 0, "conv1", 16, 3, 1, 1, 0);
    int rc = so_zoo_cifar_stages(g, x, (depth - 2) / 9, unit, &x);
    if (rc)
        return rc;
    x = so_g_relu(g, so_g_bn(g, x, "bn"));
    return so_g_dense(g, so_g_gap(g, x), "fc", classes);
}
