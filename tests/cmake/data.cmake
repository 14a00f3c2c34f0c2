# Data module: parsers, datasets and the batch loader; the fuzz smoke run
# builds its own clang tree and skips (exit 77) where clang/libFuzzer are missing.
so_add_test(test_data LABELS unit TIMEOUT 120)
so_add_script_test(fuzz_parsers run-fuzz.sh LABELS fuzz TIMEOUT 600)
set_tests_properties(fuzz_parsers PROPERTIES SKIP_RETURN_CODE 77)
