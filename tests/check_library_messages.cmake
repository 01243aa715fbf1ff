# check_library_messages.cmake — the library speaks of itself: no string literal in the library's
# rooms (core/, include/, kernels/, src/cpu, src/io, src/pipeline) names a command-line option
# ("--backend cuda", "--decoder gpu"). A front end adds its own words (the CLI: cli::with_hints;
# the Python package its arguments) to the library's messages. Run as
#   cmake -DROOT=<repository> -P tests/check_library_messages.cmake
# It fails naming file:line and the literal. Comments are not checked (a line whose code part
# starts with // or ///, or a trailing // comment).
cmake_minimum_required(VERSION 3.24)
if(NOT ROOT)
  message(FATAL_ERROR "check_library_messages: pass -DROOT=<repository root>")
endif()
set(found 0)
set(scanned 0)
foreach(dir core include kernels src/cpu src/io src/pipeline)
  file(GLOB_RECURSE files "${ROOT}/${dir}/*.hpp" "${ROOT}/${dir}/*.cpp" "${ROOT}/${dir}/*.cu"
       "${ROOT}/${dir}/*.cuh" "${ROOT}/${dir}/*.h")
  list(SORT files)
  foreach(f ${files})
    math(EXPR scanned "${scanned} + 1")
    file(STRINGS "${f}" lines)
    file(RELATIVE_PATH rel "${ROOT}" "${f}")
    set(lineno 0)
    foreach(line IN LISTS lines)
      math(EXPR lineno "${lineno} + 1")
      if(line MATCHES "^[ \t]*//")
        continue()
      endif()
      # The code before a trailing comment (a // outside quotes is taken as the comment's start;
      # a literal holding // is rare enough here to be checked whole).
      string(REGEX REPLACE "^([^\"]*(\"[^\"]*\"[^\"]*)*)//.*$" "\\1" code "${line}")
      if(code MATCHES "\"[^\"]*--[a-z][a-z-]*[^\"]*\"")
        message("${rel}:${lineno}: a library message names a command-line option: ${CMAKE_MATCH_0}")
        math(EXPR found "${found} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
if(scanned EQUAL 0)
  message(FATAL_ERROR "check_library_messages: no sources under ${ROOT}")
endif()
if(found GREATER 0)
  message(FATAL_ERROR "check_library_messages: ${found} library messages name command-line "
                      "options; say it in the library's terms and let the front end add its own")
endif()
message(STATUS "check_library_messages: ${scanned} files, no command-line option in a message")
