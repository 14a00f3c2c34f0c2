# oneDNN backend: agreement with the ref backend and finite-difference gradient checks.
# Again under SCALEOUT_MAX_ISA=avx2 and sse4.2: the AVX-512 kernels' fallbacks
# and oneDNN's AVX2 and SSE4.1 paths (the cap reaches oneDNN too).
so_add_test(test_onednn LABELS unit TIMEOUT 300 ISA_CAPS avx2 sse4.2)
