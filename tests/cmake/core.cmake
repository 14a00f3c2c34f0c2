# Core helpers (src/core/): allocation and page population.
include_guard(GLOBAL) # tests/CMakeLists.txt and tests.cmake may both include this list
so_add_test(test_core LABELS unit)
