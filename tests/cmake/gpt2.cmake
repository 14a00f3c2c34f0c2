# GPT-2: the sequence ops (src/nn, src/backend), the model (src/models/gpt2.c)
# and its checks against an independent PyTorch GPT-2 (bench/torch_gpt2.py).
include_guard(GLOBAL)
so_add_test(test_seq_ops LABELS unit TIMEOUT 300)
