# install.cmake - how librdna35attn is exported, installed and found by its users.
#
# Included from the top-level CMakeLists.txt after the targets rdna35attn (shared) and
# rdna35attn_static exist. It provides:
#   - the linker version script src/rdna35attn.map on the shared library (only the public r35a_*
#     functions are exported, under the version node R35A_0 of soname librdna35attn.so.0);
#   - `cmake --install` of the header, both libraries, a CMake package and a pkg-config file;
#   - the imported targets rdna35attn::rdna35attn (shared) and rdna35attn::rdna35attn_static, from
#     find_package(rdna35attn CONFIG) on an install, from rdna35attn_DIR=<build>/cmake-package on a
#     build tree, or as ALIAS targets when this project is add_subdirectory()'d into another.
# Install components: "runtime" (the versioned shared library) and "development" (the rest).

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(R35A_PACKAGE_NAME rdna35attn)
set(R35A_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/${R35A_PACKAGE_NAME}")
set(R35A_PKGCONFIG_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(R35A_PACKAGE_BUILD_DIR "${PROJECT_BINARY_DIR}/cmake-package")

# ---- exported symbols: the version script -------------------------------------------------------
# GNU ld, gold, lld and mold accept --version-script; Apple's and Microsoft's linkers do not (there
# the sources' hidden default visibility still keeps the internals out).
set(R35A_VERSION_SCRIPT "${PROJECT_SOURCE_DIR}/src/rdna35attn.map")
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang" AND NOT APPLE AND NOT WIN32)
  target_link_options(rdna35attn PRIVATE "LINKER:--version-script=${R35A_VERSION_SCRIPT}")
  # Relink when the symbol list changes.
  set_property(TARGET rdna35attn APPEND PROPERTY LINK_DEPENDS "${R35A_VERSION_SCRIPT}")
endif()

# ---- target names as users see them -------------------------------------------------------------
set_target_properties(rdna35attn PROPERTIES EXPORT_NAME rdna35attn)
set_target_properties(rdna35attn_static PROPERTIES EXPORT_NAME rdna35attn_static)
# Same names for a project that add_subdirectory()s this one instead of installing it.
if(NOT TARGET rdna35attn::rdna35attn)
  add_library(rdna35attn::rdna35attn ALIAS rdna35attn)
  add_library(rdna35attn::rdna35attn_static ALIAS rdna35attn_static)
endif()

# ---- install rules ------------------------------------------------------------------------------
# The targets already carry $<INSTALL_INTERFACE:include>; another include directory is added to them.
if(NOT CMAKE_INSTALL_INCLUDEDIR STREQUAL "include")
  set(R35A_INCLUDES_DESTINATION INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
endif()
install(TARGETS rdna35attn rdna35attn_static
  EXPORT rdna35attnTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT runtime NAMELINK_COMPONENT development
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT development
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT runtime
  ${R35A_INCLUDES_DESTINATION})
install(FILES "${PROJECT_SOURCE_DIR}/include/rdna35attn.h"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT development)
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE"
  DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/${R35A_PACKAGE_NAME}" COMPONENT runtime)

# ---- the CMake package: config, version and targets files ---------------------------------------
configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/rdna35attnConfig.cmake.in"
  "${R35A_PACKAGE_BUILD_DIR}/rdna35attnConfig.cmake"
  INSTALL_DESTINATION "${R35A_CMAKE_INSTALL_DIR}")
# The soname carries the major version, so any release of the same major version is compatible.
write_basic_package_version_file(
  "${R35A_PACKAGE_BUILD_DIR}/rdna35attnConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion)
install(EXPORT rdna35attnTargets
  NAMESPACE rdna35attn::
  FILE rdna35attnTargets.cmake
  DESTINATION "${R35A_CMAKE_INSTALL_DIR}"
  COMPONENT development)
install(FILES
  "${R35A_PACKAGE_BUILD_DIR}/rdna35attnConfig.cmake"
  "${R35A_PACKAGE_BUILD_DIR}/rdna35attnConfigVersion.cmake"
  DESTINATION "${R35A_CMAKE_INSTALL_DIR}"
  COMPONENT development)
# The same package over the build tree, for trying a build without installing it.
export(EXPORT rdna35attnTargets
  NAMESPACE rdna35attn::
  FILE "${R35A_PACKAGE_BUILD_DIR}/rdna35attnTargets.cmake")

# ---- the pkg-config file ------------------------------------------------------------------------
# Paths are relative to the .pc file's own directory (${pcfiledir}) when the install directories
# are relative, so the file stays right under `cmake --install --prefix <elsewhere>` and when the
# whole tree is moved; absolute install directories are written as they are.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(R35A_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(R35A_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(R35A_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH R35A_PC_UP "/r35a-prefix/${R35A_PKGCONFIG_INSTALL_DIR}" "/r35a-prefix")
  string(REGEX REPLACE "/$" "" R35A_PC_UP "${R35A_PC_UP}")
  set(R35A_PC_PREFIX "\${pcfiledir}/${R35A_PC_UP}")
  set(R35A_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(R35A_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# What a static link needs besides the archive; the shared library carries its own dependencies.
set(R35A_PC_LIBS_PRIVATE "-lm")
if(CMAKE_THREAD_LIBS_INIT)
  string(APPEND R35A_PC_LIBS_PRIVATE " ${CMAKE_THREAD_LIBS_INIT}")
endif()
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND R35A_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
configure_file("${CMAKE_CURRENT_LIST_DIR}/rdna35attn.pc.in" "${R35A_PACKAGE_BUILD_DIR}/rdna35attn.pc" @ONLY)
install(FILES "${R35A_PACKAGE_BUILD_DIR}/rdna35attn.pc"
  DESTINATION "${R35A_PKGCONFIG_INSTALL_DIR}" COMPONENT development)
