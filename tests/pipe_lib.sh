# Shared by the pipeline scripts (pipe_cli.sh, pipe_bf16.sh), sourced after
# script_lib.sh: the short synthetic run every case starts from, and `run`,
# which trains it at a world size and keeps the parameters and the --json.
common=(train --dataset synthetic --synthetic-samples 640 --steps 10 --eval-every -1 --progress none --seed 7)

run() { # run NP OUT args...: trains, writes $tmp/OUT.bin (parameters) and $tmp/OUT.json
  local np=$1 out=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --dump-params "$tmp/$out.bin" --json "$tmp/$out.json" \
    "$@" >"$tmp/$out.log" 2>&1 || { bad "np=$np $*: exit $?: $(tail -3 "$tmp/$out.log")"; return 1; }
}
