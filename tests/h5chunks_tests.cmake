# Device chunk I/O (h5chunks/): the chunk grid and copy boxes against a plain gather, the dataset checks and the
# refusal without a GPU (everywhere), and on a GPU the stored chunks against the filter's and the reads against
# H5Dread. The filter is registered statically (zbound_register_h5filter), as the comparison needs it.
if(NOT TARGET zbound_h5chunks)
  return()
endif()
add_executable(h5chunks_tests h5chunks_test.cpp)
target_link_libraries(h5chunks_tests PRIVATE zbound_h5chunks zbound_h5filter GTest::gtest_main)
target_include_directories(h5chunks_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
if(ZBOUND_CUDA)
  target_compile_definitions(h5chunks_tests PRIVATE ZBOUND_TEST_CUDA=1)
endif()
gtest_discover_tests(h5chunks_tests DISCOVERY_TIMEOUT 60
  PROPERTIES ENVIRONMENT "HDF5_PLUGIN_PATH=${CMAKE_CURRENT_BINARY_DIR}/no_plugins_here" TIMEOUT 600)
# Many batched calls per direction (a 1 MB window instead of 256 MB).
add_test(NAME h5chunks_small_window COMMAND h5chunks_tests --gtest_filter=DeviceChunks.ManyWindows)
set_tests_properties(h5chunks_small_window PROPERTIES
  ENVIRONMENT "ZBOUND_CHUNK_WINDOW_MB=1;HDF5_PLUGIN_PATH=${CMAKE_CURRENT_BINARY_DIR}/no_plugins_here" TIMEOUT 600)
