#!/usr/bin/python3
"""The process environment of the PyTorch peers, set up before torch loads.

Two things a PyTorch user on a CPU node sets up and that must be in place
before the library (or glibc's malloc) reads them:

- Thread counts: Debian's torch runs Linear layers through the libblas.so.3
  alternative (OpenBLAS, OpenMP build, from scripts/install-deps.sh), which
  takes its thread count from the environment, not torch.set_num_threads.
- An allocator that keeps memory: glibc hands every tensor above 32 MiB back
  to the kernel with munmap (and trims the heap), so each step of a large
  model faults its activations in again. On the EPYC VM, ResNet-50 b16 on one
  thread took 2.1-2.5 M page faults per 5 steps and ran at 1.7-2.5 img/s; with
  MALLOC_MMAP_MAX_=0 and no trimming 0.7 M and 4.0-4.5 img/s (ResNet-20 b64:
  267-332 -> 353-386 img/s; LeNet-5 unchanged). The usual CPU-training advice
  (jemalloc/tcmalloc, or these glibc settings) exists for this reason, so the
  peer runs with it. glibc reads them at process start, hence the re-exec.
  SCALEOUT_PEER_MALLOC=default keeps glibc's defaults (to measure the gap).
"""
import os
import sys

KEEP_MEMORY = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def prepare(threads):
    """Call first thing in a peer script, before importing torch. May re-exec
    the script (same interpreter and arguments) so that malloc sees its settings."""
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    if os.environ.get("SCALEOUT_PEER_MALLOC", "keep") == "default":
        return
    if any(os.environ.get(k) != v for k, v in KEEP_MEMORY.items()):
        os.environ.update(KEEP_MEMORY)
        os.execv(sys.executable, [sys.executable] + sys.argv)


# FP32 FLOP per cycle per core by ISA: two FMA pipes x vector lanes x 2.
FLOP_PER_CYCLE = {"avx512": 64, "avx2": 32, "sse4.2": 16}
_ISA_ORDER = ["sse4.2", "avx2", "avx512"]


def _isa_from_name(name):
    """SCALEOUT_MAX_ISA (avx512|avx2|sse4.2) or ONEDNN_MAX_CPU_ISA (SSE41, AVX, AVX2,
    AVX2_VNNI, AVX512_CORE, ..., ALL) as one of _ISA_ORDER; None for no cap."""
    n = (name or "").strip().lower()
    if not n or n in ("all", "default"):
        return None
    if n.startswith("avx512"):
        return "avx512"
    if n.startswith("avx2"):
        return "avx2"
    if n.startswith("sse") or n == "avx":  # AVX without FMA: counted as the SSE baseline
        return "sse4.2"
    return None


def cpu_peak(json_env=None):
    """(isa, clock GHz, peak FP32 GFLOP/s per core) for MFU.

    Prefers the `environment` object of a scaleout --json output (fields `isa`,
    `cpu_clock_ghz`, `peak_gflops_per_core`, after any cap); where it also has
    `fma_gflops_measured` (FMA chains at the ISA's width) and that is clearly
    lower, the measured rate is the peak: some CPUs split wide operations
    (Zen 4 runs AVX-512 at 32 FLOP/cycle, not 64). Otherwise reads
    /proc/cpuinfo: avx512f -> avx512 (64 FLOP/cycle), avx2+fma -> avx2 (32),
    else sse4.2 (16), capped by SCALEOUT_MAX_ISA and ONEDNN_MAX_CPU_ISA (the
    lower wins), at the highest "cpu MHz" listed."""
    env = json_env or {}
    isa, ghz, peak = env.get("isa"), env.get("cpu_clock_ghz"), env.get("peak_gflops_per_core")
    if isa in FLOP_PER_CYCLE and ghz and peak:
        measured = env.get("fma_gflops_measured") or 0
        if 0 < measured < 0.8 * float(peak):
            return isa, float(ghz), float(measured)
        return isa, float(ghz), float(peak)
    flags, mhz = set(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "flags" and not flags:
                    flags = set(val.split())
                elif key == "cpu MHz":
                    mhz.append(float(val))
    except OSError:
        pass
    if isa not in FLOP_PER_CYCLE:
        isa = "avx512" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags else "sse4.2"
        for cap in (_isa_from_name(os.environ.get("SCALEOUT_MAX_ISA")),
                    _isa_from_name(os.environ.get("ONEDNN_MAX_CPU_ISA"))):
            if cap is not None and _ISA_ORDER.index(cap) < _ISA_ORDER.index(isa):
                isa = cap
    if not ghz:
        ghz = max(mhz) / 1000 if mhz else float("nan")
    ghz = float(ghz)
    return isa, ghz, FLOP_PER_CYCLE[isa] * ghz


def blas_cap_env():
    """The ISA cap for the peer's BLAS. ONEDNN_MAX_CPU_ISA caps oneDNN only;
    PyTorch's Linear layers run on OpenBLAS, which picks its kernels from the
    CPU. Under an AVX2 cap (SCALEOUT_MAX_ISA or ONEDNN_MAX_CPU_ISA) the peer
    gets OPENBLAS_CORETYPE=Haswell (AVX2+FMA kernels) unless the environment
    already sets a core type; nothing otherwise."""
    caps = [_isa_from_name(os.environ.get(v)) for v in ("SCALEOUT_MAX_ISA", "ONEDNN_MAX_CPU_ISA")]
    if "avx2" in caps and "sse4.2" not in caps and not os.environ.get("OPENBLAS_CORETYPE"):
        return {"OPENBLAS_CORETYPE": "Haswell"}
    return {}


def peak_line(isa, ghz, gflops):
    """One line naming the peak an MFU figure is divided by."""
    nominal = FLOP_PER_CYCLE[isa] * ghz
    if gflops < 0.8 * nominal:
        return (f"MFU peak: {isa} measured in FMA chains, {gflops:.0f} GFLOP/s per core (FP32; nominal "
                f"{FLOP_PER_CYCLE[isa]} FLOP/cycle x {ghz:.2f} GHz = {nominal:.0f}: this CPU splits wide operations)")
    return (f"MFU peak: {isa}, {FLOP_PER_CYCLE[isa]} FLOP/cycle x {ghz:.2f} GHz = "
            f"{gflops:.0f} GFLOP/s per core (FP32)")


def leave_spawned(out):
    """Ends a spawned rank once its result is queued and every rank is past a
    last barrier: os._exit, without tearing gloo down. torch 1.13's
    ~ProcessGroupGloo, run from DDP's Reducer destructor with the GIL held,
    joins a gloo thread that waits for the GIL: rank 0 then blocks for good
    (seen in tests/gpt2_tta.sh under CI load, about 1 run in 10). The queue's
    feeder thread is flushed first, so the result is in the pipe."""
    if out is not None and hasattr(out, "join_thread"):
        out.close()
        out.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def join_spawned(procs, seconds=60):
    """Waits for spawned ranks whose result is already in hand; one still
    alive after `seconds` is killed (its result is not needed)."""
    for p in procs:
        p.join(timeout=seconds)
        if p.is_alive():
            p.kill()
            p.join()
