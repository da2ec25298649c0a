# SPDX-License-Identifier: Apache-2.0
# Settings shared by the project's own tests, examples and benchmarks (not installed).

# Warnings as errors for the project's own translation units.
add_library(replayssm_warnings INTERFACE)
target_compile_options(replayssm_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra -Werror=all-warnings>)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
