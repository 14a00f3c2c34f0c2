# Synchronised batchnorm (both backends) against one model on the whole batch.
include_guard(GLOBAL)
so_add_test(test_syncbn LABELS unit ISA_CAPS avx2)
