/* Private interface between the zoo table (zoo.c) and the model families
 * (one file each). A family builder appends its layers after the input node 0
 * and returns the logits node; zoo.c adds the loss, fuses and finalizes. */
#ifndef SCALEOUT_ZOO_INTERNAL_H
#define SCALEOUT_ZOO_INTERNAL_H
#include "scaleout/graph.h"

/* Builds variant `model` of a family into g (which holds only the input) with
 * `classes` outputs. Returns the logits node (> 0) or a negative error with
 * so_errmsg() set; graph errors are sticky, so builders chain calls unchecked
 * and the first failure comes back at the end. */
typedef int (*so_zoo_builder)(so_graph *g, const char *model, int classes);

int so_zoo_build_mlp(so_graph *g, const char *model, int classes);
int so_zoo_build_lenet5(so_graph *g, const char *model, int classes);
int so_zoo_build_smallcnn(so_graph *g, const char *model, int classes);
int so_zoo_build_alexnet(so_graph *g, const char *model, int classes);
int so_zoo_build_vgg(so_graph *g, const char *model, int classes);
int so_zoo_build_resnet_cifar(so_graph *g, const char *model, int classes);
int so_zoo_build_resnet(so_graph *g, const char *model, int classes);
int so_zoo_build_preresnet(so_graph *g, const char *model, int classes);
/* GPT-2 (gpt2.c): builds the whole model including its token loss, returned. */
int so_zoo_build_gpt2(so_graph *g, const char *model, int classes);

/* The depth N of a name "<letters>N" (resnet20 -> 20, preresnet164 -> 164):
 * N written without leading zeros and at most SO_ZOO_MAX_DEPTH, else 0. */
#define SO_ZOO_MAX_DEPTH 100000
int so_zoo_name_depth(const char *model);

/* ---- helpers shared by the families (zoo.c) ---- */

/* conv (no bias) -> batchnorm [-> relu]: the unit every BN network repeats. */
int so_zoo_conv_bn(so_graph *g, int in, const char *conv, const char *bn, int out, int k, int stride, int pad,
                   int relu);

/* torchvision's AdaptiveAvgPool2d((oh, ow)) where it is a plain pooling: the
 * identity when the map already is oh x ow (VGG and AlexNet at 224x224), an
 * average pool when the map is a whole multiple. Otherwise SO_EINVAL saying
 * which input size the model expects (`hint`, e.g. "224x224"). */
int so_zoo_adaptive_avgpool(so_graph *g, int in, int oh, int ow, const char *hint);

/* A stride-2 layer at node `in` needs a map of at least 2x2: subsampling a 1x1
 * map is legal arithmetic but means the input is far below what the model was
 * designed for. Returns 0, the graph's sticky error, or SO_EINVAL naming `where`. */
int so_zoo_check_subsample(so_graph *g, int in, const char *where);

/* torchvision's BasicBlock under module path `prefix` (e.g. "layer2.0"):
 * conv1 3x3/stride, bn1, relu, conv2 3x3, bn2, + shortcut, relu. The shortcut is
 * the identity, or downsample.0 (1x1 conv/stride) + downsample.1 (BN) when the
 * stride or channel count changes. Shared by resnet.c and resnet_cifar.c. */
int so_zoo_basic_block(so_graph *g, int in, const char *prefix, int planes, int stride);

/* A residual unit under `prefix` (basic block, pre-activation bottleneck). */
typedef int (*so_zoo_unit_fn)(so_graph *g, int in, const char *prefix, int planes, int stride);
/* The three stages of a CIFAR ResNet after its stem at node `in`: `blocks`
 * units each, 16/32/64 planes, the first unit of stages 2 and 3 with stride
 * 2, named layer<s>.<b>. *out = the last unit's node; 0 or an error. */
int so_zoo_cifar_stages(so_graph *g, int in, int blocks, so_zoo_unit_fn unit, int *out);

#endif
