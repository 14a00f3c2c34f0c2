# Every module registers its tests in tests/cmake/<module>.cmake with
# so_add_test / so_add_script_test, so parallel work never edits one list.
file(GLOB SO_TEST_LISTS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/*.cmake)
foreach(f ${SO_TEST_LISTS})
  include(${f})
endforeach()
