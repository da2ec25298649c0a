# SPDX-License-Identifier: Apache-2.0
# Install rules and the exported CMake package `ReplaySSM` (target replayssm::replayssm).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/replayssm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS replayssm EXPORT ReplaySSMTargets)
install(EXPORT ReplaySSMTargets NAMESPACE replayssm::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ReplaySSM)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ReplaySSMConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ReplaySSMConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ReplaySSM)
# Header-only: any architecture may consume it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ReplaySSMConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/ReplaySSMConfig.cmake
              ${PROJECT_BINARY_DIR}/ReplaySSMConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ReplaySSM)
