#!/usr/bin/python3
"""PyTorch twins of the scaleout model zoo (src/models/), with the same structure
and module names, so parameter counts, state_dict keys and throughput compare
one to one. Used by tests/test_torch_models.sh and the PyTorch benchmark.

    /usr/bin/python3 bench/torch_models.py            # "name count" for every zoo model
    /usr/bin/python3 bench/torch_models.py --keys resnet50   # state_dict keys and shapes
    /usr/bin/python3 bench/torch_models.py --keys all        # "model key shape", every model

build() also takes the any-depth CIFAR ResNets (resnet44, preresnet101, ...) by
the rule of src/models/zoo.c (resnet_family below).
"""
import sys

import torch
import torch.nn as nn
import torchvision

# name -> default (C, H, W, classes), in the order of so_zoo_list() (src/models/zoo.c).
DEFAULTS = {
    "mlp": (1, 28, 28, 10),
    "lenet5": (1, 28, 28, 10),
    "smallcnn": (1, 28, 28, 10),
    "alexnet": (3, 224, 224, 1000),
    "vgg11": (3, 224, 224, 1000),
    "vgg16": (3, 224, 224, 1000),
    "vgg19": (3, 224, 224, 1000),
    "resnet20": (3, 32, 32, 10),
    "resnet32": (3, 32, 32, 10),
    "resnet56": (3, 32, 32, 10),
    "resnet110": (3, 32, 32, 10),
    "resnet164": (3, 32, 32, 10),
    "resnet1001": (3, 32, 32, 10),
    "resnet18": (3, 224, 224, 1000),
    "resnet34": (3, 224, 224, 1000),
    "resnet50": (3, 224, 224, 1000),
    "resnet101": (3, 224, 224, 1000),
    "resnet152": (3, 224, 224, 1000),
    "gpt2": (1, 1024, 1, 50257),
    "gpt2-medium": (1, 1024, 1, 50257),
    "gpt2-large": (1, 1024, 1, 50257),
    "gpt2-xl": (1, 1024, 1, 50257),
}

# GPT-2 specs whose counts tests/data/zoo_params.txt also lists: Hugging Face's
# vocabulary of 50257 without llm.c's padding to 50304.
GPT2_SPECS = ["gpt2:Vp=50257", "gpt2-medium:Vp=50257", "gpt2-large:Vp=50257", "gpt2-xl:Vp=50257"]


class MLP(nn.Module):
    """784-1024-1024-10 with ReLU (src/models/mlp.c)."""

    def __init__(self, in_features, num_classes):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.fc3 = nn.Linear(1024, num_classes)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class LeNet5(nn.Module):
    """LeNet-5 for 28x28, modern rendition (src/models/lenet.c): ReLU and 2x2 max
    pooling instead of tanh and trainable subsampling; conv1 pads by 2 so a 28x28
    input plays the role of LeNet's 32x32."""

    def __init__(self, c, h, w, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        h, w = (h // 2 - 4) // 2, (w // 2 - 4) // 2
        self.fc1 = nn.Linear(16 * h * w, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class SmallCNN(nn.Module):
    """Two VGG-style blocks (conv-bn-relu x2, maxpool) of 32 and 64 channels,
    dropout 0.25, dense 128, dropout 0.5, dense classes (src/models/lenet.c)."""

    def __init__(self, c, h, w, num_classes):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.conv2, self.bn2 = nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.conv3, self.bn3 = nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64)
        self.conv4, self.bn4 = nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * (h // 4) * (w // 4), 128)
        self.fc2 = nn.Linear(128, num_classes)
        self.drop1, self.drop2 = nn.Dropout(0.25), nn.Dropout(0.5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        x = torch.relu(self.bn3(self.conv3(x)))
        x = torch.max_pool2d(torch.relu(self.bn4(self.conv4(x))), 2)
        x = self.drop1(torch.flatten(x, 1))
        x = self.drop2(torch.relu(self.fc1(x)))
        return self.fc2(x)


class CifarBlock(nn.Module):
    """He et al. (2016) CIFAR basic block; option B: a 1x1 conv + BN projection
    (named like torchvision's downsample) where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.downsample(x) if self.downsample is not None else x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for CIFAR: conv 16, three stages of n blocks (16/32/64
    channels, strides 1/2/2), global average pool, fc (src/models/resnet_cifar.c)."""

    def __init__(self, depth, c, num_classes):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(c, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        cin = 16
        for i, (cout, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
            blocks = []
            for b in range(n):
                blocks.append(CifarBlock(cin, cout, stride if b == 0 else 1))
                cin = cout
            setattr(self, "layer%d" % (i + 1), nn.Sequential(*blocks))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(torch.mean(x, (2, 3), keepdim=True), 1))


class PreActBottleneck(nn.Module):
    """The residual unit of He et al. (2016b), "Identity Mappings", as their
    reference code (KaimingHe/resnet-1k-layers, resnet-pre-act.lua) builds it:
    BN-ReLU-conv 1x1 (carrying the stride), BN-ReLU-conv 3x3, BN-ReLU-conv 1x1
    to 4*planes, no conv biases. Where the shape changes, bn1-ReLU is shared by
    both paths and the shortcut is a 1x1 conv (downsample.0, no BN) on it."""

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, planes, 1, stride, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, 4 * planes, 1, bias=False)
        self.downsample = None
        if stride != 1 or cin != 4 * planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, 4 * planes, 1, stride, bias=False))

    def forward(self, x):
        a = torch.relu(self.bn1(x))
        y = self.conv1(a)
        y = self.conv2(torch.relu(self.bn2(y)))
        y = self.conv3(torch.relu(self.bn3(y)))
        return y + (self.downsample(a) if self.downsample is not None else x)


class PreActResNet(nn.Module):
    """Pre-activation bottleneck ResNet-(9n+2) for CIFAR (ResNet-164: n = 18,
    ResNet-1001: n = 111): conv 16, three stages of n units (planes 16/32/64,
    outputs 64/128/256, strides 1/2/2), BN-ReLU, global average pool, fc
    (src/models/preresnet.c)."""

    def __init__(self, depth, c, num_classes):
        super().__init__()
        n = (depth - 2) // 9
        self.conv1 = nn.Conv2d(c, 16, 3, 1, 1, bias=False)
        cin = 16
        for i, (planes, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
            blocks = []
            for b in range(n):
                blocks.append(PreActBottleneck(cin, planes, stride if b == 0 else 1))
                cin = 4 * planes
            setattr(self, "layer%d" % (i + 1), nn.Sequential(*blocks))
        self.bn = nn.BatchNorm2d(cin)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.conv1(x))))
        x = torch.relu(self.bn(x))
        return self.fc(torch.flatten(torch.mean(x, (2, 3), keepdim=True), 1))


def resnet_family(name):
    """("cifar"|"preact", depth) for the CIFAR ResNet names, else None: the rule
    of src/models/zoo.c. Listed names first (resnet164/1001: pre-activation);
    then resnetN is the basic-block ResNet when N = 6n+2, the pre-activation
    bottleneck one when N = 9n+2; preresnetN always the latter."""
    for prefix in ("preresnet", "resnet"):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            n = int(name[len(prefix):])
            if prefix == "resnet" and n in (18, 34, 50, 101, 152):
                return None
            if prefix == "resnet" and n not in (164, 1001) and n >= 8 and (n - 2) % 6 == 0:
                return ("cifar", n)
            if n >= 11 and (n - 2) % 9 == 0:
                return ("preact", n)
    return None


def defaults(name):
    """Default (C, H, W, classes) of zoo model `name`, any-depth ResNets included."""
    return DEFAULTS[name] if resnet_family(name) is None or name in DEFAULTS else (3, 32, 32, 10)


def build(name, num_classes=None, input_shape=None):
    """A torch.nn.Module equal in structure and module names to zoo model `name`
    for input (C,H,W) = input_shape (default: the model's) and num_classes."""
    if name.startswith("gpt2"):
        # bench/torch_gpt2.py's nanoGPT-style twin, on the meta device: shapes only
        import torch_gpt2
        return torch_gpt2.GPT(torch_gpt2.Config.parse(name), device="meta")
    fam = resnet_family(name)
    c, h, w, k = defaults(name)
    if input_shape is not None:
        c, h, w = input_shape
    k = num_classes if num_classes is not None else k
    if name == "mlp":
        return MLP(c * h * w, k)
    if name == "lenet5":
        return LeNet5(c, h, w, k)
    if name == "smallcnn":
        return SmallCNN(c, h, w, k)
    if fam is not None:
        return (CifarResNet if fam[0] == "cifar" else PreActResNet)(fam[1], c, k)
    # alexnet, vgg*, resnet18/34/50/101/152: torchvision's own definitions (0.14),
    # which src/models/ mirrors module by module.
    m = getattr(torchvision.models, name)(weights=None, num_classes=k)
    if c != 3:
        raise ValueError("%s: the torchvision twin is defined for 3 input channels" % name)
    return m


def param_count(m):
    return sum(p.numel() for p in m.parameters())


def main(argv):
    if len(argv) >= 2 and argv[0] == "--keys":
        # "--keys all": "model key shape" for every model (tests/data/zoo_keys.txt)
        names = list(DEFAULTS) if argv[1] == "all" else [argv[1]]
        for name in names:
            for key, t in build(name).state_dict().items():
                # lm_head.weight is GPT-2's token table again (tied), one tensor in scaleout
                if not key.endswith("num_batches_tracked") and key != "lm_head.weight":
                    shape = ",".join(str(d) for d in t.shape)
                    print(*(([name] if argv[1] == "all" else []) + [key, shape]))
        return 0
    # default and --check: one "name count" line per model (tests/data/zoo_params.txt)
    for name in list(DEFAULTS) + GPT2_SPECS:
        print(name, param_count(build(name)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
