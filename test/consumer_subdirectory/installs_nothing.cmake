# SPDX-License-Identifier: Apache-2.0
# cmake -DBUILD_DIR=... -DPREFIX=... -P installs_nothing.cmake: installs BUILD_DIR into an
# empty PREFIX and fails if any file lands there.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} COMMAND_ERROR_IS_FATAL ANY)
file(GLOB_RECURSE installed ${PREFIX}/*)
if(installed)
  message(FATAL_ERROR "the consumer's install installed files: ${installed}")
endif()
message(STATUS "nothing installed")
