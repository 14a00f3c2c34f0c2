# Gradient compression (src/compress): kernels, the --compress parser and the
# compressor over a simulated group; again with the scalar kernels.
include_guard(GLOBAL)
so_add_test(test_compress LABELS unit ISA_CAPS sse4.2)
# Training with --compress over MPI: bad input, none == FP32 bitwise, fp16 /
# top-k / PowerSGD close to FP32 on LeNet-5 (after comm.cmake: SO_MPIEXEC).
if(TARGET scaleout_comm)
  so_add_script_test(compress_cli compress_cli.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST compress_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# Residuals and PowerSGD's Q in checkpoints: bitwise resume, dropped with
# one line on another world size or method.
if(TARGET scaleout_comm)
  so_add_script_test(compress_ckpt compress_ckpt.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST compress_ckpt APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
