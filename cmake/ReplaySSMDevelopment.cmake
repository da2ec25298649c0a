# SPDX-License-Identifier: Apache-2.0
# Settings shared by the project's own tests, examples and benchmarks (not installed).

# Warnings for the project's own translation units; as errors only with REPLAYSSM_WERROR
# (CI turns it on), so that a newer compiler's new warning never breaks a user's build.
add_library(replayssm_warnings INTERFACE)
target_compile_options(replayssm_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(REPLAYSSM_WERROR)
  target_compile_options(replayssm_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# The host tests and the precision study instantiate every policy's CPU steps. g++ -O3 took
# 48 s for one host test file and 293 s for precision_study.cpp in a CI build on 2 cores;
# -O2 took 30 s and about 100 s, and the study's smoke runs 1.1-1.2x longer (measured
# 2026-12-01). Their release builds use -O2.
add_library(replayssm_host_o2 INTERFACE)
target_compile_options(replayssm_host_o2 INTERFACE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O2>)
