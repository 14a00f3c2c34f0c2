# Core helpers (src/core/): allocation and page population.
include_guard(GLOBAL) # tests/CMakeLists.txt and tests.cmake may both include this list
so_add_test(test_core LABELS unit)
# Element types (src/core/dtype.c): FP32 <-> BF16 / FP16 against independent
# references; again capped to SSE4.2, where FP16 converts without F16C.
so_add_test(test_dtype LABELS unit ISA_CAPS sse4.2)
