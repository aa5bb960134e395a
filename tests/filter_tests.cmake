# Filter tests: cd_values (HDF5-free), the filter through the HDF5 C API as a plugin (HDF5_PLUGIN_PATH) and as a
# statically registered filter (zbound_register_h5filter), the plugin's linkage, and the C example.
# The tests link the system libhdf5 (the plugin itself never does).
find_package(HDF5 COMPONENTS C)

add_executable(filter_cdvalues_tests filter_cdvalues_test.cpp)
target_link_libraries(filter_cdvalues_tests PRIVATE zbound_cdvalues GTest::gtest_main)
target_include_directories(filter_cdvalues_tests PRIVATE ${PROJECT_SOURCE_DIR}/filter)
gtest_discover_tests(filter_cdvalues_tests DISCOVERY_TIMEOUT 60)

add_test(NAME filter_plugin_linkage
         COMMAND ${CMAKE_COMMAND} -DPLUGIN=$<TARGET_FILE:h5z_zbound>
                 -P ${PROJECT_SOURCE_DIR}/plugin_registration/check_plugin.cmake)

if(NOT HDF5_FOUND)
  message(STATUS "filter tests: HDF5 C library not found; only the cd_values and linkage tests are built")
  return()
endif()

set(_zb_plugin_dir ${CMAKE_BINARY_DIR}/plugin)

# Through the plugin: HDF5 finds libh5z_zbound.so in HDF5_PLUGIN_PATH.
add_executable(filter_plugin_tests filter_h5_test.cpp)
target_link_libraries(filter_plugin_tests PRIVATE HDF5::HDF5 zbound_cdvalues zbound_static GTest::gtest_main)
target_include_directories(filter_plugin_tests PRIVATE ${PROJECT_SOURCE_DIR}/filter)
add_dependencies(filter_plugin_tests h5z_zbound)
gtest_discover_tests(filter_plugin_tests DISCOVERY_TIMEOUT 60
  PROPERTIES ENVIRONMENT "HDF5_PLUGIN_PATH=${_zb_plugin_dir}" TIMEOUT 300)

# Registered by the program: plugin loading is switched off inside the test.
add_executable(filter_static_tests filter_h5_test.cpp)
target_compile_definitions(filter_static_tests PRIVATE ZB_TEST_STATIC_REGISTER)
target_link_libraries(filter_static_tests PRIVATE zbound_h5filter HDF5::HDF5 GTest::gtest_main)
gtest_discover_tests(filter_static_tests DISCOVERY_TIMEOUT 60 TEST_PREFIX "static."
  PROPERTIES ENVIRONMENT "HDF5_PLUGIN_PATH=${CMAKE_CURRENT_BINARY_DIR}/no_plugins_here" TIMEOUT 300)

# The C example, as a user runs it.
if(TARGET h5_write_read)
  add_test(NAME filter_example_h5_write_read
           COMMAND h5_write_read ${CMAKE_CURRENT_BINARY_DIR}/filter_example.h5 1e-3)
  set_tests_properties(filter_example_h5_write_read PROPERTIES
    ENVIRONMENT "HDF5_PLUGIN_PATH=${_zb_plugin_dir}"
    PASS_REGULAR_EXPRESSION "ratio [0-9.]+, max error")
endif()
