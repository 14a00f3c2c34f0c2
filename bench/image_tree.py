#!/usr/bin/python3
"""Builds ImageNet-style test data without downloading anything, and reads
TFRecords back with a reader of its own (struct + a CRC32C table), so
scaleout's reader is checked against an independent implementation.

    image_tree.py fmnist OUT [--train-per-class 30] [--val-per-class 10] [--shards 2]
        Fashion-MNIST (/usr/share/datasets/fashion-mnist) items upscaled to
        40..96 pixels a side (aspect ratios vary), coloured on a coloured
        background, as quality-90 JPEGs in torchvision's layout,
        OUT/{train,val}/<class>/<n>.jpg, and the same images as
        tf_cnn_benchmarks-style TFRecords, OUT/tfrecord/{train,validation}-0000k-of-0000n,
        records in the folder's order (classes sorted by name, files sorted),
        labels 1-based (1 + the class's index in sorted order), as in the
        ImageNet shards.
    image_tree.py imagenet OUT [--count 200] [--classes 10]
        ~500x375 quality-90 JPEGs with photographic detail (tiled, upscaled
        and coloured Fashion-MNIST items on gradients with grain), ~110 KB
        each like ImageNet's, for the throughput benchmarks.
    image_tree.py many OUT --count 100000 [--classes 1000] --from DIR
        A tree of --count files (train/ and a tenth as many in val/) in
        --classes class directories, hard links to the JPEGs of DIR/train:
        the start-up benchmark's tree of ImageNet's file count.
    image_tree.py read-tfrecord FILE...
        One line per record: "label crc32c(image/encoded) bytes" (the independent
        reader; `scaleout data ls` prints the same columns).
    image_tree.py torchvision-eval DIR OUT.f32 [--size 224]
        torchvision 0.14's eval transform (Resize(size*256/224) + CenterCrop +
        ToTensor + Normalize(ImageNet)) of every image of DIR (ImageFolder
        order), as raw float32 NCHW, for the equality test.
    image_tree.py torchvision-crop ROOT CROPS OUT.f32 [--size 224]
        The same for train crops given as "file top left height width flip"
        lines, file relative to ROOT (F.resized_crop + hflip + ToTensor + Normalize).
"""
import argparse
import gzip
import os
import random
import struct
import sys

CLASSES = ["tshirt_top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle_boot"]
FMNIST = "/usr/share/datasets/fashion-mnist"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def idx(path):
    raw = gzip.open(path).read()
    if struct.unpack(">I", raw[:4])[0] == 0x803:
        n, h, w = struct.unpack(">III", raw[4:16])
        return [raw[16 + i * h * w:16 + (i + 1) * h * w] for i in range(n)], (h, w)
    n = struct.unpack(">I", raw[4:8])[0]
    return list(raw[8:8 + n]), None


# ---- CRC32C and TFRecord framing (written from the format's definition) ----
_T = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _T.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload):
    n = struct.pack("<Q", len(payload))
    return n + struct.pack("<I", masked(n)) + payload + struct.pack("<I", masked(payload))


# ---- protobuf: just what tf.train.Example needs ----
def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def ld(field, payload):  # length-delimited field
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def feature_bytes(v):
    return ld(1, ld(1, v))  # Feature.bytes_list(1) { value(1) }


def feature_int64(v):
    return ld(3, ld(1, varint(v)))  # Feature.int64_list(3) { packed value(1) }


def example(features):
    body = b"".join(ld(1, ld(1, k.encode()) + ld(2, f)) for k, f in features)  # map entries
    return ld(1, body)  # Example.features(1)


def read_varint(buf, i):
    v, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def parse_fields(buf):
    i, out = 0, []
    while i < len(buf):
        key, i = read_varint(buf, i)
        wt = key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        else:
            raise ValueError("wire type %d" % wt)
        out.append((key >> 3, wt, v))
    return out


def decode_example(rec):
    feats = {}
    for f, _, feat_map in parse_fields(rec):
        if f != 1:
            continue
        for g, _, entry in parse_fields(feat_map):
            if g != 1:
                continue
            kv = dict((h, v) for h, _, v in parse_fields(entry))
            feats[kv[1].decode()] = parse_fields(kv[2])
    image = [v for f, _, lst in feats["image/encoded"] if f == 1 for h, _, v in parse_fields(lst) if h == 1][0]
    label = None
    for f, _, lst in feats["image/class/label"]:
        for h, wt, v in parse_fields(lst):
            if h == 1:
                label = v if wt == 0 else read_varint(v, 0)[0]
    return image, label


def read_tfrecord(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        n = struct.unpack("<Q", data[i:i + 8])[0]
        if struct.unpack("<I", data[i + 8:i + 12])[0] != masked(data[i:i + 8]):
            raise ValueError("%s: length CRC mismatch at %d" % (path, i))
        payload = data[i + 12:i + 12 + n]
        if struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] != masked(payload):
            raise ValueError("%s: data CRC mismatch at %d" % (path, i))
        yield payload
        i += 16 + n


# ---- the trees ----
def colourise(grey, size, rnd):
    from PIL import Image
    img = Image.frombytes("L", (28, 28), grey).resize(size, Image.BICUBIC)
    fg = tuple(rnd.randrange(256) for _ in range(3))
    bg = tuple(rnd.randrange(256) for _ in range(3))
    return Image.composite(Image.new("RGB", size, fg), Image.new("RGB", size, bg), img)


def write_split(out, split, tf_name, items, shards, rnd):
    order = sorted(range(len(CLASSES)), key=lambda k: CLASSES[k])  # folder order: class names sorted
    records = []
    for label in order:
        d = os.path.join(out, split, CLASSES[label])
        os.makedirs(d, exist_ok=True)
        for n, grey in enumerate(items[label]):
            size = (rnd.randrange(40, 97), rnd.randrange(40, 97))
            path = os.path.join(d, "%04d.jpg" % n)
            colourise(grey, size, rnd).save(path, quality=90)
            jpeg = open(path, "rb").read()
            feats = [("image/encoded", feature_bytes(jpeg)), ("image/format", feature_bytes(b"JPEG")),
                     ("image/class/label", feature_int64(1 + order.index(label))),
                     ("image/class/text", feature_bytes(CLASSES[label].encode())),
                     ("image/height", feature_int64(size[1])), ("image/width", feature_int64(size[0])),
                     ("image/filename", feature_bytes(path.encode()))]
            records.append(frame(example(feats)))
    tdir = os.path.join(out, "tfrecord")
    os.makedirs(tdir, exist_ok=True)
    per = (len(records) + shards - 1) // shards
    for s in range(shards):
        with open(os.path.join(tdir, "%s-%05d-of-%05d" % (tf_name, s, shards)), "wb") as f:
            f.write(b"".join(records[s * per:(s + 1) * per]))


def cmd_fmnist(a):
    rnd = random.Random(a.seed)
    for split, tf_name, src, per in (("train", "train", "train", a.train_per_class),
                                     ("val", "validation", "t10k", a.val_per_class)):
        images, _ = idx(os.path.join(FMNIST, src + "-images-idx3-ubyte.gz"))
        labels, _ = idx(os.path.join(FMNIST, src + "-labels-idx1-ubyte.gz"))
        items = [[] for _ in CLASSES]
        for img, lab in zip(images, labels):
            if len(items[lab]) < per:
                items[lab].append(img)
        write_split(a.out, split, tf_name, items, a.shards, rnd)


def cmd_imagenet(a):
    import numpy as np
    from PIL import Image
    images, _ = idx(os.path.join(FMNIST, "train-images-idx3-ubyte.gz"))
    rnd = np.random.default_rng(a.seed)
    W, H = 500, 375
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    for k in range(a.count):
        c0, c1 = rnd.uniform(0, 255, 3), rnd.uniform(0, 255, 3)
        t = ((xx * rnd.uniform(-1, 1) + yy * rnd.uniform(-1, 1)) / (W + H) + 0.5)[..., None]
        canvas = c0 * (1 - t) + c1 * t
        for _ in range(int(rnd.integers(6, 14))):  # items at several scales, partly overlapping
            s = int(rnd.integers(60, 260))
            g = np.asarray(Image.frombytes("L", (28, 28), images[int(rnd.integers(len(images)))])
                           .resize((s, s), Image.BICUBIC), dtype=np.float32)[..., None] / 255
            y, x = int(rnd.integers(-s // 3, H - s // 2)), int(rnd.integers(-s // 3, W - s // 2))
            ys, xs = slice(max(y, 0), min(y + s, H)), slice(max(x, 0), min(x + s, W))
            gs = g[ys.start - y:ys.stop - y, xs.start - x:xs.stop - x]
            canvas[ys, xs] = canvas[ys, xs] * (1 - gs) + rnd.uniform(0, 255, 3) * gs
        canvas += rnd.normal(0, a.grain, (H, W, 1)) + rnd.normal(0, a.grain / 2, (H, W, 3))
        d = os.path.join(a.out, "train", "c%02d" % (k % a.classes))
        os.makedirs(d, exist_ok=True)
        Image.fromarray(np.clip(canvas, 0, 255).astype(np.uint8)).save(os.path.join(d, "%05d.jpg" % k), quality=90)


def cmd_many(a):
    src = sorted(os.path.join(r, f) for r, _, fs in os.walk(os.path.join(a.src, "train")) for f in fs)
    for split, n in (("train", a.count), ("val", max(a.count // 10, a.classes))):
        for c in range(a.classes):
            os.makedirs(os.path.join(a.out, split, "n%08d" % c), exist_ok=True)
        for k in range(n):
            c = k % a.classes
            os.link(src[k % len(src)], os.path.join(a.out, split, "n%08d" % c, "n%08d_%d.JPEG" % (c, k)))


def cmd_read_tfrecord(a):
    for path in a.files:
        for rec in read_tfrecord(path):
            image, label = decode_example(rec)
            print(label, "%08x" % crc32c(image), len(image))


def to_tensor_norm(img):
    import torchvision.transforms as T
    return T.Normalize(MEAN, STD)(T.ToTensor()(img))


def cmd_torchvision_eval(a):
    import torch
    import torchvision
    import torchvision.transforms as T
    tf = T.Compose([T.Resize(round(a.size * 256 / 224)), T.CenterCrop(a.size), T.ToTensor(), T.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(a.dir, transform=tf)
    with open(a.out, "wb") as f:
        for x, _ in ds:
            f.write(x.contiguous().numpy().astype("float32").tobytes())
    print(len(ds), "images", file=sys.stderr)
    del torch


def cmd_torchvision_crop(a):
    import torchvision.transforms.functional as F
    from PIL import Image
    with open(a.out, "wb") as f:
        for line in open(a.crops):
            name, rest = line.split(None, 1)
            img = Image.open(os.path.join(a.root, name)).convert("RGB")
            top, left, h, w, flip = (int(v) for v in rest.split())
            x = F.resized_crop(img, top, left, h, w, [a.size, a.size], F.InterpolationMode.BILINEAR)
            if flip:
                x = F.hflip(x)
            f.write(to_tensor_norm(x).contiguous().numpy().astype("float32").tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fmnist")
    p.add_argument("out")
    p.add_argument("--train-per-class", type=int, default=30)
    p.add_argument("--val-per-class", type=int, default=10)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("imagenet")
    p.add_argument("out")
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--grain", type=float, default=18.0)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("many")
    p.add_argument("out")
    p.add_argument("--count", type=int, default=100000)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--from", dest="src", required=True)
    p = sub.add_parser("read-tfrecord")
    p.add_argument("files", nargs="+")
    p = sub.add_parser("torchvision-eval")
    p.add_argument("dir")
    p.add_argument("out")
    p.add_argument("--size", type=int, default=224)
    p = sub.add_parser("torchvision-crop")
    p.add_argument("root")
    p.add_argument("crops")
    p.add_argument("out")
    p.add_argument("--size", type=int, default=224)
    a = ap.parse_args()
    {"fmnist": cmd_fmnist, "imagenet": cmd_imagenet, "many": cmd_many, "read-tfrecord": cmd_read_tfrecord,
     "torchvision-eval": cmd_torchvision_eval, "torchvision-crop": cmd_torchvision_crop}[a.cmd](a)


if __name__ == "__main__":
    main()
