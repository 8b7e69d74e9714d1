# flash_add_gpu_library(<name> SOURCE <file.mlir> [OUTPUT_DIR <dir>] [CHIP sm_90a]
#                       [FEATURES +ptx80] [FORMAT bin|isa|fatbin] [PIPELINE <p>]
#                       [OPT_TOOL <exe>] [DEPENDS <targets>...])
# Builds lib<name>.so from a GPU module with tools/flash-gpu-build.py (pipeline ->
# mlir-translate -> llc -> cc -shared against libflash_cuda_runtime) and copies the
# runtime next to it, so OUTPUT_DIR can be shipped to a machine without LLVM.
function(flash_add_gpu_library name)
  cmake_parse_arguments(ARG "" "SOURCE;OUTPUT_DIR;CHIP;FEATURES;FORMAT;PIPELINE;OPT_TOOL" "DEPENDS" ${ARGN})
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  set(out ${ARG_OUTPUT_DIR}/lib${name}.so)
  set(cmd ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/flash-gpu-build.py
      ${ARG_SOURCE} -o ${out} --runtime-dir $<TARGET_FILE_DIR:flash_cuda_runtime> --bundle)
  foreach(opt CHIP FEATURES FORMAT PIPELINE)
    if(ARG_${opt})
      string(TOLOWER ${opt} flag)
      list(APPEND cmd --${flag}=${ARG_${opt}})
    endif()
  endforeach()
  if(ARG_OPT_TOOL)
    list(APPEND cmd --opt-tool=${ARG_OPT_TOOL})
  endif()
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E env CUDA_HOME=${FLASH_CUDA_HOME} ${cmd}
    DEPENDS ${ARG_SOURCE} ${PROJECT_SOURCE_DIR}/tools/flash-gpu-build.py
            flash_cuda_runtime ${ARG_DEPENDS}
    COMMENT "Building GPU kernel library lib${name}.so"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${out})
endfunction()
