# SPDX-License-Identifier: Apache-2.0
# Runs an example's command line and checks how it ends: its exit code and what it prints.
#
#   cmake [-DEXPECT_CODE=<n>] [-DSTDERR_HAS=<text>] [-DSTDOUT_HAS=<text>] [-DTIMEOUT=<s>]
#         -P expect_usage_error.cmake -- <program> [<argument>...]
#
# EXPECT_CODE: the exit code required (default 2, a usage error). STDERR_HAS, STDOUT_HAS:
# text (not a pattern) that stderr or stdout must contain. With a non-zero EXPECT_CODE stdout
# must stay empty (no usage dumped there, and no work started: every example prints before it
# runs); with 0 stderr must. TIMEOUT: seconds the command may take (default 10), so that an
# error reported only after a long run fails too.
if(NOT DEFINED EXPECT_CODE)
  set(EXPECT_CODE 2)
endif()
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 10)
endif()

set(command)
set(after_separator OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_separator ON)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "no command: give it after --")
endif()

execute_process(COMMAND ${command} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
string(REPLACE ";" " " shown "${command}")
set(report "command: ${shown}\nexit code: ${code}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")

if(NOT "${code}" STREQUAL "${EXPECT_CODE}")
  message(FATAL_ERROR "expected exit code ${EXPECT_CODE}\n${report}")
endif()
# Fails unless `text` (the program's `stream`) holds `needle`.
function(require_text stream text needle)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${stream} lacks '${needle}'\n${report}")
  endif()
endfunction()
if(DEFINED STDERR_HAS)
  require_text(stderr "${err}" "${STDERR_HAS}")
endif()
if(DEFINED STDOUT_HAS)
  require_text(stdout "${out}" "${STDOUT_HAS}")
endif()
if(EXPECT_CODE EQUAL 0)
  if(NOT "${err}" STREQUAL "")
    message(FATAL_ERROR "expected nothing on stderr\n${report}")
  endif()
elseif(NOT "${out}" STREQUAL "")
  message(FATAL_ERROR "expected nothing on stdout\n${report}")
endif()
message(STATUS "ok: ${shown} (exit code ${code})")
