# The piecewise alpha-beta model and the tuning-table text (src/comm/tune.c,
# tune_text.c): rank-local, no MPI start-up, so also a unit test (ASan/UBSan).
include_guard(GLOBAL)
if(TARGET scaleout_comm)
  so_add_test(test_tune LABELS "unit;coll" LIBS scaleout_comm)
endif()
