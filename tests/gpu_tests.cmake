# GPU backend tests: CPU/GPU byte parity (synthetic and real data), cross decoding, the device-pointer API and
# corrupted streams, for the Lorenzo predictor with either encoder (v1, and v2/v4 in the LorenzoRatio* tests) and the
# interp pipeline (gpu_interp_test.cpp), the batched device API and concurrent calls (gpu_batch_test.cpp). Where no
# GPU can be used
# (CI, CPU-only builds) every GPU test skips with a visible "no GPU: ..." message.
add_executable(gpu_tests
  gpu_parity_test.cpp
  gpu_realdata_test.cpp
  gpu_device_api_test.cpp
  gpu_corrupt_test.cpp
  gpu_interp_test.cpp
  gpu_batch_test.cpp)
target_link_libraries(gpu_tests PRIVATE zbound_static GTest::gtest_main)
target_include_directories(gpu_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(gpu_tests PRIVATE
  ZBOUND_SHARED_DATA="${ZBOUND_SHARED_DATA}"
  ZBOUND_GPU_FIELDS_DIR="${CMAKE_CURRENT_BINARY_DIR}/gpu_fields")
if(ZBOUND_CUDA)
  # The device-API tests allocate device memory themselves.
  find_package(CUDAToolkit REQUIRED)
  target_compile_definitions(gpu_tests PRIVATE ZBOUND_TEST_CUDA=1)
  target_link_libraries(gpu_tests PRIVATE CUDA::cudart_static)
endif()
gtest_discover_tests(gpu_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 1200)

# Raw copies of every float field of ../shared/data for GpuRealData (needs python3 with numpy and h5py):
#   cmake --build <build> --target gpu_fields
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_custom_target(gpu_fields
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gpu_make_fields.py ${ZBOUND_SHARED_DATA}
            ${CMAKE_CURRENT_BINARY_DIR}/gpu_fields
    COMMENT "Extracting the real fields for the GPU tests")
endif()

# The fast encoder's one-pass form (k_quantize_encode, encode.cuh) on every array, in walks of 1 and 3 tiles per
# block: by default only arrays that fill the GPU with long walks take it, the test arrays mostly the two passes.
foreach(walk 1 3)
  add_test(NAME GpuParityWalk${walk} COMMAND gpu_tests "--gtest_filter=GpuParity.*:-*LorenzoRatio*:*PointWise*")
  set_tests_properties(GpuParityWalk${walk} PROPERTIES ENVIRONMENT ZBOUND_GPU_WALK=${walk} TIMEOUT 1200)
endforeach()
