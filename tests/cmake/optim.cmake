# Optimizers and learning-rate schedules (src/optim/).
include_guard(GLOBAL) # tests/CMakeLists.txt and tests.cmake may both include this list
so_add_test(test_optim LABELS unit)
