# The training loop driven through its strategy seam with a fake group and a
# fake strategy (src/train/train.c, strategy_dp.c).
include_guard(GLOBAL)
so_add_test(test_train LABELS unit)
