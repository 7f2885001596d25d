# tern_add_test(name SOURCES a.c b.c LIBS x y LABELS unit [ARGS ...] [TIMEOUT s])
function(tern_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${T_LIBS} tern_common m)
  tern_target_warnings(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "TERN_SOURCE_DIR=${CMAKE_SOURCE_DIR};TERN_BUILD_DIR=${CMAKE_BINARY_DIR}"
    SKIP_RETURN_CODE 77)
endfunction()

# tern_test_depends(name target...): build these program targets (those that exist in this
# configuration) before test `name`, for tests that run the programs as processes.
function(tern_test_depends name)
  foreach(dep ${ARGN})
    if(TARGET ${dep})
      add_dependencies(${name} ${dep})
    endif()
  endforeach()
endfunction()
