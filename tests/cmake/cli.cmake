# Command-line behaviour tests.
so_add_script_test(cli_train cli_train.sh LABELS cli TIMEOUT 300)
so_add_script_test(layering layering.sh LABELS unit TIMEOUT 30)
if(TARGET scaleout_comm)
  so_add_script_test(predict_cli predict_cli.sh LABELS cli TIMEOUT 120)
endif()
