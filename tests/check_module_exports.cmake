# check_module_exports.cmake — the Python extension module exports its init function alone and
# takes the C++ runtime from the system's shared libstdc++ (python/exports.map). Run as
#   cmake -DNM=<nm> -DREADELF=<readelf> -DMODULE=<_histeq*.so> -P check_module_exports.cmake
# Fails naming every other defined dynamic symbol (anything that could interpose on, or be
# interposed by, another library in the process: torch's, CuPy's, OpenCV's), or when
# libstdc++.so is not among the module's NEEDED libraries (a static C++ runtime).
execute_process(COMMAND ${NM} -D --defined-only ${MODULE} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D failed on ${MODULE}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${syms}")
set(init_found FALSE)
set(others "")
foreach(line IN LISTS lines)
  if(line MATCHES " PyInit__histeq$")
    set(init_found TRUE)
  else()
    string(APPEND others "  ${line}\n")
  endif()
endforeach()
if(NOT init_found)
  message(FATAL_ERROR "${MODULE} does not export PyInit__histeq: the check would prove nothing")
endif()
if(others)
  message(FATAL_ERROR "${MODULE} exports more than PyInit__histeq:\n${others}")
endif()
execute_process(COMMAND ${READELF} -d ${MODULE} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d failed on ${MODULE}")
endif()
if(NOT dyn MATCHES "NEEDED[^\n]*libstdc\\+\\+\\.so")
  message(FATAL_ERROR "${MODULE} does not load the shared libstdc++ (a static C++ runtime?):\n"
                      "${dyn}")
endif()
message(STATUS "${MODULE}: exports PyInit__histeq alone; shared libstdc++")
