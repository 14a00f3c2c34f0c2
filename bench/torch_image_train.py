#!/usr/bin/python3
"""PyTorch peer for accuracy on an image tree: torchvision 0.14's ImageFolder
with the ImageNet recipe at --image-size (train: RandomResizedCrop(S,
scale=(--crop-scale, 1)) + RandomHorizontalFlip + ToTensor + Normalize;
eval: Resize(S*256/224) + CenterCrop(S) + ToTensor + Normalize), a model of
bench/torch_models.py, SGD with momentum 0.9, batch 64 (shuffled, the last
partial batch dropped, as scaleout's training loader), cross-entropy (mean),
evaluation after every epoch. Prints one JSON line with every epoch's accuracy.

    /usr/bin/python3 bench/torch_image_train.py /tmp/tree --model resnet20 --image-size 32 --epochs 10 --seed 1
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--crop-scale", type=float, default=0.08)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    peer_env.prepare(a.threads)
    import torch
    import torchvision
    import torchvision.transforms as T
    import torch_models
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    S = a.image_size
    train_tf = T.Compose([T.RandomResizedCrop(S, scale=(a.crop_scale, 1.0)), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize(MEAN, STD)])
    eval_tf = T.Compose([T.Resize(round(S * 256 / 224)), T.CenterCrop(S), T.ToTensor(), T.Normalize(MEAN, STD)])
    tr = torchvision.datasets.ImageFolder(os.path.join(a.dir, "train"), transform=train_tf)
    va = torchvision.datasets.ImageFolder(os.path.join(a.dir, "val"), transform=eval_tf)
    dl = torch.utils.data.DataLoader(tr, batch_size=a.batch, shuffle=True, drop_last=True, num_workers=a.workers,
                                     persistent_workers=a.workers > 0)
    dv = torch.utils.data.DataLoader(va, batch_size=256, num_workers=a.workers)
    model = torch_models.build(a.model, len(tr.classes), (3, S, S))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    accs, t0 = [], time.perf_counter()
    for _ in range(a.epochs):
        model.train()
        for x, y in dl:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for x, y in dv:
                correct += int((model(x).argmax(1) == y).sum())
                total += len(y)
        accs.append(correct / total)
    print(json.dumps({"model": a.model, "seed": a.seed, "accuracies": accs, "best": max(accs),
                      "seconds": time.perf_counter() - t0, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
