# Relaxed consistency (--sync): the grammar.
so_add_test(test_sync_spec LABELS unit)
