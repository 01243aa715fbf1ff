# Every dependency is found on the system (Debian packages), never vendored or downloaded.
# A missing one stops configure with the name of the Debian package that provides it.
find_package(Threads REQUIRED)

find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR "CUDA toolkit not found: install NVIDIA's cuda-toolkit (nvcc on PATH); "
                      "CUB and Thrust come with it.")
endif()

find_path(STB_INCLUDE_DIR stb_image.h PATH_SUFFIXES stb)
find_path(STB_WRITE_INCLUDE_DIR stb_image_write.h PATH_SUFFIXES stb)
if(NOT STB_INCLUDE_DIR OR NOT STB_WRITE_INCLUDE_DIR)
  message(FATAL_ERROR "stb_image.h / stb_image_write.h not found: apt-get install libstb-dev")
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
