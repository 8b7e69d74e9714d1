//===- GPUPipeline.cpp - flash-gpu-pipeline -------------------------------===//
#include "flash/Conversion/Passes.h"
#include "flash/Pipelines/Pipelines.h"
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/GPU/Pipelines/Passes.h"
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
  // The kernel stores into the caller's buffer, not a temporary.
  pm.addNestedPass<func::FuncOp>(createFlashAttentionIntoDestinationPass());
  GPUKernelOptions kernel = options.kernel.values();
  pm.addPass(createConvertFlashToGPUPass(kernel));
  pm.addPass(createCanonicalizerPass());

  // The upstream NVVM pipeline: kernels to NVVM and a serialized binary,
  // host code (TMA descriptor creation, launch on the given stream) to LLVM.
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = kernel.chip;
  nvvm.cubinFeatures = options.features;
  nvvm.cubinFormat = options.format;
  nvvm.optLevel = options.optLevel;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}

void flash::registerFlashGPUPipeline() {
  PassPipelineRegistration<FlashGPUPipelineOptions>(
      "flash-gpu-pipeline",
      "flash.attention to a Hopper kernel in a gpu.binary plus LLVM host code "
      "(set CUDA_HOME for ptxas)",
      buildFlashGPUPipeline);
}
