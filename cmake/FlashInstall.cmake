# Install rules and the FlashConfig.cmake package. Included last from the top
# CMakeLists, so it sees every library under lib/ and installs libraries added
# later without being edited.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FLASH_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/flash")

# add_mlir_library(... DISABLE_INSTALL) keeps our libraries out of MLIR's own
# export set; collect them from the lib/ tree instead.
function(flash_collect_libraries dir out)
  set(libs)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "SHARED_LIBRARY")
      get_target_property(skip ${t} FLASH_NO_INSTALL)
      if(NOT skip)
        list(APPEND libs ${t})
      endif()
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    flash_collect_libraries("${sub}" sublibs)
    list(APPEND libs ${sublibs})
  endforeach()
  set(${out} ${libs} PARENT_SCOPE)
endfunction()

flash_collect_libraries("${PROJECT_SOURCE_DIR}/lib" FLASH_INSTALLED_LIBRARIES)
foreach(t IN LISTS FLASH_INSTALLED_LIBRARIES)
  target_include_directories(${t} INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${t} INTERFACE cxx_std_17)
endforeach()

# One target for "all of flash": the registration library pulls in the rest.
add_library(FlashAll INTERFACE)
target_link_libraries(FlashAll INTERFACE MLIRFlashRegistration)

# Installed binaries find Debian's libMLIR/libLLVM without LD_LIBRARY_PATH.
set(FLASH_INSTALL_RPATH "\$ORIGIN/../${CMAKE_INSTALL_LIBDIR};${LLVM_LIBRARY_DIR}")
set_target_properties(flash-opt FlashPlugin PROPERTIES
  INSTALL_RPATH "${FLASH_INSTALL_RPATH}")
foreach(t IN LISTS FLASH_INSTALLED_LIBRARIES)
  get_target_property(type ${t} TYPE)
  if(type STREQUAL "SHARED_LIBRARY")
    set_target_properties(${t} PROPERTIES INSTALL_RPATH "${FLASH_INSTALL_RPATH}")
  endif()
endforeach()

install(TARGETS ${FLASH_INSTALLED_LIBRARIES} FlashAll flash-opt
  EXPORT FlashTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The plugin is dlopen'ed by mlir-opt, never linked: installed, not exported.
install(TARGETS FlashPlugin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# Headers, the .td sources (for projects that run tablegen on our ops) and
# the generated .inc files the headers include.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td" PATTERN "*.def")
install(DIRECTORY "${PROJECT_BINARY_DIR}/include/"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.inc" PATTERN "*.h"
  PATTERN "CMakeFiles" EXCLUDE)

install(EXPORT FlashTargets NAMESPACE Flash::
  DESTINATION ${FLASH_INSTALL_CMAKEDIR})

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/FlashConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/FlashConfig.cmake"
  INSTALL_DESTINATION ${FLASH_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/FlashConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/cmake/FlashConfig.cmake"
  "${PROJECT_BINARY_DIR}/cmake/FlashConfigVersion.cmake"
  DESTINATION ${FLASH_INSTALL_CMAKEDIR})
