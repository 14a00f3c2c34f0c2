/* ResNet-(6n+2) for 32x32 inputs, ResNet-20/32/56/110 and any other depth (He
 * et al. 2016, section 4.2): conv 16, three stages of n = (depth-2)/6 basic blocks with 16/32/64 channels, global
 * average pool, fc. Names follow torchvision's ResNet (conv1, layer2.0.conv1, ...). */
#include <stdio.h>

#include "models/zoo_internal.h"
#include "scaleout/err.h"

/* The paper's option A shortcut (identity + zero-padded channels, subsampled)
 * is parameter-free but needs pad/subsample ops the graph does not have, so
 * the two shape-changing shortcuts (layer2.0, layer3.0) use option B, a 1x1
 * conv + BN projection named downsample.0/1 like torchvision's. That adds
 * 16*32 + 2*32 + 32*64 + 2*64 = 2,752 parameters to every depth: ResNet-20 has
 * 272,474 (paper: 0.27M), -32 466,906, -56 855,770, -110 1,730,714 (10 classes). */
static const int stage_planes[3] = {16, 32, 64};
static const int stage_stride[3] = {1, 2, 2};

int so_zoo_cifar_stages(so_graph *g, int in, int blocks, so_zoo_unit_fn unit, int *out)
{
    int x = in;
    char prefix[SO_NAME_LEN];
    for (int s = 0; s < 3; s++) {
        snprintf(prefix, sizeof prefix, "layer%d", s + 1);
        int rc = stage_stride[s] > 1 ? so_zoo_check_subsample(g, x, prefix) : 0;
        if (rc)
            return rc;
        for (int b = 0; b < blocks; b++) {
            snprintf(prefix, sizeof prefix, "layer%d.%d", s + 1, b);
            x = unit(g, x, prefix, stage_planes[s], b == 0 ? stage_stride[s] : 1);
        }
    }
    *out = x;
    return 0;
}

int so_zoo_build_resnet_cifar(so_graph *g, const char *model, int classes)
{
    int depth = so_zoo_name_depth(model);
    if (depth < 8 || (depth - 2) % 6)
        return so_err(SO_EINVAL, "no CIFAR ResNet named '%s' (depth 6n+2)", model);
    int x = so_zoo_conv_bn(g, 0, "conv1", "bn1", 16, 3, 1, 1, 1);
    int rc = so_zoo_cifar_stages(g, x, (depth - 2) / 6, so_zoo_basic_block, &x);
    return rc ? rc : so_g_dense(g, so_g_gap(g, x), "fc", classes);
}
