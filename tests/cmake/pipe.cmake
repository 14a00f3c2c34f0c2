# Pipeline partitions (src/pipe/) and `scaleout plan`.
include_guard(GLOBAL)
so_add_test(test_pipe LABELS unit TIMEOUT 60)
so_add_script_test(plan_cli plan_cli.sh LABELS cli TIMEOUT 120)
