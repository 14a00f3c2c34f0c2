# GPT-2 generation and interchange on the command line (issue 35):
# so_gpt2_generate against recomputing the sequence, and generate / ckpt
# export --format llmc|hf end to end on a tiny model.
so_add_test(test_gpt2_gen)
so_add_script_test(gpt2_cli gpt2_cli.sh TIMEOUT 300)
