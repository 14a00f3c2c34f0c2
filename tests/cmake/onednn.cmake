# oneDNN backend: agreement with the ref backend and finite-difference gradient checks.
# Again under SCALEOUT_MAX_ISA=avx2 and sse4.2: scaleout's AVX2 kernels (direct
# convolution, Winograd convolution, 2x2 max pooling), the fallbacks below them,
# and oneDNN's AVX2 and SSE4.1 paths (the cap reaches oneDNN too).
so_add_test(test_onednn LABELS unit TIMEOUT 300 ISA_CAPS avx2 sse4.2)
so_add_test(test_onednn_wino LABELS unit TIMEOUT 300 ISA_CAPS avx2 sse4.2)
# scaleout's weight layout loops against oneDNN's reorders, bit for bit.
so_add_test(test_wlayout LABELS unit TIMEOUT 120)
# Not a test: one convolution layer's time per call (bench/conv_layer.c, the
# per-layer figures of docs/PERFORMANCE.md), built beside the tests.
add_executable(conv_layer ${CMAKE_SOURCE_DIR}/bench/conv_layer.c)
target_link_libraries(conv_layer PRIVATE scaleout)
