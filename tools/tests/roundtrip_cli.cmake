# File round trip through the CLI: compress -> info -> decompress, then checks the header fields against the input
# and the size of the output. The values themselves are checked by `zbound bench` (tools_cli_bench_* tests) and by
# python_tests/test_cli.py.
#   cmake -DZBOUND=<cli> -DINPUT=<raw> -DRAWOPTS=<opt^^opt..> -DBOUND=<--abs^^X> -DN=<values> -DESIZE=<4|8>
#         -DDTYPE=<f32|f64> -DWORK=<dir> -P roundtrip_cli.cmake
string(REPLACE "^^" ";" rawopts "${RAWOPTS}")
string(REPLACE "^^" ";" bound "${BOUND}")
file(MAKE_DIRECTORY "${WORK}")
set(zb "${WORK}/field.zb")
set(out "${WORK}/field.out")
file(REMOVE "${zb}" "${out}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  string(REPLACE ";" " " shown "${ARGN}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${shown}\nexit code ${rc}\n${o}\n${e}")
  endif()
  set(run_out "${o}" PARENT_SCOPE)
endfunction()

run(${ZBOUND} compress "${INPUT}" ${rawopts} ${bound} -o "${zb}")
run(${ZBOUND} info "${zb}")
# Lorenzo + fast writes format 1, the other pipelines (the default auto may choose them) formats 2 to 4.
foreach(re "format version +[1-4]\n" "dtype +${DTYPE}\n" "values +${N}\n" "raw passthrough +no\n")
  if(NOT run_out MATCHES "${re}")
    message(FATAL_ERROR "zbound info output does not match '${re}':\n${run_out}")
  endif()
endforeach()
file(SIZE "${zb}" zsize)
if(NOT run_out MATCHES "stream bytes +${zsize} ")
  message(FATAL_ERROR "info's stream bytes differ from the file size ${zsize}:\n${run_out}")
endif()
run(${ZBOUND} decompress "${zb}" -o "${out}")
file(SIZE "${out}" osize)
math(EXPR want "${N} * ${ESIZE}")
if(NOT osize EQUAL want)
  message(FATAL_ERROR "decompressed ${osize} bytes, expected ${want}")
endif()
if(NOT zsize LESS osize)
  message(FATAL_ERROR "the stream (${zsize} bytes) is not smaller than the data (${osize} bytes) on a real field")
endif()
message(STATUS "round trip ok: ${osize} -> ${zsize} bytes")
