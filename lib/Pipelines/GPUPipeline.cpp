//===- GPUPipeline.cpp - flash-gpu-pipeline -------------------------------===//
#include "flash/Conversion/Passes.h"
#include "flash/Pipelines/Pipelines.h"

#include "PipelineSteps.h"
#include "flash/Transforms/Passes.h"

#include "llvm/Support/FormatVariadic.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void flash::buildFlashGPUPipeline(OpPassManager &pm,
                                  const FlashGPUPipelineOptions &options) {
  // Raw attention (matmul, softmax, matmul) becomes flash.attention first;
  // a module that already holds the op goes through unchanged.
  if (options.raise) {
    pm.addNestedPass<func::FuncOp>(createFlashRaiseAttentionPass());
    // Folds the frontend's output rounding into the op (f32 -> bf16/f16).
    pm.addPass(createCanonicalizerPass());
  }
  // A function as a frontend wrote it: the ops around the attention become
  // linalg, tensors at the boundary the caller's device buffers and stream,
  // and every attention operand a view of a device buffer (the attention
  // writes straight into the caller's output where it is the result).
  addFrontendToLinalg(pm);
  pm.addPass(createFlashGPUFunctionBoundaryPass());
  GPUKernelOptions kernel = options.kernel.values();
  pm.addPass(createConvertFlashToGPUPass(kernel));
  pm.addPass(createCanonicalizerPass());

  // The rest of the function runs on the GPU too, in order on the caller's
  // stream: its tensors bufferize into device buffers, its loops become one
  // thread per element, and what is left on the host only allocates and
  // launches.
  // Elementwise chains fuse into one kernel each, splat constants into
  // their users. (Buffers are freed by flash-gpu-stream-order, in stream order: the
  // ownership-based deallocation refuses the TMA descriptors and launches.)
  addTextualPipeline(pm, "linalg-fuse-elementwise-ops,eliminate-empty-tensors,"
                         "one-shot-bufferize,canonicalize");
  pm.addPass(createFlashMemrefCopyToLinalgPass());
  addTextualPipeline(pm, "func.func(convert-linalg-to-parallel-loops,"
                         "flash-map-loops-to-grid),"
                         "convert-parallel-loops-to-gpu,gpu-kernel-outlining,"
                         "func.func(flash-gpu-stream-order),canonicalize");
  // Static sizes into the kernels that are launched with them.
  if (options.specializeConstants)
    pm.addPass(createFlashSpecializeKernelConstantsPass());

  // Kernels to NVVM and a serialized binary, host code (TMA descriptor
  // creation, launch on the given stream) to LLVM.
  FlashNVVMPipelineOptions nvvm;
  nvvm.chip = kernel.chip;
#define FLASH_NVVM_TARGET_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)              \
  nvvm.FIELD = options.FIELD;
#include "flash/Pipelines/NVVMTargetOptions.def"
  buildFlashLowerToNVVMPipeline(pm, nvvm);
}

void flash::buildFlashLowerToNVVMPipeline(
    OpPassManager &pm, const FlashNVVMPipelineOptions &options) {
  // The passes and options of MLIR 22's gpu-lower-to-nvvm-pipeline, in its
  // order (mlir-opt --dump-pass-pipeline shows them), with one pass added.
  addTextualPipeline(
      pm, llvm::formatv(
              "convert-nvgpu-to-nvvm,gpu-kernel-outlining,"
              "convert-vector-to-scf,convert-scf-to-cf,convert-nvvm-to-llvm,"
              "convert-func-to-llvm,expand-strided-metadata,"
              "nvvm-attach-target{{O={0} chip={1} features={2}},"
              "lower-affine,convert-arith-to-llvm,"
              "convert-index-to-llvm{{index-bitwidth=64},canonicalize,cse,"
              "gpu.module(convert-gpu-to-nvvm{{index-bitwidth=64},"
              "canonicalize,cse,reconcile-unrealized-casts{4}),"
              "gpu-to-llvm,gpu-module-to-binary{{format={3}},"
              "convert-math-to-llvm,canonicalize,cse,"
              "reconcile-unrealized-casts",
              options.optLevel.getValue(), options.chip.getValue(),
              options.features.getValue(), options.format.getValue(),
              options.tensormapParams ? ",flash-tensormap-kernel-params"
                                      : "")
              .str());
}

void flash::registerFlashGPUPipeline() {
  PassPipelineRegistration<FlashGPUPipelineOptions>(
      "flash-gpu-pipeline",
      "flash.attention to a Hopper kernel in a gpu.binary plus LLVM host code "
      "(set CUDA_HOME for ptxas)",
      buildFlashGPUPipeline);
  PassPipelineRegistration<FlashNVVMPipelineOptions>(
      "flash-lower-to-nvvm",
      "GPU modules and their host code to NVVM/LLVM and a gpu.binary, TMA "
      "descriptors passed to kernels by value (set CUDA_HOME for ptxas)",
      buildFlashLowerToNVVMPipeline);
}
