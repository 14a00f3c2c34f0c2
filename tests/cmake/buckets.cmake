# Gradient bucket planning (src/train/buckets.c), including the automatic joint choice.
include_guard(GLOBAL)
so_add_test(test_buckets LABELS unit)
