#!/usr/bin/python3
"""PyTorch peer of `scaleout data bench`: decode + augment throughput of
torchvision 0.14's ImageFolder with PIL through PyTorch 1.13's DataLoader,
the recipe of the ImageNet examples: RandomResizedCrop(size) +
RandomHorizontalFlip + ToTensor + Normalize (or, with --eval, Resize(size *
256/224) + CenterCrop(size)), --workers worker processes, batches of
--batch-size, shuffled. The rate counts from the first batch's arrival (the
workers' start-up is left out), over --images images. Prints one JSON line.

    /usr/bin/python3 bench/torch_data.py DIR --workers 2 --images 1024
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
    ap.add_argument("dir", help="data set root (its train/ split is read)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--eval", action="store_true")
    a = ap.parse_args()

    peer_env.prepare(1)  # one thread per worker process, as DataLoader sets
    import torch
    import torchvision
    import torchvision.transforms as T
    torch.set_num_threads(1)
    if a.eval:
        tf = T.Compose([T.Resize(round(a.image_size * 256 / 224)), T.CenterCrop(a.image_size), T.ToTensor(),
                        T.Normalize(MEAN, STD)])
    else:
        tf = T.Compose([T.RandomResizedCrop(a.image_size), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(os.path.join(a.dir, "train"), transform=tf)
    t0 = time.perf_counter()
    delivered, t1, epochs = 0, None, 0
    while delivered < a.images:
        dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                         persistent_workers=False)
        for x, _ in dl:
            if t1 is None:
                t1, startup = time.perf_counter(), time.perf_counter() - t0
                continue
            delivered += x.shape[0]
            if delivered >= a.images:
                break
        epochs += 1
    t2 = time.perf_counter()
    print(json.dumps({"peer": "torch DataLoader + torchvision ImageFolder (PIL)", "workers": a.workers,
                      "images": delivered, "images_per_sec": delivered / (t2 - t1), "startup_seconds": startup,
                      "transform": "eval" if a.eval else "train", "torch": torch.__version__,
                      "torchvision": torchvision.__version__}))


if __name__ == "__main__":
    main()
