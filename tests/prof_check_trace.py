#!/usr/bin/env python3
"""Checks a Chrome trace-event file written by scaleout:
valid JSON; every process named, with "compute" and "comm" threads (and
"checkpoint I/O" / "checkpoint flush" for a checkpoint's background work); on each
(pid, tid) track the X events nest properly (no partial overlap, so no two
events of one track overlap unless one contains the other) and B/E pairs
balance in order. Prints one line of counts; exit 1 with a message on failure.
Usage: prof_check_trace.py FILE [EXPECTED_RANKS]"""
import collections
import json
import sys

THREADS = {0: "compute", 1: "comm", 2: "checkpoint I/O", 3: "checkpoint flush"}
EPS = 0.0015  # microseconds: ts and dur are printed with 3 decimals


def fail(msg):
    print("trace check FAILED: " + msg)
    sys.exit(1)


def check_nesting(track, events):
    events.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in events:
        start, end = e["ts"], e["ts"] + e["dur"]
        while stack and stack[-1] <= start + EPS:
            stack.pop()
        if stack and end > stack[-1] + EPS:
            fail(f"track {track}: '{e['name']}' [{start}, {end}] overlaps an enclosing event ending at {stack[-1]}")
        stack.append(end)


def main():
    path = sys.argv[1]
    want_ranks = int(sys.argv[2]) if len(sys.argv) > 2 else None
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    procs, threads = {}, collections.defaultdict(dict)
    tracks = collections.defaultdict(list)
    open_be = collections.defaultdict(list)
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            if e["name"] == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                threads[e["pid"]][e["tid"]] = e["args"]["name"]
            continue
        key = (e["pid"], e["tid"])
        if ph == "X":
            if e["dur"] < 0:
                fail(f"negative duration: {e}")
            tracks[key].append(e)
        elif ph == "B":
            open_be[key].append(e)
        elif ph == "E":
            if not open_be[key]:
                fail(f"E without B on track {key}")
            open_be[key].pop()
        else:
            fail(f"unexpected phase {ph!r}")
    for key, stack in open_be.items():
        if stack:
            fail(f"{len(stack)} B events without E on track {key}")
    for key, evs in tracks.items():
        if key[0] not in procs:
            fail(f"pid {key[0]} has no process_name")
        if key[1] not in THREADS or threads[key[0]].get(key[1]) != THREADS[key[1]]:
            fail(f"track {key} is not named {THREADS.get(key[1], 'compute/comm')!r}")
        check_nesting(key, evs)
    if want_ranks is not None and sorted(procs) != list(range(want_ranks)):
        fail(f"processes {sorted(procs)}, want ranks 0..{want_ranks - 1}")
    n = sum(len(v) for v in tracks.values())
    print(f"trace ok: {len(procs)} processes, {len(tracks)} tracks, {n} X events")


main()
