# SPDX-License-Identifier: Apache-2.0
# Writes tdist.pc from cmake/tdist.pc.in. Two things are computed here rather
# than written by hand in the template:
#  - the prefix is relative to the .pc file (${pcfiledir}), so the file stays
#    right after `cmake --install build --prefix /anywhere`;
#  - Libs.private lists what libtdist was actually linked with (the
#    INTERFACE_LINK_LIBRARIES of tdist_obj, followed through imported targets
#    such as CUDA::cudart), so `pkg-config --static --libs tdist` names the
#    CUDA runtime, NVRTC and NCCL when the library was built with them.
# Packages that have a .pc of their own (OpenBLAS, cJSON) stay in
# Requires.private, as the template says.

# Appends to ${out} the linker flags of one link item (recursing into targets).
function(td__pc_item item out seen)
  set(flags "${${out}}")
  set(done "${${seen}}")
  if(item MATCHES "^::@")
    return() # CMake's marker of the directory a target_link_libraries call came from
  endif()
  if(item MATCHES "^\\$<LINK_ONLY:(.*)>$" OR item MATCHES "^\\$<BUILD_INTERFACE:(.*)>$")
    set(item "${CMAKE_MATCH_1}")
  elseif(item MATCHES "^\\$<")
    return() # another generator expression: nothing a user links against
  endif()
  if(item IN_LIST done)
    return()
  endif()
  list(APPEND done "${item}")
  if(item MATCHES "^PkgConfig::")
    # covered by Requires.private
  elseif(item STREQUAL "Threads::Threads")
    list(APPEND flags "-pthread")
  elseif(TARGET "${item}")
    get_target_property(type "${item}" TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(loc "${item}" IMPORTED_LOCATION)
      if(NOT loc)
        get_target_property(loc "${item}" IMPORTED_LOCATION_RELEASE)
      endif()
      if(loc)
        td__pc_item("${loc}" flags done)
      endif()
    endif()
    get_target_property(deps "${item}" INTERFACE_LINK_LIBRARIES)
    if(deps)
      foreach(d IN LISTS deps)
        td__pc_item("${d}" flags done)
      endforeach()
    endif()
  elseif(IS_ABSOLUTE "${item}")
    get_filename_component(dir "${item}" DIRECTORY)
    get_filename_component(name "${item}" NAME)
    if(name MATCHES "^lib(.+)\\.(so|a)(\\.[0-9.]+)?$")
      set(lib "${CMAKE_MATCH_1}")
      if(CMAKE_MATCH_3)
        list(APPEND flags "-L${dir}" "-l:${name}") # only a versioned file exists (libnccl.so.2)
      else()
        list(APPEND flags "-L${dir}" "-l${lib}")
      endif()
    else()
      list(APPEND flags "${item}")
    endif()
  elseif(item MATCHES "^-")
    list(APPEND flags "${item}")
  elseif(item)
    list(APPEND flags "-l${item}")
  endif()
  set(${out} "${flags}" PARENT_SCOPE)
  set(${seen} "${done}" PARENT_SCOPE)
endfunction()

get_target_property(td__pc_deps tdist_obj INTERFACE_LINK_LIBRARIES)
set(td__pc_flags "")
set(td__pc_seen "")
foreach(item IN LISTS td__pc_deps)
  td__pc_item("${item}" td__pc_flags td__pc_seen)
endforeach()
# nvcc-compiled objects in the library (operators, the nccl transport) call
# the C++ runtime (guards of function statics, exception personality).
if(TD_HAVE_CUDA)
  list(APPEND td__pc_flags "-lstdc++")
endif()
list(REMOVE_DUPLICATES td__pc_flags)
list(JOIN td__pc_flags " " TD_PC_LIBS_PRIVATE)

# ${pcfiledir} is <prefix>/<libdir>/pkgconfig: climb one level per component.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TD_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(TD_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(TD_PC_PREFIX "\${pcfiledir}/..")
  string(REPLACE "/" ";" td__pc_parts "${CMAKE_INSTALL_LIBDIR}")
  foreach(part IN LISTS td__pc_parts)
    if(part)
      string(APPEND TD_PC_PREFIX "/..")
    endif()
  endforeach()
  set(TD_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TD_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(TD_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/tdist.pc.in ${CMAKE_BINARY_DIR}/tdist.pc @ONLY)
