# Command-line behaviour tests.
so_add_script_test(cli_train cli_train.sh LABELS cli TIMEOUT 300)
so_add_script_test(layering layering.sh LABELS unit TIMEOUT 30)
