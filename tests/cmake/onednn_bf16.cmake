include_guard(GLOBAL)
# --precision bf16 in the oneDNN backend: per-op BF16 vs the FP32 reference,
# whole models BF16 vs FP32, and the refusal without native BF16 (the _avx2
# run: SCALEOUT_MAX_ISA=avx2 hides AVX512_BF16). Skips its BF16 parts, with a
# message, on CPUs without AVX512_BF16.
so_add_test(test_onednn_bf16 LABELS unit TIMEOUT 300 ISA_CAPS avx2)
