#!/usr/bin/env bash
# Image data sets end to end: builds a small tree from Fashion-MNIST
# (bench/image_tree.py: 300 train + 100 val JPEGs in 10 classes, and the same
# as TFRecord shards), then checks
# - the TFRecords against an independent Python reader (struct + CRC32C),
#   and the two formats against each other (`scaleout data ls`);
# - test_imagedata on the tree, with torchvision's eval transform and train
#   crops of the same JPEGs beside it (equal within 1/255);
# - training reads both formats to the same loss, with and without an index,
#   on 2 ranks, after a resume, with --stage-local;
# - bad input: one line and exit 2 (missing tree, empty class directory, no
#   images, CRC mismatch, Example without the fields), a corrupt JPEG skipped
#   with a warning naming it (fatal with --strict-data).
# Usage: image_data.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"
py=/usr/bin/python3
gen="$src/bench/image_tree.py"
unit=${SCALEOUT_TEST_IMAGEDATA:-$(dirname "$bin")/tests/test_imagedata}

if ! $py -c "import PIL, torchvision" 2>/dev/null; then echo "SKIP: python3-pil / torchvision missing"; exit 77; fi
if [ ! -d /usr/share/datasets/fashion-mnist ]; then echo "SKIP: dataset-fashion-mnist missing"; exit 77; fi

t=$tmp/tree
$py "$gen" fmnist "$t" --train-per-class 30 --val-per-class 10 --shards 2 || { echo "FAIL: image_tree.py"; exit 1; }
if "$bin" data ls "$t" 2>&1 | grep -q "without libturbojpeg"; then echo "SKIP: built without libturbojpeg"; exit 77; fi

# ---- the TFRecords: independent reader, then scaleout, then the folder ----
for split in train:train val:validation; do
  s=${split%%:*} f=${split##*:}
  $py "$gen" read-tfrecord "$t"/tfrecord/$f-* | awk '{print $1 - 1, $2, $3}' >"$tmp/py.$s"
  "$bin" data ls "$t/tfrecord" --split $s | awk '{print $1, $2, $3}' >"$tmp/tf.$s"
  "$bin" data ls "$t" --split $s | awk '{print $1, $2, $3}' >"$tmp/folder.$s"
  [ -s "$tmp/py.$s" ] && cmp -s "$tmp/py.$s" "$tmp/tf.$s" && ok || bad "$s: scaleout's TFRecord reader differs from the Python one"
  cmp -s "$tmp/tf.$s" "$tmp/folder.$s" && ok || bad "$s: tfrecord and imagefolder list different images or labels"
done
[ "$(wc -l <"$tmp/py.train")" -eq 300 ] && [ "$(wc -l <"$tmp/py.val")" -eq 100 ] && ok || bad "tree sizes"

# ---- torchvision's output on the same JPEGs, and the unit test on the tree ----
$py "$gen" torchvision-eval "$t/val" "$tmp/eval.f32" 2>/dev/null || bad "torchvision-eval"
IMAGE_TREE=$t "$unit" crops "$tmp/crops.txt" && $py "$gen" torchvision-crop "$t" "$tmp/crops.txt" "$tmp/crops.f32" ||
  bad "torchvision crops"
if IMAGE_TREE=$t TORCH_EVAL=$tmp/eval.f32 TORCH_CROPS=$tmp/crops.f32 "$unit" >"$tmp/unit.log" 2>&1; then ok; else
  bad "test_imagedata on the tree:"; cat "$tmp/unit.log"; fi
grep -E "eval vs torchvision|streamed" "$tmp/unit.log"
grep -q "SKIPPED" "$tmp/unit.log" && bad "test_imagedata skipped tests on the tree"

# ---- training: both formats, the index, 2 ranks, resume, staging ----
train() { "$bin" train --model resnet20 --image-size 32 --batch-size 32 --threads 1 --progress none \
  --decode-threads 2 "$@"; }
loss() { sed -n 's/.*final loss \([0-9.]*\).*/\1/p' "$1"; }
train --dataset imagefolder --data-dir "$t" --epochs 2 >"$tmp/folder.out" 2>&1 || bad "imagefolder run: $(tail -3 "$tmp/folder.out")"
train --dataset tfrecord --data-dir "$t/tfrecord" --epochs 2 >"$tmp/tf.out" 2>&1 || bad "tfrecord run: $(tail -3 "$tmp/tf.out")"
[ -n "$(loss "$tmp/folder.out")" ] && [ "$(loss "$tmp/folder.out")" = "$(loss "$tmp/tf.out")" ] && ok ||
  bad "imagefolder and tfrecord train differently: $(loss "$tmp/folder.out") vs $(loss "$tmp/tf.out")"
grep -q "^data: 576 images decoded" "$tmp/folder.out" && ok || bad "data line: $(grep ^data "$tmp/folder.out")"
"$bin" data index "$t" >/dev/null && [ -f "$t/scaleout.idx" ] && ok || bad "data index"
train --dataset imagefolder --data-dir "$t" --epochs 2 >"$tmp/indexed.out" 2>&1
[ "$(loss "$tmp/indexed.out")" = "$(loss "$tmp/folder.out")" ] && ok || bad "the indexed tree trains differently"
rm -f "$t/scaleout.idx"
# two ranks, a checkpoint mid-epoch, then a resume: the same loss as one run
if [ -x "$mpirun" ] && command -v mpiexec >/dev/null; then
  "$mpirun" -np 2 "$bin" train --model resnet20 --image-size 32 --batch-size 16 --progress none --dataset imagefolder \
    --data-dir "$t" --steps 14 --eval-every -1 >"$tmp/np2.out" 2>&1 || bad "np 2: $(tail -3 "$tmp/np2.out")"
  "$mpirun" -np 2 "$bin" train --model resnet20 --image-size 32 --batch-size 16 --progress none --dataset imagefolder \
    --data-dir "$t" --steps 6 --eval-every -1 --ckpt-every 6 --ckpt-dir "$tmp/ck" >/dev/null 2>&1
  "$mpirun" -np 2 "$bin" train --model resnet20 --image-size 32 --batch-size 16 --progress none --dataset imagefolder \
    --data-dir "$t" --steps 14 --eval-every -1 --ckpt-dir "$tmp/ck" --resume auto >"$tmp/resumed.out" 2>&1
  grep -q "resuming from the checkpoint at step 6" "$tmp/resumed.out" && ok || bad "no resume: $(tail -3 "$tmp/resumed.out")"
  [ -n "$(loss "$tmp/np2.out")" ] && [ "$(loss "$tmp/np2.out")" = "$(loss "$tmp/resumed.out")" ] && ok ||
    bad "resumed run differs: $(loss "$tmp/np2.out") vs $(loss "$tmp/resumed.out")"
fi
mkdir -p "$tmp/stage"
train --dataset tfrecord --data-dir "$t/tfrecord" --epochs 2 --stage-local "$tmp/stage" >"$tmp/stage.out" 2>&1 ||
  bad "stage-local run: $(tail -3 "$tmp/stage.out")"
awk '/^stage-local:/ && $2 > 0 && $(NF-5) > 0 {found = 1} END {exit !found}' "$tmp/stage.out" && ok ||
  bad "stage-local line: $(grep stage "$tmp/stage.out")"
[ -z "$(ls -A "$tmp/stage")" ] && ok || bad "stage-local left files behind"

# ---- bad input ----
expect_usage() {
  local pat=$1; shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local st=$?
  if [ $st -ne 2 ]; then bad "scaleout $* exited $st, want 2: $(cat "$tmp/err")"; return; fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q -- "$pat" "$tmp/err"; then
    bad "scaleout $*: stderr does not say '$pat' in one line: $(cat "$tmp/err")"; return
  fi
  ok
}
r1=(train --model resnet20 --image-size 32 --batch-size 4 --threads 1 --progress none --steps 2 --eval-every -1)
expect_usage "$tmp/nothing" "${r1[@]}" --dataset imagefolder --data-dir "$tmp/nothing"
b=$tmp/bad
mkdir -p "$b/train/a" "$b/train/b" "$b/train/empty" "$b/val/a" "$b/val/b"
cp "$t"/train/bag/000[0-4].jpg "$b/train/a/"
cp "$t"/train/coat/000[0-4].jpg "$b/train/b/"
cp "$t"/val/bag/000[0-4].jpg "$b/val/a/"
cp "$t"/val/coat/000[0-4].jpg "$b/val/b/"
expect_usage "empty: empty class directory" "${r1[@]}" --dataset imagefolder --data-dir "$b"
rmdir "$b/train/empty"
mkdir -p "$b/noimg/train/x" "$b/noimg/val/x"
touch "$b/noimg/train/x/readme.txt"
expect_usage "empty class directory" "${r1[@]}" --dataset imagefolder --data-dir "$b/noimg"
mkdir -p "$b/none/train" "$b/none/val"
expect_usage "no class directories" "${r1[@]}" --dataset imagefolder --data-dir "$b/none"
expect_usage "no TFRecord shards" "${r1[@]}" --dataset tfrecord --data-dir "$b"
# a CRC mismatch in a shard, an Example without the label
mkdir -p "$b/tf"
cp "$t"/tfrecord/* "$b/tf/"
printf '\x55' | dd of="$b/tf/train-00001-of-00002" bs=1 seek=2000 conv=notrunc 2>/dev/null
expect_usage "train-00001-of-00002.*CRC mismatch" "${r1[@]}" --dataset tfrecord --data-dir "$b/tf"
cp "$t"/tfrecord/* "$b/tf/"
$py -c "
import sys; sys.path.insert(0, '$src/bench')
import image_tree as it
ex = it.example([('image/encoded', it.feature_bytes(b'\xff\xd8\xff'))])
open('$b/tf/validation-00000-of-00002', 'ab').write(it.frame(ex))"
expect_usage "validation-00000-of-00002.*without image/class/label" "${r1[@]}" --dataset tfrecord --data-dir "$b/tf"
# a truncated JPEG: skipped with a warning naming it, fatal with --strict-data
head -c 600 "$t/train/bag/0005.jpg" >"$b/train/a/0005.jpg"
train --dataset imagefolder --data-dir "$b" --batch-size 2 --epochs 1 --json "$tmp/skip.json" >"$tmp/skip.out" 2>&1 ||
  bad "a truncated JPEG stopped the run: $(tail -2 "$tmp/skip.out")"
[ "$(grep -c "train/a/0005.jpg: corrupt JPEG.*skipped" "$tmp/skip.out")" -eq 1 ] && ok ||
  bad "no single warning naming the truncated JPEG: $(grep -i warn "$tmp/skip.out")"
grep -q '"skipped": 1' "$tmp/skip.json" && ok || bad "--json does not count the skipped image"
expect_usage "train/a/0005.jpg: corrupt JPEG.*--strict-data" "${r1[@]}" --dataset imagefolder --data-dir "$b" \
  --batch-size 2 --steps 0 --epochs 1 --strict-data

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
