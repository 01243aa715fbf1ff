# Every dependency is found on the system (Debian packages), never vendored or downloaded.
# A missing one stops configure with the name of the Debian package that provides it.
find_package(Threads REQUIRED)

if(HISTEQ_CUDA)
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    message(FATAL_ERROR "CUDA toolkit not found: install NVIDIA's cuda-toolkit (nvcc on PATH); "
                        "CUB and Thrust come with it. Or -DHISTEQ_CUDA=OFF: the CPU backend only.")
  endif()
endif()

find_path(STB_INCLUDE_DIR stb_image.h PATH_SUFFIXES stb)
find_path(STB_WRITE_INCLUDE_DIR stb_image_write.h PATH_SUFFIXES stb)
if(NOT STB_INCLUDE_DIR OR NOT STB_WRITE_INCLUDE_DIR)
  message(FATAL_ERROR "stb_image.h / stb_image_write.h not found: apt-get install libstb-dev")
endif()

find_path(SPNG_INCLUDE_DIR spng.h)
find_library(SPNG_LIBRARY spng)
if(NOT SPNG_INCLUDE_DIR OR NOT SPNG_LIBRARY)
  message(FATAL_ERROR "libspng not found (16-bit PNG): apt-get install libspng-dev")
endif()

find_package(cxxopts CONFIG QUIET)
if(NOT TARGET cxxopts::cxxopts)
  find_path(CXXOPTS_INCLUDE_DIR cxxopts.hpp)
  if(NOT CXXOPTS_INCLUDE_DIR)
    message(FATAL_ERROR "cxxopts not found: apt-get install libcxxopts-dev")
  endif()
  add_library(cxxopts::cxxopts INTERFACE IMPORTED)
  set_target_properties(cxxopts::cxxopts PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${CXXOPTS_INCLUDE_DIR})
endif()

find_package(nlohmann_json 3 CONFIG QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp)
  if(NOT NLOHMANN_JSON_INCLUDE_DIR)
    message(FATAL_ERROR "nlohmann/json.hpp not found: apt-get install nlohmann-json3-dev")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES ${NLOHMANN_JSON_INCLUDE_DIR})
endif()

if(HISTEQ_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    find_package(GTest QUIET)
  endif()
  if(NOT TARGET GTest::gtest_main)
    message(FATAL_ERROR "GoogleTest not found: apt-get install libgtest-dev (or -DHISTEQ_BUILD_TESTS=OFF)")
  endif()
endif()

# JPEG: libjpeg-turbo's libjpeg API (Debian libjpeg62-turbo-dev: jpeglib.h, jconfig.h under the
# multiarch folder, libjpeg.so.62). ICC profiles of PNGs are (de)compressed with libdeflate.
find_path(JPEGLIB_INCLUDE_DIR jpeglib.h)
find_path(JPEGLIB_CONFIG_DIR jconfig.h PATH_SUFFIXES ${CMAKE_LIBRARY_ARCHITECTURE})
find_library(JPEGLIB_LIBRARY NAMES jpeg)
if(NOT JPEGLIB_INCLUDE_DIR OR NOT JPEGLIB_CONFIG_DIR OR NOT JPEGLIB_LIBRARY)
  message(FATAL_ERROR "libjpeg (jpeglib.h, libjpeg.so) not found: apt-get install libjpeg62-turbo-dev")
endif()
find_path(LIBDEFLATE_INCLUDE_DIR libdeflate.h)
find_library(LIBDEFLATE_LIBRARY NAMES deflate)
if(NOT LIBDEFLATE_INCLUDE_DIR OR NOT LIBDEFLATE_LIBRARY)
  message(FATAL_ERROR "libdeflate not found: apt-get install libdeflate-dev")
endif()
# PNG output at the default level: ISA-L's igzip (Debian libisal-dev), a DEFLATE compressor that
# can end a strip with a sync flush, so strips of one image compress on several threads.
find_path(ISAL_INCLUDE_DIR isa-l/igzip_lib.h)
find_library(ISAL_LIBRARY NAMES isal)
if(NOT ISAL_INCLUDE_DIR OR NOT ISAL_LIBRARY)
  message(FATAL_ERROR "ISA-L (isa-l/igzip_lib.h, libisal.so) not found: apt-get install libisal-dev")
endif()

# nvJPEG (optional): CUDA::nvjpeg from the toolkit (NVIDIA's libnvjpeg-dev-13-0), else nvjpeg.h
# and libnvjpeg.so[.13] under HISTEQ_NVJPEG_ROOT (e.g. PyPI nvidia-nvjpeg's nvidia/cu13 folder,
# as .ci/run installs). Without it the build has the CPU JPEG codec only.
option(HISTEQ_WITH_NVJPEG "Use nvJPEG for GPU JPEG decode/encode when it is found" ON)
if(NOT HISTEQ_CUDA)
  set(HISTEQ_WITH_NVJPEG OFF)
endif()
set(HISTEQ_NVJPEG_ROOT "$ENV{HISTEQ_NVJPEG_ROOT}" CACHE PATH
    "Folder with include/nvjpeg.h and lib/libnvjpeg.so* (when the CUDA toolkit lacks nvJPEG)")
set(HISTEQ_NVJPEG_FOUND OFF)
if(HISTEQ_WITH_NVJPEG)
  find_path(NVJPEG_INCLUDE_DIR nvjpeg.h
    HINTS ${HISTEQ_NVJPEG_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} NO_CACHE)
  if(TARGET CUDA::nvjpeg AND NVJPEG_INCLUDE_DIR)
    set(HISTEQ_NVJPEG_LIBRARY CUDA::nvjpeg)
  else()
    find_library(NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.13
      HINTS ${HISTEQ_NVJPEG_ROOT}/lib ${HISTEQ_NVJPEG_ROOT}/lib64 NO_CACHE)
    if(NVJPEG_LIBRARY)
      set(HISTEQ_NVJPEG_LIBRARY ${NVJPEG_LIBRARY})
    endif()
  endif()
  if(NVJPEG_INCLUDE_DIR AND HISTEQ_NVJPEG_LIBRARY)
    set(HISTEQ_NVJPEG_FOUND ON)
    message(STATUS "nvJPEG: ${HISTEQ_NVJPEG_LIBRARY} (${NVJPEG_INCLUDE_DIR}/nvjpeg.h)")
  else()
    message(STATUS "nvJPEG not found: building the CPU JPEG codec only (set HISTEQ_NVJPEG_ROOT "
                   "or install NVIDIA's libnvjpeg-dev)")
  endif()
endif()

# The batch CLI's JSON Lines (cli.cpp).
find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp)
if(NOT NLOHMANN_JSON_INCLUDE_DIR)
  message(FATAL_ERROR "nlohmann/json.hpp not found: apt-get install nlohmann-json3-dev")
endif()
