# Run by CTest (test "install"): checks that luminal works as a package.
#  1. cmake --install the build tree into a scratch prefix;
#  2. build tests/install_consumer against it with find_package(luminal);
#  3. build tests/subdir_consumer, which pulls luminal in with add_subdirectory;
# and run both quickstart programs, expecting EXPECTED in their output.
# Inputs (-D): LUMINAL_SOURCE_DIR LUMINAL_BINARY_DIR WORK_DIR CONSUMER_DIR
#              GENERATOR CXX_COMPILER CXX_LAUNCHER ('|'-separated) BUILD_TYPE EXPECTED
cmake_minimum_required(VERSION 3.25)

foreach(var LUMINAL_SOURCE_DIR LUMINAL_BINARY_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX_COMPILER EXPECTED)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
string(REPLACE "|" ";" CXX_LAUNCHER "${CXX_LAUNCHER}")

# Fresh every time: stale headers in the prefix would hide a broken install.
set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run_step name)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${name} failed (${rc})\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  message(STATUS "install test: ${name}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# Same toolchain as the parent build. An initial-cache file carries the
# launcher, which is a list and would not survive a -D argument.
file(WRITE "${WORK_DIR}/init.cmake"
  "set(CMAKE_CXX_COMPILER [==[${CXX_COMPILER}]==] CACHE FILEPATH \"\")\n"
  "set(CMAKE_CXX_COMPILER_LAUNCHER [==[${CXX_LAUNCHER}]==] CACHE STRING \"\")\n"
  "set(CMAKE_BUILD_TYPE [==[${BUILD_TYPE}]==] CACHE STRING \"\")\n")
set(common_args -G "${GENERATOR}" -C "${WORK_DIR}/init.cmake")

function(build_and_check name src_dir)
  set(bin_dir "${WORK_DIR}/${name}")
  run_step("${name}: configure" ${CMAKE_COMMAND} -S "${src_dir}" -B "${bin_dir}" ${common_args} ${ARGN})
  run_step("${name}: build" ${CMAKE_COMMAND} --build "${bin_dir}" --config "${BUILD_TYPE}")
  # Single-config generators put it at the top, multi-config ones in a subfolder.
  set(exe "${bin_dir}/quickstart")
  if(NOT EXISTS "${exe}")
    set(exe "${bin_dir}/${BUILD_TYPE}/quickstart")
  endif()
  run_step("${name}: run" "${exe}")
  string(FIND "${step_output}" "${EXPECTED}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "install test: ${name}: output\n  '${step_output}'\ndoes not contain\n  '${EXPECTED}'")
  endif()
  message(STATUS "install test: ${name}: output matches")
endfunction()

# 1 + 2: install, then find_package from the prefix.
run_step("install" ${CMAKE_COMMAND} --install "${LUMINAL_BINARY_DIR}" --prefix "${prefix}" --config "${BUILD_TYPE}")
build_and_check(install_consumer "${CONSUMER_DIR}/install_consumer"
  "-DCMAKE_PREFIX_PATH=${prefix}")

# 3: add_subdirectory of the source tree.
build_and_check(subdir_consumer "${CONSUMER_DIR}/subdir_consumer"
  "-DLUMINAL_SOURCE_DIR=${LUMINAL_SOURCE_DIR}")
