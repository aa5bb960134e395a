# Core (CPU) tests: stages against plain references, stream format and corruption, round trips and bounds.
add_executable(core_tests
  core_stages_test.cpp
  core_format_test.cpp
  core_roundtrip_test.cpp
  core_realdata_test.cpp
  core_golden_test.cpp
  core_interp_test.cpp
  core_interp_levels_test.cpp
  core_auto_test.cpp
  core_pwrel_test.cpp
  core_threads_test.cpp
  core_lorenzo_ratio_test.cpp
  core_segments_test.cpp
  core_simd_test.cpp)
target_link_libraries(core_tests PRIVATE zbound_static GTest::gtest_main)
target_include_directories(core_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(core_tests PRIVATE ZBOUND_SHARED_DATA="${ZBOUND_SHARED_DATA}"
                                              ZBOUND_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
gtest_discover_tests(core_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
