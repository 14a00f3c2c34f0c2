#!/usr/bin/env bash
# Fuzz smoke test for the data (IDX, CIFAR, TFRecord, tf.train.Example, the
# JPEG path, llm.c token shards), checkpoint, tuning-table, pipeline-partition,
# predict-profile, --compress, llm.c model-file and tokenizer parsers and the
# TCP transports' handshake and framing:
# configures a clang build of the libFuzzer targets under the ctest binary
# dir, seeds each with a valid tiny
# input, runs it for FUZZ_SECONDS (3) and fails on any crash. Exits 77 (skip)
# where clang or libFuzzer is not available.
set -euo pipefail

src=${SCALEOUT_SOURCE_DIR:?SCALEOUT_SOURCE_DIR is not set}
work=${SCALEOUT_FUZZ_DIR:-$PWD/fuzz-run}
secs=${FUZZ_SECONDS:-3}
build=$work/build

if ! command -v clang >/dev/null; then
  echo "SKIP: clang not found"; exit 77
fi
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' |
     clang -x c -fsanitize=fuzzer - -o "${TMPDIR:-/tmp}/so_fuzz_probe.$$" 2>/dev/null; then
  echo "SKIP: clang cannot link -fsanitize=fuzzer"; exit 77
fi
rm -f "${TMPDIR:-/tmp}/so_fuzz_probe.$$"

mkdir -p "$work"
CC=clang cmake -S "$src" -B "$build" -DSCALEOUT_FUZZ=ON -DSCALEOUT_MPI=OFF -DCMAKE_BUILD_TYPE=Debug >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
targets=(idx cifar prof_json manifest safetensors tuning partition predict_profile tcp_hello tcp_frame tfrecord example
  tokens llmc tokenizer compress_spec)
if [ -f /usr/include/turbojpeg.h ]; then targets+=(jpeg); fi
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}" \
  >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; exit 1; }

# Seed corpora: a valid 2-image 3x2 IDX image file, its label file, the same
# gzipped, and one valid CIFAR record.
rm -rf "$work/corpus"
for target in "${targets[@]}"; do mkdir -p "$work/corpus/$target"; done
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x02abcdefghijkl' >"$work/corpus/idx/images"
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x07\x03' >"$work/corpus/idx/labels"
gzip -c "$work/corpus/idx/images" >"$work/corpus/idx/images.gz"
{ printf '\x06'; head -c 3072 /dev/zero | tr '\0' '\x80'; } >"$work/corpus/cifar/record"
printf '{"format":"scaleout-profile","ranks":[{"rank":0,"totals":{"steps":3,"runtime_s":1.5e-3},"comm":[],"s":"a\\u00e9\\n"}],"x":[true,false,null,-0.5]}' \
  >"$work/corpus/prof_json/profile"

# A valid 2-shard manifest (checksummed trailer) and a valid 2-tensor safetensors file.
body='scaleout-checkpoint 1
model m
model_hash 0123456789abcdef
config_hash 0000000000000001
step 5
epoch 0
epoch_step 5
world 2
nparams 2
nbufs 1
optimizer sgd
nslots 0
optim_steps 5
rep_bytes 8
rank_bytes 36
shards 2
shard 0 0 4 0 1 40 00000000
shard 1 4 4 1 1 40 00000000
config model=m
'
crc=$(printf '%s' "$body" | /usr/bin/python3 -c '
import sys
c = 0xffffffff
for x in sys.stdin.buffer.read():
    c ^= x
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
print("%08x" % (c ^ 0xffffffff))')
# The harness's first byte picks the mode: 0 the text as it is (the checksum
# line under test), 1 a body whose end line the harness writes.
printf '\x00%send %s\n' "$body" "$crc" >"$work/corpus/manifest/valid"
printf '\x01%s' "$body" >"$work/corpus/manifest/body"
hdr='{"a.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a.n":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}'
{ /usr/bin/python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<Q', ${#hdr}))"; printf '%s' "$hdr"
  head -c 16 /dev/zero; } >"$work/corpus/safetensors/valid"

# A v1 tuning table (fits and rules), a v2 one with bands, a v3 one with levels.
printf 'scaleout-tuning v1 p=2 ranks_per_node=0 gamma=1.3e-10\nfit ring alpha=6.2e-07 beta=1.2e-10\n8192 hier\n* ring\n' \
  >"$work/corpus/tuning/v1"
printf 'scaleout-tuning v2 p=4 ranks_per_node=2 gamma=1e-10\n# c\nfit rd alpha=1e-06 beta=2e-10\nband rd max_bytes=65536 alpha=1e-06 beta=2e-10\nband rd max_bytes=* alpha=0 beta=3e-10\n* rd\n' \
  >"$work/corpus/tuning/v2"
printf 'scaleout-tuning v3 p=4 ranks_per_node=2 gamma=1e-10 memory=registered\nfit ring alpha=1e-06 beta=2e-10\nlevel node p=2\nnode fit hier alpha=2e-06 beta=1e-10\nnode band hier max_bytes=65536 alpha=2e-06 beta=1e-10\nnode band hier max_bytes=* alpha=0 beta=1.5e-10\nlevel link p=2\nlink fit ring alpha=5e-05 beta=8e-09\nlink fit rd alpha=4e-05 beta=9e-09\n65536 rd\n* ring\n' \
  >"$work/corpus/tuning/v3"

# Partition lists on ResNet-20 by index and by name (first byte 0), and a
# partition file (first byte 1).
printf '\x000,layer2.0.conv1,layer3.0.conv1' >"$work/corpus/partition/names"
printf '\x00conv1,7,19' >"$work/corpus/partition/indices"
printf '\x010,7,19\n' >"$work/corpus/partition/file"

# Profiles for predict --compute-from (LeNet-5, batch 64): one to read, and
# two it must refuse (a negative and an infinite layer time).
layers='{"name":"conv1","forward_s":0.0003,"backward_s":0.0004},{"name":"maxpool3","forward_s":7e-05,"backward_s":0.0001},{"name":"fc3","forward_s":2e-05,"backward_s":3e-05}'
profile() { printf '{"format":"scaleout-profile","config":{"model":"lenet5","batch":"64"},"ranks":[{"rank":0,"totals":{"steps":2,"useful_s":0.02},"layers":[%s]}]}' "$1"; }
profile "$layers" >"$work/corpus/predict_profile/valid"
profile "${layers/0.0003/-1}" >"$work/corpus/predict_profile/negative"
profile "${layers/0.0003/1e999}" >"$work/corpus/predict_profile/infinite"

# TCP: a valid hello (member 1 to 2 of a ring of 4) with room for a proof and
# a challenge; the old protocol's hello; a stream of two messages (one into
# its posted receive, one early).
mkdir -p "$work/corpus/tcp_hello" "$work/corpus/tcp_frame"
{ printf 'soTH\x00\x01\x00\x01\x00\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x02'; printf 'caller nonce 01\x00'
  printf 'soTP'; head -c 32 /dev/zero; printf 'soTC'; head -c 48 /dev/zero; } >"$work/corpus/tcp_hello/valid"
printf '\x11\x9a\x7c\x5c\x01\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08' >"$work/corpus/tcp_hello/old"
{ printf '\x00\x04\xff\xff\xff\xff\xff\xff'
  printf 'soTM\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04abcd'
  printf 'soTM\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02xy'; } >"$work/corpus/tcp_frame/mesh"

# A TFRecord of two Examples, one Example, and small JPEGs (colour 4:2:0,
# greyscale, progressive) behind the transform-selecting byte.
mkdir -p "$work/corpus/tfrecord" "$work/corpus/example" "$work/corpus/jpeg"
/usr/bin/python3 - "$src/bench" "$work/corpus" <<'PY'
import io, sys
sys.path.insert(0, sys.argv[1])
import image_tree as it
out = sys.argv[2]
ex = [it.example([("image/encoded", it.feature_bytes(b"\xff\xd8\xff\xe0 jpeg")),
                  ("image/class/label", it.feature_int64(k + 1))]) for k in range(2)]
open(out + "/example/one", "wb").write(ex[0])
open(out + "/tfrecord/two", "wb").write(b"".join(it.frame(e) for e in ex))
try:
    from PIL import Image
    img = Image.new("RGB", (37, 23))
    img.putdata([((x * 7) % 256, (y * 11) % 256, (x * y) % 256) for y in range(23) for x in range(37)])
    for name, im, kw in (("rgb", img, {}), ("grey", img.convert("L"), {}), ("prog", img, {"progressive": True})):
        b = io.BytesIO()
        im.save(b, "JPEG", quality=90, **kw)
        for mode in (0, 3):
            open("%s/jpeg/%s%d" % (out, name, mode), "wb").write(bytes([mode]) + b.getvalue())
except ImportError:
    pass
PY

# An llm.c token shard (3 uint16 tokens), an llm.c GPT-2 model file (L=1, C=2,
# maxT=2, V=3, Vp=4: 90 floats), and the tokenizer's three inputs: GPT-2 files
# (every byte's token, "ab", <|endoftext|>; then ff fe and vocab.bpe), llm.c's
# tokenizer file, and text to train on.
mkdir -p "$work/corpus/tokens" "$work/corpus/llmc" "$work/corpus/tokenizer"
/usr/bin/python3 - "$work/corpus" <<'PY'
import json, struct, sys
d = sys.argv[1]
hdr = lambda *v: struct.pack("<256i", *(list(v) + [0] * (256 - len(v))))
open(d + "/tokens/shard", "wb").write(hdr(20240520, 1, 3) + struct.pack("<3H", 7, 65535, 0))
open(d + "/llmc/model", "wb").write(hdr(20240326, 3, 2, 3, 1, 1, 2, 4) + struct.pack("<90f", *[i / 8 for i in range(90)]))
keep = list(range(33, 127)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
alpha, extra = {}, 0
for b in range(256):
    alpha[b] = chr(b) if b in keep else chr(256 + extra)
    extra += b not in keep
enc = {alpha[b]: b for b in range(256)}
enc.update({"ab": 256, "<|endoftext|>": 257})
body = json.dumps(enc, ensure_ascii=False).encode() + b"\xff\xfe" + b"#version: 0.2\na b\n"
open(d + "/tokenizer/gpt2", "wb").write(b"\x00" + body)
toks = [b"Hi", b" there", b"<|endoftext|>"]
open(d + "/tokenizer/llmc", "wb").write(b"\x01" + hdr(20240328, 2, 3, 2) + b"".join(bytes([len(t)]) + t for t in toks))
open(d + "/tokenizer/train", "wb").write(b"\x02" + "the cat's hat, the cat's bat: 12 34 \u00e9t\u00e9\n".encode() * 4)
PY
# --compress specs, one per method and a few refused.
for spec in none fp16 topk:0.01 randk:0.5 qsgd:4:256 sign powersgd:2:10 auto topk:1.5 qsgd:17; do
  printf '%s' "$spec" >"$work/corpus/compress_spec/${spec//:/_}"
done

status=0
for target in "${targets[@]}"; do
  echo "== fuzz_$target for ${secs}s"
  mkdir -p "$work/artifacts/$target"
  if ! (cd "$work" && "$build/fuzz/fuzz_$target" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
          -artifact_prefix="$work/artifacts/$target/" "$work/corpus/$target" >"$work/fuzz_$target.log" 2>&1); then
    echo "FAIL: fuzz_$target found a crash (artifacts in $work/artifacts/$target):"
    tail -n 40 "$work/fuzz_$target.log"
    status=1
  else
    # edges covered (cov) and runs
    grep -E 'DONE|^stat::number_of_executed_units' "$work/fuzz_$target.log" || tail -n 3 "$work/fuzz_$target.log"
  fi
done
exit $status
