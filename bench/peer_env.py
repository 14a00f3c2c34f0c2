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
