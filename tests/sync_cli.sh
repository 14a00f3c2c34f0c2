#!/usr/bin/env bash
# Relaxed consistency in `scaleout train --sync` (docs/COMPRESSION.md):
#  - bad input: one line naming the flag, exit 2 (H, the torus against the
#    world, combinations each method cannot run with)
#  - bitwise: local:H's --local-after phase is the synchronous path itself
#  - to 1e-6: local:1 == sync (SGD, with and without momentum: averaging
#    models after a linear step is averaging gradients, up to rounding), at
#    np 2 and 3; gossip:ring on 3 ranks (a complete graph, uniform weights)
#    == sync; diloco:1 with outer lr 1 and momentum 0 == local:1
#  - local:4, diloco:4 and gossip train LeNet-5 near sync's loss, and the
#    bytes they report per step match their formulas (the torus on 9 ranks too)
# Usage: sync_cli.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"
. "$(dirname "$0")/shard_lib.sh" # compare, relerr

data=(--dataset synthetic --synthetic-samples 2048)
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && data=(--dataset fashion-mnist)
common=(train --model lenet5 "${data[@]}" --progress none --seed 5 --batch-size 32)

refuse 1 "the period H 0 is outside" --sync local:0
refuse 1 "the period H .x. is not an integer" --sync diloco:x
refuse 2 "gossip:torus needs the ranks as a rows x cols grid" --sync gossip:torus
refuse 2 "no --compress fp16 with it" --sync local:4 --compress fp16
refuse 2 "--sync-bn" --sync gossip:ring --sync-bn
refuse 2 "use --ckpt-mode scaleout" --sync diloco:4 --ckpt-every 5 --ckpt-dir "$tmp/ck" --ckpt-mode naive
refuse 2 "runs under --strategy dp only: zero2" --sync local:4 --strategy zero2
refuse 1 "--local-after.*--sync local:H" --local-after 5

run() { # run NP NAME args...: trains, dumps parameters to $tmp/NAME.bin, --json in $tmp/NAME.json
  local np=$1 name=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --eval-every -1 --dump-params "$tmp/$name.bin" \
    --json "$tmp/$name.json" "$@" >"$tmp/$name.log" 2>&1 ||
    { bad "np=$np $*: exit $?: $(tail -3 "$tmp/$name.log")"; return 1; }
}
same() { # same A B TOL WHAT
  compare "$1" "$2" "$3" && ok || bad "$4: $(relerr "$1" "$2") relative"
}

# The synchronous phase of post-local SGD is the dp strategy: bitwise.
run 2 sync20 --steps 20 && run 2 after20 --steps 20 --sync local:4 --local-after 20 &&
  same sync20 after20 0 "local:4 --local-after 20 is not bitwise sync over its 20 synchronous steps"

for np in 2 3; do
  for mom in 0 0.9; do
    run $np "sync-$np-$mom" --steps 15 --momentum "$mom" &&
      run $np "local1-$np-$mom" --steps 15 --momentum "$mom" --sync local:1 &&
      same "sync-$np-$mom" "local1-$np-$mom" 1e-6 "np $np momentum $mom: local:1 differs from sync"
  done
done
run 3 gossip3 --steps 15 --momentum 0 --sync gossip:ring &&
  same sync-3-0 gossip3 1e-6 "np 3: gossip:ring (complete graph) differs from sync"
run 2 diloco1 --steps 15 --momentum 0.9 --sync diloco:1 --outer-lr 1 --outer-momentum 0 &&
  same local1-2-0.9 diloco1 1e-6 "diloco:1 with outer lr 1, momentum 0 differs from local:1"

# Training: close to sync's loss over the last 50 of 300 steps; bytes per
# step = the averaged floats x 4 / H (local, diloco), x neighbours (gossip).
long=(--steps 296)
if full_only "training near sync's loss (the equalities above use the same MPI calls)" && run 2 sync "${long[@]}"; then
  run 2 local8 "${long[@]}" --sync local:8
  run 2 diloco8 "${long[@]}" --sync diloco:8 --optimizer adamw --lr 0.001
  run 2 gossip2 "${long[@]}" --sync gossip:ring
  run 3 gossip3r "${long[@]}" --sync gossip:ring
  for name in local8:8:1 diloco8:8:1 gossip2:1:1 gossip3r:1:2; do
    IFS=: read -r n period nbrs <<<"$name"
    /usr/bin/python3 - "$tmp/$n.json" "$tmp/sync.json" "$tmp/sync.bin" "$period" "$nbrs" <<'PY' && ok || bad "$n"
import json, os, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
nparams = os.path.getsize(sys.argv[3]) // 4
period, nbrs = int(sys.argv[4]), int(sys.argv[5])
la, lb = (sum(x["step_loss"][-50:]) / 50 for x in (a, b))
s = a["relaxed_sync"]
want = nparams * 4 * nbrs / period   # LeNet-5 has no batchnorm statistics
print(f"{s['method']}: loss {la:.4f} vs sync {lb:.4f}; {s['bytes_per_step']:.0f} B/step, formula {want:.0f}")
assert abs(s["bytes_per_step"] - want) <= 1e-6 * want, "bytes per step"
assert s["rounds"] == 296 // period and s["steps_between_averages"] == period
assert la < 2.0 and abs(la - lb) < 0.25, "loss"
PY
  done
fi

# The torus on 9 ranks (3 x 3): 4 distinct neighbours, 4 models sent per step.
if run 9 torus9 --steps 3 --batch-size 8 --sync gossip:torus; then
  /usr/bin/python3 - "$tmp/torus9.json" "$tmp/torus9.bin" <<'PY' && ok || bad "gossip:torus on 9 ranks"
import json, os, sys
s = json.load(open(sys.argv[1]))["relaxed_sync"]
want = os.path.getsize(sys.argv[2]) * 4
print(f"gossip:torus np 9: {s['bytes_per_step']:.0f} B/step, formula {want}")
assert s["bytes_per_step"] == want and s["rounds"] == 3
PY
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
