# Gradient compression (src/compress): kernels, the --compress parser and the
# compressor over a simulated group; again with the scalar kernels.
include_guard(GLOBAL)
so_add_test(test_compress LABELS unit ISA_CAPS sse4.2)
