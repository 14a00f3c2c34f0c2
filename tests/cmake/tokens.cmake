# Token data (llm.c's shard format, the three batch orders; llm.c's orders
# checked against tests/llmc_loader_ref.py, an independent Python model).
so_add_test(test_tokens LABELS unit TIMEOUT 120)
