# cmake -P script behind the install-consumer test: every step must succeed
# from the installed tree alone (no build-tree paths handed to the consumer).
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(RUN_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")

run("cmake --install" ${CMAKE_COMMAND} --install "${FLASH_BINARY_DIR}"
    --prefix "${prefix}")
foreach(f include/flash/InitAll.h include/flash/Transforms/Passes.td
          include/flash/Transforms/Passes.h.inc
          include/flash/Dialect/Flash/IR/FlashOps.td
          include/flash/Dialect/Flash/IR/FlashOps.h.inc
          lib/cmake/flash/FlashConfig.cmake lib/cmake/flash/FlashTargets.cmake
          bin/flash-opt lib/FlashPlugin.so include/flash-c/Flash.h)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

set(launcher)
if(COMPILER_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${COMPILER_LAUNCHER})
endif()
run("configure examples/consumer" ${CMAKE_COMMAND} -G "${GENERATOR}"
    -S "${FLASH_SOURCE_DIR}/examples/consumer" -B "${WORK_DIR}/consumer"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_C_COMPILER=${C_COMPILER}
    ${launcher})
run("build examples/consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("run flash-consumer" "${WORK_DIR}/consumer/flash-consumer")
if(NOT RUN_OUTPUT MATCHES "c\\+\\+ pipeline: ok\ntextual pipeline: ok")
  message(FATAL_ERROR "unexpected consumer output:\n${RUN_OUTPUT}")
endif()

run("run flash-capi-consumer" "${WORK_DIR}/consumer/flash-capi-consumer")
if(NOT RUN_OUTPUT MATCHES "c api: ok")
  message(FATAL_ERROR "unexpected C API consumer output:\n${RUN_OUTPUT}")
endif()

# The installed driver and plugin work from the prefix.
set(input "${FLASH_SOURCE_DIR}/test/Plugin/plugin.mlir")
run("installed flash-opt" "${prefix}/bin/flash-opt" "${input}"
    -split-input-file --flash-decompose-attention)
run("mlir-opt with the installed plugin" "${MLIR_OPT}" "${input}"
    -split-input-file --load-dialect-plugin=${prefix}/lib/FlashPlugin.so
    --load-pass-plugin=${prefix}/lib/FlashPlugin.so
    "--pass-pipeline=builtin.module(flash-decompose-attention)")
if(RUN_OUTPUT MATCHES "flash\\.attention")
  message(FATAL_ERROR "plugin pipeline left flash.attention behind")
endif()
# The Python package finds the installed C API by itself. (No ';' in the
# code: run() passes its command through a CMake list.)
if(PYTHON)
  run("installed flash_mlir" ${CMAKE_COMMAND} -E env --unset=FLASH_MLIR_LIB_DIR
      --unset=FLASH_MLIR_CAPI --unset=FLASH_MLIR_BUILD_DIR PYTHONPATH=${prefix}/python
      ${PYTHON} -c "import flash_mlir\nprint(flash_mlir.library_path())\nprint(flash_mlir.compile('func.func @f() { return }', pipeline='canonicalize'))")
  if(NOT RUN_OUTPUT MATCHES "^${prefix}/lib/libFlashCAPI.so")
    message(FATAL_ERROR "flash_mlir did not use the installed C API:\n${RUN_OUTPUT}")
  endif()
endif()
message(STATUS "install-consumer: ok")
