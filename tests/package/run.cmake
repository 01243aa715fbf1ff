# Installs the build into WORK_DIR/prefix, then configures, builds and runs the consumer projects:
#   SOURCE_DIR         find_package(histeq), histeq::histeq (needs the CUDA toolkit), and
#                      docs/library.md's example run on SAMPLE (not with -DCUDA=OFF: a CPU-only
#                      build installs no histeq::histeq)
#   SOURCE_DIR/host    histeq::host alone, configured with CUDA made unfindable
#                      (CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit), with COMPONENTS host and without
#                      (HISTEQ_PLAIN)
# then runs the installed `histeq lesson atomics` outside the source tree: it must find its photo
# where cmake --install put it.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()

# consumer(NAME SRC ARGS...): configure SRC into WORK_DIR/NAME with ARGS, then build it.
function(consumer name src)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${src} -B ${WORK_DIR}/${name}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${ARGN} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "configuring the consumer ${name} with find_package(histeq) failed: ${rc}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/${name} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "building the consumer ${name} failed: ${rc}")
  endif()
endfunction()

# check(WHAT COMMAND...): runs the command, fails the test when it exits non-zero.
function(check what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${what} failed: ${rc}")
  endif()
endfunction()

if(NOT CUDA)  # a CPU-only build (HISTEQ_CUDA=OFF) installs histeq::host alone
  message(STATUS "CPU-only build: histeq::histeq is not installed; the host consumers only")
else()
  consumer(build ${SOURCE_DIR})
  check("the consumer's check" ${WORK_DIR}/build/c)
  check("docs/library.md's example" ${WORK_DIR}/build/example ${SAMPLE} ${WORK_DIR}/example-eq.png)
  if(NOT EXISTS ${WORK_DIR}/example-eq.png)
    message(FATAL_ERROR "docs/library.md's example wrote no ${WORK_DIR}/example-eq.png")
  endif()
  execute_process(COMMAND ${WORK_DIR}/build/example ${SAMPLE} ${WORK_DIR}/x.webp RESULT_VARIABLE rc
                  OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "the example's usage error (.webp output) exited ${rc}, not 2")
  endif()
endif()

foreach(plain OFF ON)
  consumer(host-${plain} ${SOURCE_DIR}/host -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE
           -DHISTEQ_PLAIN=${plain})
  check("the CPU-only consumer (HISTEQ_PLAIN=${plain})" ${WORK_DIR}/host-${plain}/host_consumer
        ${SAMPLE} ${WORK_DIR}/host-${plain}.png)
endforeach()

# The installed tool, run from a folder outside the source tree, finds the lesson's photo in
# PREFIX/share/histeq/samples (no photo case without it).
execute_process(COMMAND ${WORK_DIR}/prefix/bin/histeq lesson atomics --size 64K --reps 2
                WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "the installed histeq lesson atomics failed (${rc}): ${err}")
endif()
if(NOT out MATCHES "photo:hubble_deep_field.jpg")
  message(FATAL_ERROR "the installed histeq lesson atomics ran no photo case:\n${err}${out}")
endif()
