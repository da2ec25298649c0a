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

# The CPU steps' fused multiply-adds (math::fma, std::fma) are calls into libm unless the
# compiler may emit FMA instructions: on x86-64 the project's own CPU targets (host tests,
# examples, the CPU benchmark, the Python module) are compiled with AVX2 and FMA when the
# build machine has them, which makes the CPU steps several times faster (docs/benchmarks.md,
# "CPU benchmark"). Their results do not change (the library's -ffp-contract=off;
# test/fp_contract).
option(REPLAYSSM_HOST_FMA "Compile the project's own CPU targets with FMA instructions where the build machine has them" ON)
set(REPLAYSSM_HOST_FMA_FLAGS "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang"
   AND NOT CMAKE_CROSSCOMPILING)
  include(CheckCXXSourceRuns)
  set(CMAKE_REQUIRED_FLAGS "-mavx2 -mfma")
  check_cxx_source_runs("int main() { return __builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\") ? 0 : 1; }"
                        REPLAYSSM_BUILD_MACHINE_HAS_FMA)
  unset(CMAKE_REQUIRED_FLAGS)
  if(REPLAYSSM_BUILD_MACHINE_HAS_FMA)
    set(REPLAYSSM_HOST_FMA_FLAGS -mavx2 -mfma)
  endif()
endif()
add_library(replayssm_host_fma INTERFACE)
if(REPLAYSSM_HOST_FMA AND REPLAYSSM_HOST_FMA_FLAGS)
  list(JOIN REPLAYSSM_HOST_FMA_FLAGS "," fma_for_nvcc)
  target_compile_options(replayssm_host_fma INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${REPLAYSSM_HOST_FMA_FLAGS}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${fma_for_nvcc}>)
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# The host tests and the precision study instantiate every policy's CPU steps, which g++
# compiles much faster at -O2 than at -O3, for smoke runs barely longer. Their release
# builds use -O2.
add_library(replayssm_host_o2 INTERFACE)
target_compile_options(replayssm_host_o2 INTERFACE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O2>)
