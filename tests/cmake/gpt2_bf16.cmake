# GPT-2 under --precision bf16 (issue 38): the linear layers' BF16 products
# against FP32 references; skipped (77) without AVX-512 BF16.
include_guard(GLOBAL)
so_add_test(test_seq_bf16 LABELS unit TIMEOUT 120)
set_tests_properties(test_seq_bf16 PROPERTIES SKIP_RETURN_CODE 77)
# 200 steps of a tiny GPT-2 in BF16 against FP32: validation loss within 1%.
so_add_script_test(gpt2_bf16_train gpt2_bf16_train.sh LABELS cli TIMEOUT 120)
