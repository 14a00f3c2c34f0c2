# The training loop driven through its strategy seam with a fake group and a
# fake strategy (src/train/train.c, strategy_dp.c).
include_guard(GLOBAL)
so_add_test(test_train LABELS unit)
# The sharded strategies on ranks that are threads of one process, over a
# fake collective vocabulary (src/train/strategy_zero.c, shard.c).
so_add_test(test_shard LABELS unit LIBS Threads::Threads TIMEOUT 300)
