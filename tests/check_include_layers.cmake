# check_include_layers.cmake — the rooms of docs/architecture.md, enforced: every
# `#include "..."` of every file in a room must name a file of that room or of a room it may
# include. Run as
#   cmake -DROOT=<repository> -P tests/check_include_layers.cmake
# It fails naming file:line, the included file and the rooms allowed there.
#
# An include is resolved as the compiler does: first beside the including file, then under the
# include roots core/, include/, kernels/, src/ (in that order); the first existing file wins.
# Includes that resolve to no file of the repository (the CUDA toolkit's, the generated
# histeq_build_commit.hpp) are not the layers' business and are skipped.
#
# With -DEXPECT="a/b.cpp:3;c/d.hpp:7" (the self-test on tests/layers_fixture) the script
# succeeds only when the violations found are exactly those locations, so the check is shown to
# fail where it must.
cmake_minimum_required(VERSION 3.24)
if(NOT ROOT)
  message(FATAL_ERROR "check_include_layers: pass -DROOT=<repository root>")
endif()
get_filename_component(ROOT "${ROOT}" ABSOLUTE)

# Room name, folder (relative to ROOT), rooms it may include besides itself. Most specific
# folders first: a file belongs to the first room whose folder holds it.
set(rooms core kernel_support kernels api cpu io pipeline bench cli python)
set(core_dir core)
set(core_may "")
# kernels/support (device queries, CUDA checks, device buffers, programmatic launch) is below
# every kernel family (histogram, lesson, equalize, clahe, u16, batched), as CUB's utilities are
# below its block, agent and dispatch layers.
set(kernel_support_dir kernels/support)
set(kernel_support_may core)
set(kernels_dir kernels)
set(kernels_may kernel_support core)
set(api_dir include)
set(api_may core)
set(cpu_dir src/cpu)
set(cpu_may api core)
set(io_dir src/io)
set(io_may api core)
set(pipeline_dir src/pipeline)
set(pipeline_may io cpu api kernels kernel_support core)
set(bench_dir src/bench)
set(bench_may pipeline io cpu api kernels kernel_support core)
set(cli_dir src/cli)
set(cli_may bench pipeline io cpu api kernels kernel_support core)
set(python_dir python/src)
set(python_may api kernels kernel_support core)
set(include_roots core include kernels src)

function(room_of path out)  # path: absolute
  file(RELATIVE_PATH rel "${ROOT}" "${path}")
  foreach(r ${rooms})
    string(LENGTH "${${r}_dir}/" n)
    string(SUBSTRING "${rel}" 0 ${n} head)
    if(head STREQUAL "${${r}_dir}/")
      set(${out} ${r} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

set(found "")
set(messages "")
set(scanned 0)
foreach(r ${rooms})
  if(NOT IS_DIRECTORY "${ROOT}/${${r}_dir}")
    continue()
  endif()
  file(GLOB_RECURSE files "${ROOT}/${${r}_dir}/*.hpp" "${ROOT}/${${r}_dir}/*.cpp"
       "${ROOT}/${${r}_dir}/*.cu" "${ROOT}/${${r}_dir}/*.cuh" "${ROOT}/${${r}_dir}/*.h")
  list(SORT files)
  foreach(f ${files})
    room_of("${f}" own)
    if(NOT own STREQUAL r)  # a file of a more specific room, scanned there
      continue()
    endif()
    math(EXPR scanned "${scanned} + 1")
    file(STRINGS "${f}" lines)
    get_filename_component(dir "${f}" DIRECTORY)
    file(RELATIVE_PATH frel "${ROOT}" "${f}")
    set(lineno 0)
    foreach(line IN LISTS lines)
      math(EXPR lineno "${lineno} + 1")
      if(own STREQUAL "core" AND line MATCHES "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>")
        # core is the standard library's only: <cstdint>, <vector>, never <cuda.h> or <x/y.hpp>.
        set(sys "${CMAKE_MATCH_1}")
        if(sys MATCHES "[./]")
          list(APPEND found "${frel}:${lineno}")
          string(APPEND messages "${frel}:${lineno}: room 'core' includes <${sys}>; "
                 "core may include only the C++ standard library\n")
        endif()
        continue()
      endif()
      if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
        continue()
      endif()
      set(inc "${CMAKE_MATCH_1}")
      set(target "")
      foreach(base "${dir}" ${include_roots})
        if(NOT IS_ABSOLUTE "${base}")
          set(base "${ROOT}/${base}")
        endif()
        if(EXISTS "${base}/${inc}" AND NOT IS_DIRECTORY "${base}/${inc}")
          get_filename_component(target "${base}/${inc}" ABSOLUTE)
          break()
        endif()
      endforeach()
      if(target STREQUAL "")
        continue()
      endif()
      room_of("${target}" theirs)
      if(theirs STREQUAL "" OR theirs STREQUAL own OR theirs IN_LIST ${own}_may)
        continue()
      endif()
      file(RELATIVE_PATH trel "${ROOT}" "${target}")
      set(may ${own} ${${own}_may})
      string(REPLACE ";" ", " may "${may}")
      list(APPEND found "${frel}:${lineno}")
      string(APPEND messages "${frel}:${lineno}: room '${own}' (${${own}_dir}/) includes "
             "\"${inc}\" = ${trel}, of room '${theirs}', which it may not include; "
             "'${own}' may include: ${may}\n")
    endforeach()
  endforeach()
endforeach()

list(LENGTH found n)
if(DEFINED EXPECT)
  set(want ${EXPECT})
  list(SORT want)
  set(got ${found})
  list(SORT got)
  message("${messages}")
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "check_include_layers: expected violations at '${want}', found '${got}'")
  endif()
  message(STATUS "check_include_layers: ${n} violations, exactly the expected ones")
  return()
endif()
if(scanned EQUAL 0)
  message(FATAL_ERROR "check_include_layers: no source files under ${ROOT}'s rooms")
endif()
if(n GREATER 0)
  message("${messages}")
  message(FATAL_ERROR "check_include_layers: ${n} includes go up a layer (docs/architecture.md)")
endif()
message(STATUS "check_include_layers: ${scanned} files, every include stays in its room or below")
