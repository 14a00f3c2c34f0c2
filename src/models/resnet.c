/* ImageNet ResNets as torchvision 0.14 defines them: ResNet-18/34 from
 * BasicBlocks, ResNet-50/101/152 from Bottlenecks in the v1.5 form (stride on the
 * 3x3 conv), with torchvision's module names so tensor names equal the
 * state_dict keys (checked against tests/data/resnet50_keys.txt). */
#include <stdio.h>
#include <string.h>

#include "models/zoo_internal.h"
#include "scaleout/err.h"

static const struct {
    const char *name;
    int bottleneck;   /* 0: BasicBlock (expansion 1), 1: Bottleneck (expansion 4) */
    int blocks[4];    /* per stage layer1..layer4 */
} variants[] = {
    {"resnet18", 0, {2, 2, 2, 2}},
    {"resnet34", 0, {3, 4, 6, 3}},
    {"resnet50", 1, {3, 4, 6, 3}},
    {"resnet101", 1, {3, 4, 23, 3}},
    {"resnet152", 1, {3, 8, 36, 3}},
};

/* Stage widths ("planes") and first-block strides, shared by all variants. */
static const int stage_planes[4] = {64, 128, 256, 512};
static const int stage_stride[4] = {1, 2, 2, 2};

/* Buffers for "<prefix>.<module>": room for the suffix beyond the prefix's
 * SO_NAME_LEN (the graph stores at most SO_NAME_LEN-1 chars; ours are < 24). */
#define NAME_BUF (SO_NAME_LEN + 16)

/* Shortcut of a block at `prefix`: identity when shapes agree, otherwise the
 * projection torchvision calls downsample (1x1 conv with the block's stride, BN). */
static int shortcut(so_graph *g, int in, const char *prefix, int out, int stride)
{
    if (in < 0)
        return in;
    if (stride == 1 && so_graph_node(g, in)->out.c == out)
        return in;
    char conv[NAME_BUF], bn[NAME_BUF];
    snprintf(conv, sizeof conv, "%s.downsample.0", prefix);
    snprintf(bn, sizeof bn, "%s.downsample.1", prefix);
    return so_zoo_conv_bn(g, in, conv, bn, out, 1, stride, 0, 0);
}

/* Appends conv<i>/bn<i> of the block at `prefix`. */
static int unit(so_graph *g, int in, const char *prefix, int i, int out, int k, int stride, int relu)
{
    char conv[NAME_BUF], bn[NAME_BUF];
    snprintf(conv, sizeof conv, "%s.conv%d", prefix, i);
    snprintf(bn, sizeof bn, "%s.bn%d", prefix, i);
    return so_zoo_conv_bn(g, in, conv, bn, out, k, stride, k / 2, relu);
}

int so_zoo_basic_block(so_graph *g, int in, const char *prefix, int planes, int stride)
{
    int x = unit(g, in, prefix, 1, planes, 3, stride, 1);
    x = unit(g, x, prefix, 2, planes, 3, 1, 0);
    /* main path first, then downsample: torchvision's registration order, which
     * is also the order of the state_dict keys */
    return so_g_relu(g, so_g_add(g, x, shortcut(g, in, prefix, planes, stride)));
}

/* Bottleneck v1.5: 1x1 planes, 3x3 planes with the stride, 1x1 4*planes. */
static int bottleneck(so_graph *g, int in, const char *prefix, int planes, int stride)
{
    int x = unit(g, in, prefix, 1, planes, 1, 1, 1);
    x = unit(g, x, prefix, 2, planes, 3, stride, 1);
    x = unit(g, x, prefix, 3, 4 * planes, 1, 1, 0);
    return so_g_relu(g, so_g_add(g, x, shortcut(g, in, prefix, 4 * planes, stride)));
}

int so_zoo_build_resnet(so_graph *g, const char *model, int classes)
{
    int v = -1;
    for (int i = 0; i < (int)(sizeof variants / sizeof variants[0]); i++)
        if (!strcmp(variants[i].name, model))
            v = i;
    if (v < 0)
        return so_err(SO_EINVAL, "no ResNet variant named '%s'", model);
    so_graph_set_torch_init(g, SO_TORCH_INIT_RESNET); /* torchvision's ResNet.__init__ */
    /* stem: conv1 7x7/2, bn1, relu, maxpool 3x3/2 pad 1 (224 -> 112 -> 56) */
    int rc = so_zoo_check_subsample(g, 0, "conv1");
    if (rc)
        return rc;
    int x = so_zoo_conv_bn(g, 0, "conv1", "bn1", 64, 7, 2, 3, 1);
    if ((rc = so_zoo_check_subsample(g, x, "the stem's max pool")))
        return rc;
    x = so_g_maxpool(g, x, 3, 2, 1);
    char prefix[SO_NAME_LEN];
    for (int s = 0; s < 4; s++) {
        snprintf(prefix, sizeof prefix, "layer%d", s + 1);
        if (stage_stride[s] > 1 && (rc = so_zoo_check_subsample(g, x, prefix)))
            return rc;
        for (int b = 0; b < variants[v].blocks[s]; b++) {
            snprintf(prefix, sizeof prefix, "layer%d.%d", s + 1, b);
            int stride = b == 0 ? stage_stride[s] : 1;
            x = variants[v].bottleneck ? bottleneck(g, x, prefix, stage_planes[s], stride)
                                       : so_zoo_basic_block(g, x, prefix, stage_planes[s], stride);
        }
    }
    /* avgpool (global), flatten, fc: dense reads the (C,1,1) map directly */
    return so_g_dense(g, so_g_gap(g, x), "fc", classes);
}
