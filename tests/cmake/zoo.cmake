# Model zoo (src/models/) and its PyTorch twins (bench/torch_models.py).
include_guard(GLOBAL) # tests/CMakeLists.txt and tests.cmake may both include this list
so_add_test(test_zoo LABELS unit)
target_compile_definitions(test_zoo PRIVATE SO_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data")
so_add_script_test(torch_models test_torch_models.sh LABELS unit TIMEOUT 300)
