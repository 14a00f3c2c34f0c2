/* The model zoo table and so_zoo_build: look the name up, let the family
 * builder append its layers, then add the loss, fuse ReLUs and finalize, with
 * every error message prefixed by the model's name. */
#include "scaleout/zoo.h"
#include "scaleout/gpt2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/zoo_internal.h"
#include "scaleout/err.h"

/* Display order: small Fashion-MNIST models, ImageNet classics, then ResNets. */
static const so_zoo_entry entries[] = {
    {"mlp", "MLP 784-1024-1024-10, ReLU", 1, 28, 28, 10},
    {"lenet5", "LeNet-5 (ReLU, max pooling)", 1, 28, 28, 10},
    {"smallcnn", "2x(conv-bn-relu x2, maxpool) 32/64 ch, dense 128, dropout", 1, 28, 28, 10},
    {"alexnet", "AlexNet (torchvision), 224x224 input", 3, 224, 224, 1000},
    {"vgg11", "VGG-11 (torchvision, no BN)", 3, 224, 224, 1000},
    {"vgg16", "VGG-16 (torchvision, no BN)", 3, 224, 224, 1000},
    {"vgg19", "VGG-19 (torchvision, no BN)", 3, 224, 224, 1000},
    {"resnet20", "ResNet-20 for CIFAR (He et al.), projection shortcuts", 3, 32, 32, 10},
    {"resnet32", "ResNet-32 for CIFAR (He et al.), projection shortcuts", 3, 32, 32, 10},
    {"resnet56", "ResNet-56 for CIFAR (He et al.), projection shortcuts", 3, 32, 32, 10},
    {"resnet110", "ResNet-110 for CIFAR (He et al.), projection shortcuts", 3, 32, 32, 10},
    {"resnet164", "ResNet-164 for CIFAR, pre-activation bottleneck (He et al., Identity Mappings)", 3, 32, 32, 10},
    {"resnet1001", "ResNet-1001 for CIFAR, pre-activation bottleneck (He et al., Identity Mappings)", 3, 32, 32, 10},
    {"resnet18", "ResNet-18 (torchvision)", 3, 224, 224, 1000},
    {"resnet34", "ResNet-34 (torchvision)", 3, 224, 224, 1000},
    {"resnet50", "ResNet-50 (torchvision v1.5)", 3, 224, 224, 1000},
    {"resnet101", "ResNet-101 (torchvision v1.5)", 3, 224, 224, 1000},
    {"resnet152", "ResNet-152 (torchvision v1.5)", 3, 224, 224, 1000},
    {"gpt2", "GPT-2 124M: L12 H12 C768, context 1024, vocabulary 50257 padded to 50304", 1, 1024, 1, 50257},
    {"gpt2-medium", "GPT-2 350M: L24 H16 C1024 (context, vocabulary as gpt2)", 1, 1024, 1, 50257},
    {"gpt2-large", "GPT-2 774M: L36 H20 C1280 (context, vocabulary as gpt2)", 1, 1024, 1, 50257},
    {"gpt2-xl", "GPT-2 1.5B: L48 H25 C1600 (context, vocabulary as gpt2)", 1, 1024, 1, 50257},
};
#define NMODELS ((int)(sizeof entries / sizeof entries[0]))

/* Builder of entries[i]; a family builder reads its variant from the name. */
static const so_zoo_builder builders[] = {
    so_zoo_build_mlp,          so_zoo_build_lenet5,       so_zoo_build_smallcnn,     so_zoo_build_alexnet,
    so_zoo_build_vgg,          so_zoo_build_vgg,          so_zoo_build_vgg,          so_zoo_build_resnet_cifar,
    so_zoo_build_resnet_cifar, so_zoo_build_resnet_cifar, so_zoo_build_resnet_cifar, so_zoo_build_preresnet,
    so_zoo_build_preresnet,    so_zoo_build_resnet,       so_zoo_build_resnet,       so_zoo_build_resnet,
    so_zoo_build_resnet,       so_zoo_build_resnet,       so_zoo_build_gpt2,         so_zoo_build_gpt2,
    so_zoo_build_gpt2,         so_zoo_build_gpt2,
};
_Static_assert(sizeof builders / sizeof builders[0] == sizeof entries / sizeof entries[0],
               "one builder per zoo entry");

/* The CIFAR ResNets of any depth and the GPT-2 specs, for names not in the
 * table (rules in zoo.h). */
static const so_zoo_entry families[] = {
    {"resnet<6n+2>", "ResNet-(6n+2) for CIFAR as resnet20, any n >= 1 (resnet44, resnet1202, ...)", 3, 32, 32, 10},
    {"preresnet<9n+2>", "pre-activation bottleneck ResNet-(9n+2) as resnet164, any n >= 1", 3, 32, 32, 10},
    {"gpt2:<spec>", "GPT-2 of any size: gpt2[-medium|-large|-xl]:L=4,H=4,C=128,T=64,V=512 (keys L H C T V Vp dropout)",
     1, 1024, 1, 50257},
};
static const so_zoo_builder family_builders[] = {so_zoo_build_resnet_cifar, so_zoo_build_preresnet, so_zoo_build_gpt2};
#define NFAMILIES ((int)(sizeof families / sizeof families[0]))
_Static_assert(sizeof family_builders / sizeof family_builders[0] == 3 && sizeof families / sizeof families[0] == 3,
               "one builder per family; builder_of, family_of and so_zoo_check know three");

int so_zoo_name_depth(const char *model)
{
    const char *d = model + strspn(model, "abcdefghijklmnopqrstuvwxyz");
    if (*d < '1' || *d > '9' || strspn(d, "0123456789") != strlen(d) || strlen(d) > 6)
        return 0;
    int n = atoi(d);
    return n <= SO_ZOO_MAX_DEPTH ? n : 0;
}

/* 1 if `name` is `prefix` followed by a digit. */
static int prefixed_depth(const char *name, const char *prefix)
{
    size_t k = strlen(prefix);
    return !strncmp(name, prefix, k) && name[k] >= '0' && name[k] <= '9';
}

/* Index in families[] of a name not in the table, or -1. A GPT-2 spec
 * that does not parse is still the GPT-2 family's (so_zoo_check says why). */
static int family_of(const char *name)
{
    so_gpt2_config c;
    if (so_gpt2_parse(name, &c) != 0)
        return 2;
    int n = so_zoo_name_depth(name), res = prefixed_depth(name, "resnet");
    if (res && n >= 8 && (n - 2) % 6 == 0)
        return 0;
    if ((res || prefixed_depth(name, "preresnet")) && n >= 11 && (n - 2) % 9 == 0)
        return 1;
    return -1;
}

/* The builder of an entry of either table (found by equality: subtracting
 * pointers into different arrays would be undefined). */
static so_zoo_builder builder_of(const so_zoo_entry *e)
{
    for (int i = 0; i < NMODELS; i++)
        if (e == &entries[i])
            return builders[i];
    for (int f = 0; f < NFAMILIES; f++)
        if (e == &families[f])
            return family_builders[f];
    return NULL;
}

const so_zoo_entry *so_zoo_families(int *n)
{
    *n = NFAMILIES;
    return families;
}

const so_zoo_entry *so_zoo_list(int *n)
{
    *n = NMODELS;
    return entries;
}

const so_zoo_entry *so_zoo_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < NMODELS; i++)
        if (!strcmp(entries[i].name, name))
            return &entries[i];
    int f = family_of(name);
    return f < 0 ? NULL : &families[f];
}

int so_zoo_check(const char *name)
{
    so_gpt2_config c;
    int rc = so_gpt2_parse(name, &c);
    if (rc < 0)
        return rc;
    if (so_zoo_find(name))
        return 0;
    if (name && (prefixed_depth(name, "resnet") || prefixed_depth(name, "preresnet")))
        return so_err(SO_EINVAL,
                      "unknown model '%s': resnetN is the CIFAR ResNet with basic blocks when N = 6n+2 (resnet20, "
                      "resnet44, ...), else the pre-activation bottleneck one when N = 9n+2 (resnet47, resnet1001; "
                      "preresnetN for any 9n+2), n >= 1, N <= %d; resnet18/34/50/101/152 are the ImageNet ones",
                      name, SO_ZOO_MAX_DEPTH);
    char known[512] = "";
    for (int i = 0; i < NMODELS; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s, ", entries[i].name);
    return so_err(SO_EINVAL, "unknown model '%s' (known: %s%s, %s, %s)", name ? name : "(null)", known,
                  families[0].name, families[1].name, families[2].name);
}

int so_zoo_resolve(const char *name, so_zoo_entry *out)
{
    int rc = so_zoo_check(name);
    if (rc)
        return rc;
    *out = *so_zoo_find(name);
    so_gpt2_config c;
    if (so_gpt2_parse(name, &c) == 1) {
        out->h = c.context;
        out->classes = c.vocab;
    }
    return 0;
}

/* Re-issues the current message with the model's name in front. */
static int prefixed(int rc, const char *model)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s", so_errmsg());
    return so_err(rc, "%s: %s", model, msg);
}

int so_zoo_build(const char *name, int c, int h, int w, int classes, so_graph **out)
{
    *out = NULL;
    const so_zoo_entry *e = so_zoo_find(name);
    if (!e)
        return so_zoo_check(name);
    int rc = so_zoo_check(name); /* a GPT-2 spec that does not parse */
    if (rc)
        return rc;
    so_gpt2_config gc;
    int lm = so_gpt2_parse(name, &gc) == 1;
    if (lm && c == 1 && h == 1 && w > 1) { /* token datasets' (1, 1, T): the same floats as (1, T, 1) */
        h = w;
        w = 1;
    }
    if (classes < 2 && !(lm && classes == 0)) /* 0: a language model's own vocabulary */
        return so_err(SO_EINVAL, "%s: classes = %d; a classifier needs at least 2", name, classes);
    so_graph *g = so_graph_create(c, h, w);
    if (!g)
        return so_err(SO_ENOMEM, "%s: out of memory", name);
    rc = builder_of(e)(g, name, classes);
    if (rc > 0 && so_graph_node(g, rc)->op != SO_OP_TOKEN_XENT) /* GPT-2 ends in its own loss */
        rc = so_g_loss(g, rc);
    if (rc > 0)
        rc = so_graph_fuse(g);
    if (rc >= 0)
        rc = so_graph_finalize(g);
    if (rc < 0) {
        so_graph_destroy(g);
        return prefixed(rc, name);
    }
    *out = g;
    return 0;
}

/* ---- helpers shared by the families ---- */

int so_zoo_conv_bn(so_graph *g, int in, const char *conv, const char *bn, int out, int k, int stride, int pad,
                   int relu)
{
    int x = so_g_conv(g, in, conv, out, k, stride, pad, 0);
    x = so_g_bn(g, x, bn);
    return relu ? so_g_relu(g, x) : x;
}

int so_zoo_adaptive_avgpool(so_graph *g, int in, int oh, int ow, const char *hint)
{
    if (in < 0)
        return in;
    so_shape s0 = so_graph_input_shape(g), s = so_graph_node(g, in)->out;
    if (s.h == oh && s.w == ow)
        return in;
    if (s.h % oh || s.w % ow)
        return so_err(SO_EINVAL,
                      "input %dx%d: the features end in a %dx%d map, but the classifier's adaptive pool "
                      "needs %dx%d or a whole multiple (use %s input)",
                      s0.h, s0.w, s.h, s.w, oh, ow, hint);
    so_attrs a = {.kh = s.h / oh, .kw = s.w / ow, .sh = s.h / oh, .sw = s.w / ow};
    return so_graph_add(g, SO_OP_AVGPOOL, NULL, &in, 1, &a);
}

int so_zoo_check_subsample(so_graph *g, int in, const char *where)
{
    if (in < 0)
        return in;
    so_shape s0 = so_graph_input_shape(g), s = so_graph_node(g, in)->out;
    if (s.h < 2 || s.w < 2)
        return so_err(SO_EINVAL, "input %dx%d is too small: %s would subsample a %dx%d feature map", s0.h, s0.w,
                      where, s.h, s.w);
    return 0;
}
