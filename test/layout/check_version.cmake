# SPDX-License-Identifier: Apache-2.0
# cmake -DHEADER=config.hpp -DVERSION=x.y.z -P check_version.cmake: fails unless the header's
# version_major / version_minor / version_patch spell VERSION.
file(READ ${HEADER} text)
foreach(part major minor patch)
  string(REGEX MATCH "version_${part} = ([0-9]+);" _ "${text}")
  list(APPEND parts ${CMAKE_MATCH_1})
endforeach()
list(JOIN parts "." header_version)
if(NOT header_version STREQUAL VERSION)
  message(FATAL_ERROR "config.hpp says version ${header_version}, the CMake project ${VERSION}")
endif()
message(STATUS "version ${header_version}")
