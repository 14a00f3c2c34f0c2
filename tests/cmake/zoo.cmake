# Model zoo (src/models/) and its PyTorch twins (bench/torch_models.py).
include_guard(GLOBAL) # tests/CMakeLists.txt and tests.cmake may both include this list
so_add_test(test_zoo LABELS unit)
target_compile_definitions(test_zoo PRIVATE SO_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data")
# Python only (no scaleout code runs): not in the sanitizer build.
if(NOT SCALEOUT_SANITIZE)
  so_add_script_test(torch_models test_torch_models.sh LABELS unit TIMEOUT 300)
endif()
