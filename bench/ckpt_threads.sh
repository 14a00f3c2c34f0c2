#!/usr/bin/env bash
# CPU time and minor faults of the checkpoint threads (so-ckpt-write,
# so-ckpt-flush) of one ResNet-50 np-2 run with frequent checkpoints, read from
# /proc/<pid>/task/<tid>/stat while it runs (the last sample before exit).
# For A/B-ing two binaries' background cost; utime/stime are in clock ticks.
# Usage: BIN=build/scaleout STEPS=60 EVERY=4 bench/ckpt_threads.sh   (hold /tmp/scaleout-bench.lock)
set -u
cd "$(dirname "$0")/.."
bin=${BIN:-build/scaleout} local=/dev/shm/so-ckpt-threads shared=/tmp/so-ckpt-threads
rm -rf "$local" "$shared"
scripts/mpirun.sh -np 2 "$bin" train --model resnet50 --dataset synthetic --synthetic-samples 40 --batch-size 2 \
  --steps "${STEPS:-30}" --eval-every -1 --progress none --warmup-steps 0 --ckpt-every "${EVERY:-8}" \
  --ckpt-local "$local" --ckpt-dir "$shared" --ckpt-flush-every 2 --ckpt-keep 2 --ranks-per-node 1 2>&1 |
  grep -E "checkpoints:|trained" &
job=$!
last=""
while kill -0 $job 2>/dev/null; do
  out=""
  for t in /proc/[0-9]*/task/*; do
    c=$(cat "$t/comm" 2>/dev/null) || continue
    case "$c" in
    so-ckpt*)
      s=$(cat "$t/stat" 2>/dev/null) || continue
      set -- ${s#*) }
      out="$out${t#/proc/} $c minflt=$8 utime=${12} stime=${13}"$'\n' ;;
    esac
  done
  [ -n "$out" ] && last=$out
  sleep 0.1
done
wait $job
printf '%s' "$last"
rm -rf "$local" "$shared"
