# CLI tests (tools/): the `zbound` tool on real data from ../shared/data, its cdvalues strings, and its errors.
# Value-by-value checks run inside `zbound bench` (exit 3 on any violation); python_tests/test_cli.py checks the
# files with numpy on more fields.
# The bound checker itself, on values made to break it.
add_executable(tools_metrics_tests ${PROJECT_SOURCE_DIR}/tools/tests/metrics_test.cpp)
target_link_libraries(tools_metrics_tests PRIVATE zbound_tool_support GTest::gtest_main)
gtest_discover_tests(tools_metrics_tests DISCOVERY_TIMEOUT 60)

set(_zb_cli $<TARGET_FILE:zbound_cli>)
set(_zb_expect ${PROJECT_SOURCE_DIR}/tools/tests/expect_cli.cmake)
# PLOT3D q file (NASA CFD): 28 header bytes, then 5 x 25 x 33 x 57 big-endian f32.
set(_zb_cfd ${ZBOUND_SHARED_DATA}/nasa_cfd_combq.bin)
set(_zb_cfd_opts -t f32 --offset 28 --endian big -d 5x25x33x57)

# zb_cli_test(NAME RC REGEX ARGS...): `zbound ARGS...` must exit with RC and print something matching REGEX.
function(zb_cli_test name rc regex)
  list(JOIN ARGN "^^" args)
  add_test(NAME tools_cli_${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=${_zb_cli}^^${args}" -DEXPECT_RC=${rc} "-DEXPECT_OUT=${regex}"
                   -P ${_zb_expect})
  set_tests_properties(tools_cli_${name} PROPERTIES TIMEOUT 300 ENVIRONMENT "ZBOUND_BACKEND=auto")
endfunction()

# ---- working commands ----
zb_cli_test(help 0 "compress.*decompress.*info.*cdvalues.*bench" --help)
foreach(cmd compress decompress info cdvalues bench)
  zb_cli_test(help_${cmd} 0 "usage: zbound ${cmd}" ${cmd} --help)
endforeach()
# The stream format the library announces (zbound.h), read from the header rather than written out here.
file(STRINGS ${PROJECT_SOURCE_DIR}/core/include/zbound.h _zb_format_line REGEX "#define ZBOUND_FORMAT_VERSION ")
string(REGEX REPLACE ".*ZBOUND_FORMAT_VERSION ([0-9]+).*" "\\1" _zb_format "${_zb_format_line}")
zb_cli_test(version 0 "zbound [0-9]+\\.[0-9]+\\.[0-9]+ \\(stream format ${_zb_format}," --version)

# Bound checked on every value of a real 4D field, three relative bounds and one absolute, f32.
zb_cli_test(bench_cfd_rel 0 "violations: 0 " bench ${_zb_cfd} ${_zb_cfd_opts} --rel 1e-2,1e-3,1e-4 --repeat 2)
zb_cli_test(bench_cfd_abs 0 "violations: 0 " bench ${_zb_cfd} ${_zb_cfd_opts} --abs 0.5 --repeat 2
            --predictor lorenzo --encoder fast --threads 1)
# The point-wise bound, checked per value against pw_rel * |x| (the momenta have both signs).
zb_cli_test(bench_cfd_pw_rel 0 "violations: 0 " bench ${_zb_cfd} ${_zb_cfd_opts} --pw-rel 1e-2,1e-4 --repeat 1)
zb_cli_test(bench_cfd_json 0 "\"bound_ok\":true.*\"compress_kernel_gbps\""
            bench ${_zb_cfd} ${_zb_cfd_opts} --rel 1e-3 --repeat 2 --json)
zb_cli_test(bench_cfd_tiled 0 "\"dims\":\"[0-9]+x25x33x57\".*\"bound_ok\":true"
            bench ${_zb_cfd} ${_zb_cfd_opts} --rel 1e-3 --repeat 1 --warmup 0 --size-mb 4 --json)

add_test(NAME tools_cli_roundtrip_cfd
         COMMAND ${CMAKE_COMMAND} -DZBOUND=${_zb_cli} -DINPUT=${_zb_cfd}
                 "-DRAWOPTS=-t^^f32^^--offset^^28^^--endian^^big^^-d^^5x25x33x57" "-DBOUND=--rel^^1e-3"
                 -DN=235125 -DESIZE=4 -DDTYPE=f32 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tools_roundtrip_cfd
                 -P ${PROJECT_SOURCE_DIR}/tools/tests/roundtrip_cli.cmake)

# cdvalues: the h5repack (UD=id,flags,count,values) and nccopy (var,id,values) forms of the same words.
zb_cli_test(cdvalues_h5repack 0 "^UD=33000,0,6,1,0,[0-9]+,[0-9]+,0,0\n$" cdvalues --abs 1e-3 --format h5repack)
zb_cli_test(cdvalues_nccopy 0 "^\\*,33000,1,1,[0-9]+,[0-9]+,1,1\n$"
            cdvalues --rel 1e-3 --predictor lorenzo --encoder fast --format nccopy)
zb_cli_test(cdvalues_nccopy_var 0 "^TREFHT,33000,1,0," cdvalues --abs 0.01 --var TREFHT --format nccopy)
# 1e-3 as an IEEE double is 0x3F50624DD2F1A9FC: high word 1062232653, low word 3539053052.
zb_cli_test(cdvalues_words 0 "^1,0,1062232653,3539053052,0,0\n$" cdvalues --abs 1e-3 --format words)
zb_cli_test(cdvalues_all 0 "h5repack -f UD=33000,0,6,.*nccopy -F '\\*,33000,.*compression=33000"
            cdvalues --rel 1e-4)

# ---- errors: exit code and a message that says what is wrong ----
zb_cli_test(err_no_command 2 "usage: zbound")
zb_cli_test(err_unknown_command 2 "unknown command 'frob'" frob)
zb_cli_test(err_no_type 2 "missing -t" compress ${_zb_cfd} --abs 1)
zb_cli_test(err_bad_type 2 "'f16' is not a supported type" compress ${_zb_cfd} -t f16 --abs 1)
zb_cli_test(err_dims_size 2 "has 940500 bytes after the offset but -d 5x25x33x56"
            compress ${_zb_cfd} -t f32 --offset 28 -d 5x25x33x56 --abs 1)
zb_cli_test(err_no_bound 2 "give an error bound" compress ${_zb_cfd} ${_zb_cfd_opts})
zb_cli_test(err_two_bounds 2 "only one of --abs, --rel and --pw-rel" compress ${_zb_cfd} ${_zb_cfd_opts} --abs 1 --rel 1)
zb_cli_test(err_negative_bound 2 "must be >= 0" compress ${_zb_cfd} ${_zb_cfd_opts} --abs -1)
zb_cli_test(err_nan_bound 2 "not a finite number" compress ${_zb_cfd} ${_zb_cfd_opts} --rel nan)
zb_cli_test(err_bad_dims 2 "-d/--dims" compress ${_zb_cfd} -t f32 -d 5x0x3 --abs 1)
zb_cli_test(err_bad_predictor 2 "'magic' is not one of auto, lorenzo, interp"
            compress ${_zb_cfd} ${_zb_cfd_opts} --abs 1 --predictor magic)
zb_cli_test(err_bad_backend 2 "--backend: 'tpu'" compress ${_zb_cfd} ${_zb_cfd_opts} --abs 1 --backend tpu)
zb_cli_test(err_unknown_option 2 "unknown option '--frob'" bench ${_zb_cfd} ${_zb_cfd_opts} --rel 1e-3 --frob)
zb_cli_test(err_missing_value 2 "option --rel needs a value" bench ${_zb_cfd} ${_zb_cfd_opts} --rel)
zb_cli_test(err_bad_repeat 2 "--repeat: 0 is out of range" bench ${_zb_cfd} ${_zb_cfd_opts} --rel 1e-3 --repeat 0)
zb_cli_test(err_missing_file 1 "cannot open '.*no_such_file.raw': No such file"
            compress ${CMAKE_CURRENT_BINARY_DIR}/no_such_file.raw -t f32 --abs 1)
zb_cli_test(err_not_a_stream 1 "not a zbound stream|bad magic|corrupt" info ${_zb_cfd})
zb_cli_test(err_decompress_no_output 2 "missing -o" decompress ${_zb_cfd})
zb_cli_test(err_cdvalues_no_bound 2 "give an error bound" cdvalues)
zb_cli_test(err_cdvalues_format 2 "--format: 'xml'" cdvalues --abs 1 --format xml)
