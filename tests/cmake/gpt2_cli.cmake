# GPT-2 generation and interchange on the command line (issue 35):
# so_gpt2_generate against recomputing the sequence, and generate / ckpt
# export --format llmc|hf end to end on a tiny model.
so_add_test(test_gpt2_gen)
so_add_script_test(gpt2_cli gpt2_cli.sh TIMEOUT 300)
# `make demo-gpt2` at a small size (QUICK=1, under a minute): tokenize, train to a validation loss, generate.
add_test(NAME demo_gpt2 COMMAND env QUICK=1 bash ${CMAKE_SOURCE_DIR}/scripts/demo-gpt2.sh
         $<TARGET_FILE:scaleout_cli> ${CMAKE_CURRENT_BINARY_DIR}/demo-gpt2)
set_tests_properties(demo_gpt2 PROPERTIES TIMEOUT 180 LABELS cli SKIP_RETURN_CODE 77)
