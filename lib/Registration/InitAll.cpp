//===- InitAll.cpp - register everything flash provides -------------------===//
#include "flash/InitAll.h"

#include "flash/Conversion/Passes.h"
#include "flash/Dialect/Flash/IR/FlashDialect.h"
#include "flash/Pipelines/Pipelines.h"
#include "flash/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void mlir::flash::registerFlashDialects(DialectRegistry &registry) {
  registry.insert<FlashDialect, arith::ArithDialect, linalg::LinalgDialect,
                  math::MathDialect, tensor::TensorDialect>();
  // gpu-module-to-binary translates kernels to LLVM IR inside the pipeline.
  registerAllToLLVMIRTranslations(registry);
}

void mlir::flash::registerFlashPasses() {
  ::mlir::flash::registerFlashTransformsPasses();
  ::mlir::flash::registerFlashConversionPasses();
  ::mlir::flash::registerFlashPipelines();
}
