# Stop signals taken by a thread of their own (src/job/signals.c).
include_guard(GLOBAL)
so_add_test(test_signals LABELS unit LIBS scaleout_job)
