# Install rules: `cmake --install build --prefix DIR` writes
#   DIR/bin/scaleout                                 the command
#   DIR/include/scaleout/*.h                         the public headers
#   DIR/<libdir>/libscaleout{_job,_comm,,_core}.a    the static libraries built
#   DIR/<libdir>/libscaleout-prof.so                 PMPI profiler (LD_PRELOAD), with MPI
#   DIR/<libdir>/pkgconfig/scaleout.pc               pkg-config (relocatable)
#   DIR/<libdir>/cmake/scaleout/                     CMake package: find_package(scaleout)
# <libdir> is GNUInstallDirs' (lib; lib/<multiarch> for the /usr prefix on Debian).
# Included at the end of the top-level CMakeLists.txt, after every target:
# scaleout_comm (SCALEOUT_MPI) and scaleout_job exist in some builds only.
include(CMakePackageConfigHelpers)

# Each library before the libraries it uses: the static link order.
set(SO_INSTALL_LIBS)
foreach(t scaleout_job scaleout_comm scaleout scaleout_core)
  if(TARGET ${t})
    list(APPEND SO_INSTALL_LIBS ${t})
  endif()
endforeach()

# Names in the CMake package: scaleout::job, scaleout::comm, scaleout::scaleout
# (the engine, libscaleout.a) and scaleout::core.
set(SO_EXPORT_NAME_scaleout_job job)
set(SO_EXPORT_NAME_scaleout_comm comm)
set(SO_EXPORT_NAME_scaleout scaleout)
set(SO_EXPORT_NAME_scaleout_core core)
foreach(t ${SO_INSTALL_LIBS})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${SO_EXPORT_NAME_${t}})
  # A library that names include/ plainly (target_include_directories(t
  # PUBLIC include)) would put the source tree into the installed package,
  # which CMake refuses; such an entry becomes SO_PUBLIC_INCLUDE's pair.
  get_target_property(dirs ${t} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    set(fixed)
    foreach(d ${dirs})
      if(d STREQUAL "${PROJECT_SOURCE_DIR}/include")
        list(APPEND fixed ${SO_PUBLIC_INCLUDE})
      else()
        list(APPEND fixed "${d}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES fixed)
    set_target_properties(${t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${fixed}")
  endif()
endforeach()
# The sanitizer build's objects call the ASan/UBSan runtimes: whoever links
# them must link those too (add_link_options above reaches our targets only).
if(SCALEOUT_SANITIZE)
  set(SO_SANITIZE_LINK -fsanitize=address,undefined)
  target_link_options(scaleout_core INTERFACE $<INSTALL_INTERFACE:${SO_SANITIZE_LINK}>)
endif()

install(TARGETS ${SO_INSTALL_LIBS} EXPORT scaleoutTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/scaleout DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
# The installed command and profiler keep the run path to an MPI outside the
# linker's default directories (Debian's Open MPI: lib/.../openmpi/lib).
set_target_properties(scaleout_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS scaleout_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET scaleout_pmpi)
  set_target_properties(scaleout_pmpi PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS scaleout_pmpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# ---- pkg-config: scaleout.pc ----
# so_pc_lib(OUT PATH): "-lNAME" for a library file, with "-LDIR" first when
# DIR is not one the compiler searches anyway.
function(so_pc_lib out path)
  get_filename_component(dir "${path}" DIRECTORY)
  get_filename_component(name "${path}" NAME_WE)
  string(REGEX REPLACE "^lib" "" name "${name}")
  set(flags "-l${name}")
  if(dir AND NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
    set(flags "-L${dir} ${flags}")
  endif()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

set(SO_PC_LIBS)
foreach(t ${SO_INSTALL_LIBS})
  get_target_property(name ${t} OUTPUT_NAME)
  if(NOT name)
    set(name ${t})
  endif()
  string(APPEND SO_PC_LIBS " -l${name}")
endforeach()
# What the static libraries need, in link order. MPI is not listed: programs
# using scaleout_comm or scaleout_job are built with the MPI's compiler
# wrapper (the pc file's `mpicc` variable names the one scaleout was built with).
so_pc_lib(SO_PC_DNNL "${DNNL_LIB}")
list(GET ZLIB_LIBRARIES 0 SO_ZLIB_FILE)
so_pc_lib(SO_PC_ZLIB "${SO_ZLIB_FILE}")
set(SO_PC_LIBS_PRIVATE "${SO_PC_DNNL} ${SO_PC_ZLIB} ${OpenMP_C_FLAGS} -lpthread -lm")
if(TURBOJPEG_LIB AND TURBOJPEG_INCLUDE) # image data sets' JPEG decoder
  string(PREPEND SO_PC_LIBS_PRIVATE "-lturbojpeg ")
endif()
if(SCALEOUT_SANITIZE)
  string(APPEND SO_PC_LIBS_PRIVATE " ${SO_SANITIZE_LINK}")
endif()
# Relocatable: every path is relative to the .pc file's own directory, so the
# file is right for any `cmake --install --prefix` (and for DESTDIR copies).
file(RELATIVE_PATH SO_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" SO_PC_UP "${SO_PC_UP}")
set(SO_PC_PREFIX "\${pcfiledir}/${SO_PC_UP}")
foreach(v LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${v}}")
    set(SO_PC_${v} "${CMAKE_INSTALL_${v}}")
  else()
    set(SO_PC_${v} "\${prefix}/${CMAKE_INSTALL_${v}}")
  endif()
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(WARNING "scaleout.pc: an absolute CMAKE_INSTALL_LIBDIR makes it non-relocatable")
  set(SO_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
endif()
# The MPI compiler wrapper of this build. Debian's plain mpicc follows the
# alternatives system (it may name the other MPI tomorrow): when the wrapper
# is that, record the flavour's own (mpicc.openmpi, mpicc.mpich) if it exists.
set(SO_PC_MPICC "")
if(TARGET scaleout_comm)
  set(SO_PC_MPICC "${MPI_C_COMPILER}")
  get_filename_component(mpicc_dir "${MPI_C_COMPILER}" DIRECTORY)
  get_filename_component(mpicc_name "${MPI_C_COMPILER}" NAME)
  set(flavour)
  if("${MPI_C_LIB_NAMES};${MPI_C_LIBRARIES}" MATCHES "mpich")
    set(flavour mpich)
  elseif("${MPI_C_LIB_NAMES};${MPI_C_LIBRARIES}" MATCHES "openmpi|(^|;)mpi(;|$)")
    set(flavour openmpi)
  endif()
  if(mpicc_name STREQUAL "mpicc" AND flavour AND EXISTS "${mpicc_dir}/mpicc.${flavour}")
    set(SO_PC_MPICC "${mpicc_dir}/mpicc.${flavour}")
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/scaleout.pc.in ${PROJECT_BINARY_DIR}/scaleout.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/scaleout.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- CMake package: find_package(scaleout) ----
# The package holds the libraries with what they link. A library that links
# one of this project's targets that is not installed (an object library, a
# CLI helper), or names a target through $<TARGET_NAME_IF_EXISTS> (exported
# unresolved), cannot be exported: then the package is left out with a
# warning instead of failing the build; scaleout.pc does not depend on it,
# and tests/install.sh fails on the missing package.
set(SO_EXPORT_OK TRUE)
foreach(t ${SO_INSTALL_LIBS})
  get_target_property(deps ${t} INTERFACE_LINK_LIBRARIES)
  if(NOT deps)
    continue()
  endif()
  foreach(d ${deps})
    string(REGEX REPLACE "^[$]<LINK_ONLY:(.*)>$" "\\1" d "${d}")
    set(bad)
    if(d MATCHES "TARGET_NAME_IF_EXISTS")
      set(bad "${d}: write if(TARGET ...) instead")
    elseif(TARGET "${d}" AND NOT d IN_LIST SO_INSTALL_LIBS)
      get_target_property(imported ${d} IMPORTED)
      if(NOT imported)
        set(bad "${d} is not installed")
      endif()
    endif()
    if(bad)
      message(WARNING "scaleout: no CMake package (find_package) is installed: ${t} links ${bad}")
      set(SO_EXPORT_OK FALSE)
    endif()
  endforeach()
endforeach()
if(NOT SO_EXPORT_OK)
  return()
endif()
set(SO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/scaleout)
if(TARGET scaleout_comm)
  set(SO_HAVE_COMM 1)
else()
  set(SO_HAVE_COMM 0)
endif()
get_filename_component(SO_DNNL_DIR "${DNNL_LIB}" DIRECTORY)
install(EXPORT scaleoutTargets NAMESPACE scaleout:: DESTINATION ${SO_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/scaleoutConfig.cmake.in
  ${PROJECT_BINARY_DIR}/scaleoutConfig.cmake INSTALL_DESTINATION ${SO_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/scaleoutConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/scaleoutConfig.cmake ${PROJECT_BINARY_DIR}/scaleoutConfigVersion.cmake
        DESTINATION ${SO_CMAKE_DIR})
