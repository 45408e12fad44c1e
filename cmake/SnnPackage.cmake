# Exported CMake package: after `cmake --install`, another project uses
#   find_package(snn REQUIRED)   # with LibTorch on CMAKE_PREFIX_PATH too
#   target_link_libraries(app PRIVATE snn::snn)
include(CMakePackageConfigHelpers)

install(EXPORT snnTargets NAMESPACE snn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/snn)
configure_package_config_file(cmake/snnConfig.cmake.in ${PROJECT_BINARY_DIR}/snnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/snn)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/snnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/snnConfig.cmake ${PROJECT_BINARY_DIR}/snnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/snn)
