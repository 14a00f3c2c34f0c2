# Image data sets (src/data: imagefolder, tfrecord, the decode threads): the
# unit test runs on its own (parsers) and, driven by image_data.sh, on a tree
# built from Fashion-MNIST with torchvision's output beside it.
include_guard(GLOBAL)
so_add_test(test_imagedata LABELS unit TIMEOUT 300)
so_add_script_test(image_data image_data.sh LABELS cli TIMEOUT 600)
set_tests_properties(image_data PROPERTIES ENVIRONMENT
  "SCALEOUT_SOURCE_DIR=${CMAKE_SOURCE_DIR};SCALEOUT_TEST_IMAGEDATA=$<TARGET_FILE:test_imagedata>")
