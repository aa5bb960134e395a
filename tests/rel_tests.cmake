# Reliability tests (issue 6): thread safety, host allocation failure, GPU resource faults, soak, archived HDF5
# files, h5py error reporting. scripts/test.sh also runs the thread-safety tests under ThreadSanitizer
# (ZBOUND_TSAN), the fuzz targets (fuzz/, ZBOUND_FUZZ) and the soak for 120 s.
find_package(HDF5 COMPONENTS C)
set(_rel_plugin_dir ${CMAKE_BINARY_DIR}/plugin)

# ---- thread safety (C API; the filter function when HDF5 is there) ----
add_executable(rel_thread_tests rel_threads_test.cpp)
target_link_libraries(rel_thread_tests PRIVATE zbound_static GTest::gtest_main ${CMAKE_DL_LIBS})
target_include_directories(rel_thread_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
if(HDF5_FOUND)
  target_compile_definitions(rel_thread_tests PRIVATE ZBOUND_REL_HDF5=1
                             ZBOUND_PLUGIN_FILE="$<TARGET_FILE:h5z_zbound>")
  target_link_libraries(rel_thread_tests PRIVATE HDF5::HDF5 zbound_cdvalues)
  target_include_directories(rel_thread_tests PRIVATE ${PROJECT_SOURCE_DIR}/filter)
  add_dependencies(rel_thread_tests h5z_zbound)
endif()
gtest_discover_tests(rel_thread_tests DISCOVERY_TIMEOUT 60
  PROPERTIES ENVIRONMENT "HDF5_PLUGIN_PATH=${_rel_plugin_dir}" TIMEOUT 600
             SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# ---- host allocation failure (replaces operator new: its own program) ----
add_executable(rel_alloc_tests rel_alloc_test.cpp)
target_link_libraries(rel_alloc_tests PRIVATE zbound_static GTest::gtest_main)
target_include_directories(rel_alloc_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
if(HDF5_FOUND)
  target_compile_definitions(rel_alloc_tests PRIVATE ZBOUND_REL_HDF5=1)
  target_link_libraries(rel_alloc_tests PRIVATE zbound_h5filter HDF5::HDF5)
endif()
gtest_discover_tests(rel_alloc_tests DISCOVERY_TIMEOUT 60
  PROPERTIES ENVIRONMENT "HDF5_PLUGIN_PATH=${CMAKE_CURRENT_BINARY_DIR}/no_plugins_here" TIMEOUT 300
             SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# ---- GPU resource faults: one ctest entry per knob setting (the backend reads its knobs once per process) ----
add_executable(rel_gpu_fault_tests rel_gpu_faults_test.cpp)
target_link_libraries(rel_gpu_fault_tests PRIVATE zbound_static GTest::gtest_main)
target_include_directories(rel_gpu_fault_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
if(ZBOUND_CUDA)
  find_package(CUDAToolkit REQUIRED)
  target_compile_definitions(rel_gpu_fault_tests PRIVATE ZBOUND_TEST_CUDA=1)
  target_link_libraries(rel_gpu_fault_tests PRIVATE CUDA::cudart_static)
endif()
add_test(NAME rel_gpu_mem_limit COMMAND rel_gpu_fault_tests --gtest_filter=GpuMemLimit.*)
set_tests_properties(rel_gpu_mem_limit PROPERTIES
  ENVIRONMENT "ZBOUND_GPU_MEM_LIMIT=8388608;ZBOUND_GPU_MIN_BYTES=0" TIMEOUT 300)
foreach(n 0 3 10 40)
  add_test(NAME rel_gpu_fault_after_${n} COMMAND rel_gpu_fault_tests --gtest_filter=GpuFault.*)
  set_tests_properties(rel_gpu_fault_after_${n} PROPERTIES
    ENVIRONMENT "ZBOUND_GPU_FAULT_AFTER=${n};ZBOUND_GPU_MIN_BYTES=0" TIMEOUT 300)
endforeach()
add_test(NAME rel_gpu_larger_than_free COMMAND rel_gpu_fault_tests --gtest_filter=GpuLargerThanFree.*)
set_tests_properties(rel_gpu_larger_than_free PROPERTIES TIMEOUT 600)
add_test(NAME rel_no_gpu_hidden COMMAND rel_gpu_fault_tests --gtest_filter=NoGpu.*)
set_tests_properties(rel_no_gpu_hidden PROPERTIES
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=;ZBOUND_REL_NO_GPU=1;ZBOUND_GPU_MIN_BYTES=0" TIMEOUT 300)
add_test(NAME rel_no_gpu_bad_index COMMAND rel_gpu_fault_tests --gtest_filter=NoGpu.*)
set_tests_properties(rel_no_gpu_bad_index PROPERTIES
  ENVIRONMENT "ZBOUND_DEVICE=99;ZBOUND_REL_NO_GPU=1;ZBOUND_GPU_MIN_BYTES=0" TIMEOUT 300)
# A skipped GoogleTest case exits 0: make the skip visible in ctest's summary instead.
set_tests_properties(rel_gpu_mem_limit rel_gpu_larger_than_free PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
foreach(n 0 3 10 40)
  set_tests_properties(rel_gpu_fault_after_${n} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endforeach()

# ---- regression tests of core bugs found by the reliability work ----
add_executable(rel_regression_tests rel_regressions_test.cpp)
target_link_libraries(rel_regression_tests PRIVATE zbound_static GTest::gtest_main)
target_include_directories(rel_regression_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
gtest_discover_tests(rel_regression_tests DISCOVERY_TIMEOUT 60 PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# ---- soak (ZBOUND_SOAK_SECONDS, default 10; scripts/test.sh runs it for 120 s) ----
add_executable(rel_soak_tests rel_soak_test.cpp)
target_link_libraries(rel_soak_tests PRIVATE zbound_static GTest::gtest_main)
target_include_directories(rel_soak_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME rel_soak COMMAND rel_soak_tests)
set_tests_properties(rel_soak PROPERTIES TIMEOUT 900)

if(NOT HDF5_FOUND)
  message(STATUS "rel tests: HDF5 C library not found; archived HDF5 files and h5py error tests not built")
  return()
endif()

# ---- archived HDF5 files per format version (tests/golden/v<N>/h5) ----
add_executable(rel_golden_h5_tests rel_golden_h5_test.cpp)
target_link_libraries(rel_golden_h5_tests PRIVATE zbound_static zbound_cdvalues HDF5::HDF5 GTest::gtest_main)
target_include_directories(rel_golden_h5_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/filter)
target_compile_definitions(rel_golden_h5_tests PRIVATE ZBOUND_SHARED_DATA="${ZBOUND_SHARED_DATA}"
                                                       ZBOUND_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(rel_golden_h5_tests h5z_zbound)
gtest_discover_tests(rel_golden_h5_tests DISCOVERY_TIMEOUT 60
  PROPERTIES ENVIRONMENT "HDF5_PLUGIN_PATH=${_rel_plugin_dir}" TIMEOUT 300)

# ---- errors reach h5py users (pip h5py, its own HDF5) ----
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME rel_h5py_errors COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/rel_h5py_errors.py)
  set_tests_properties(rel_h5py_errors PROPERTIES ENVIRONMENT "HDF5_PLUGIN_PATH=${_rel_plugin_dir}"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# ---- parallel HDF5 with MPI: 1, 2 and 4 ranks (oversubscribed) write one filtered dataset collectively ----
if(TARGET mpi_write_read AND ZBOUND_MPIEXEC)
  foreach(np 1 2 4)
    add_test(NAME rel_mpi_${np}_ranks
             COMMAND ${ZBOUND_MPIEXEC} --oversubscribe --allow-run-as-root -np ${np}
                     $<TARGET_FILE:mpi_write_read> ${CMAKE_CURRENT_BINARY_DIR}/rel_mpi_${np}.h5)
    set_tests_properties(rel_mpi_${np}_ranks PROPERTIES
      ENVIRONMENT "HDF5_PLUGIN_PATH=${_rel_plugin_dir};ZBOUND_THREADS=1;OMPI_MCA_btl=self,vader"
      PASS_REGULAR_EXPRESSION "OK, every value within the bound" TIMEOUT 300 RUN_SERIAL TRUE)
  endforeach()
else()
  message(STATUS "rel tests: mpi_write_read not built or no mpirun: the MPI tests are skipped")
endif()
