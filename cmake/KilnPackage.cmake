# The exported CMake package: find_package(Kiln) gives kiln::kiln, from the build tree and after
# `cmake --install`. Plugins and custom ops use kiln_add_plugin() from KilnHelpers.cmake.
include(CMakePackageConfigHelpers)

if(SKBUILD)
  set(KILN_CMAKE_INSTALL_DIR kiln/share/cmake/Kiln)  # where kiln.get_cmake_dir() looks
else()
  set(KILN_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)

install(TARGETS kiln EXPORT KilnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Build tree: KilnConfig.cmake next to the exported targets of this build.
export(EXPORT KilnTargets NAMESPACE kiln:: FILE ${PROJECT_BINARY_DIR}/KilnTargets.cmake)
configure_package_config_file(cmake/KilnConfig.cmake.in ${PROJECT_BINARY_DIR}/KilnConfig.cmake
                              INSTALL_DESTINATION ${PROJECT_BINARY_DIR})
configure_file(cmake/KilnHelpers.cmake ${PROJECT_BINARY_DIR}/KilnHelpers.cmake COPYONLY)

if(KILN_INSTALL)
  install(DIRECTORY include/kiln DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT KilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_INSTALL_DIR})
  configure_package_config_file(cmake/KilnConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/install/KilnConfig.cmake
                                INSTALL_DESTINATION ${KILN_CMAKE_INSTALL_DIR})
  install(FILES ${PROJECT_BINARY_DIR}/install/KilnConfig.cmake
                ${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake cmake/KilnHelpers.cmake
          DESTINATION ${KILN_CMAKE_INSTALL_DIR})
endif()

# An in-place development build: kiln.get_cmake_dir() (python/kiln/share/cmake/Kiln) forwards to
# this build tree's package files.
if(KILN_INPLACE)
  set(_kiln_dev_cmake ${PROJECT_SOURCE_DIR}/python/kiln/share/cmake/Kiln)
  file(WRITE ${_kiln_dev_cmake}/KilnConfig.cmake "include(\"${PROJECT_BINARY_DIR}/KilnConfig.cmake\")\n")
  file(WRITE ${_kiln_dev_cmake}/KilnConfigVersion.cmake
       "include(\"${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake\")\n")
endif()
