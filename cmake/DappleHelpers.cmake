# dapple_layer(NAME DIR DEPS ...): a static library made of every .cc under src/dapple/DIR and
# its sub-folders.
# Globbing keeps adding a file a one-step change; CONFIGURE_DEPENDS re-globs on build.
function(dapple_layer name dir)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/dapple/${dir}/*.cc)
  if(NOT srcs)  # a layer not written yet still configures
    set(srcs ${PROJECT_SOURCE_DIR}/cmake/empty.cc)
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# dapple_test_dir(NAME DIR LABEL DEPS ...): one GoogleTest executable of every *_test.cc under
# tests/DIR, its tests registered with ctest under LABEL.
function(dapple_test_dir name dir label)
  cmake_parse_arguments(ARG "" "TIMEOUT" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${dir}/*.cc)
  if(NOT srcs)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(DAPPLE_SANITIZE)  # instrumented code runs several times slower; same tests, more time
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 6")
  endif()
  add_executable(${name} ${srcs})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    DAPPLE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    DAPPLE_DATA_DIR="${PROJECT_SOURCE_DIR}/data"
    DAPPLE_BINARY="$<TARGET_FILE:dapple>"
    DAPPLE_PYTHON="${DAPPLE_PYTHON}")  # the Python of dapple's torch: references run on it
  if(DAPPLE_SANITIZE)  # lets a test shrink a statistical sweep that adds no coverage
    target_compile_definitions(${name} PRIVATE DAPPLE_SANITIZED=1)
  endif()
  add_dependencies(${name} dapple)
  if(NOT label STREQUAL "unit")
    dapple_torch_pch(${name})
  endif()
  # dapple-torch for the tests that run it; only those of the torch layers wait for its build.
  if(TARGET dapple-torch)
    target_compile_definitions(${name} PRIVATE DAPPLE_TORCH_BINARY="$<TARGET_FILE:dapple-torch>")
    if(NOT label STREQUAL "unit")
      add_dependencies(${name} dapple-torch)
    endif()
  endif()
  # Tests keep to a cache folder of their own: a test's `dapple calibrate` must not replace
  # the user's calibration of `local`, nor the user's change what a test's `local` is.
  gtest_discover_tests(${name} PROPERTIES LABELS ${label} TIMEOUT ${ARG_TIMEOUT}
                       ENVIRONMENT "DAPPLE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache"
                       DISCOVERY_TIMEOUT 60)
endfunction()

# dapple_torch_pch(TARGET): TARGET compiles with the one <torch/torch.h> precompiled header of
# dapple_cpu. Any file that includes a runtime or models header pulls in libtorch's headers
# (17-25 s a file on 2 cores); the precompiled header saves about 10 s of it.
function(dapple_torch_pch target)
  target_precompile_headers(${target} REUSE_FROM dapple_cpu)
endfunction()
