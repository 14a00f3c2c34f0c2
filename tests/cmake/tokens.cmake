# Token data (llm.c's shard format, the three batch orders; llm.c's orders
# checked against tests/llmc_loader_ref.py, an independent Python model).
so_add_test(test_tokens LABELS unit TIMEOUT 120)
# The tokenizer against tests/gpt2_encoder_ref.py (GPT-2's encoder.py with python3-regex).
so_add_test(test_tokenizer LABELS unit TIMEOUT 300)
# `scaleout tokenize` on fortunes and `train --dataset tokens` errors from the command line.
so_add_script_test(tokens_cli tokens_cli.sh TIMEOUT 300)
# llm.c's GPT-2 model file, against files written as llm.c's train_gpt2.py writes them.
so_add_test(test_llmc LABELS unit TIMEOUT 120)
# Not a test: the token loader's tokens/s against training's ceiling (bench/token_loader.c,
# run through /work/bin/so-bench; docs/TOKENS.md).
add_executable(token_loader ${CMAKE_SOURCE_DIR}/bench/token_loader.c)
target_link_libraries(token_loader PRIVATE scaleout)
