# Runs one command and checks its exit code and output (ctest driver for the CLI tests in tests/tools_tests.cmake).
#   cmake -DCMD=<arg^^arg^^...> -DEXPECT_RC=<code> [-DEXPECT_OUT=<regex over stdout+stderr>]
#         [-DEXPECT_ERR=<regex over stderr alone>] -P expect_cli.cmake
# Arguments are joined with ^^ because ctest splits a ';' inside one argument.
string(REPLACE "^^" ";" cmd "${CMD}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REPLACE ";" " " shown "${cmd}")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "${shown}\nexit code ${rc}, expected ${EXPECT_RC}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED EXPECT_OUT AND NOT "${out}${err}" MATCHES "${EXPECT_OUT}")
  message(FATAL_ERROR "${shown}\noutput does not match '${EXPECT_OUT}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED EXPECT_ERR AND NOT "${err}" MATCHES "${EXPECT_ERR}")
  message(FATAL_ERROR "${shown}\nstderr does not match '${EXPECT_ERR}'\nstderr:\n${err}")
endif()
message(STATUS "ok (exit ${rc}): ${shown}")
