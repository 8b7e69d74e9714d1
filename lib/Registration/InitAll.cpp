//===- InitAll.cpp - register everything flash provides -------------------===//
#include "flash/InitAll.h"

#include "flash/Conversion/Passes.h"
#include "flash/Dialect/Flash/IR/FlashDialect.h"
#include "flash/Pipelines/Pipelines.h"
#include "flash/Transforms/InterfaceImpls.h"
#include "flash/Transforms/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Affine/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/TransformOps/DialectExtension.h"
#include "mlir/Dialect/Linalg/Transforms/TilingInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/TransformOps/SCFTransformOps.h"
#include "mlir/Dialect/Tensor/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/TransformOps/TensorTransformOps.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void mlir::flash::registerFlashDialects(DialectRegistry &registry) {
  registry.insert<FlashDialect, affine::AffineDialect, arith::ArithDialect,
                  linalg::LinalgDialect, math::MathDialect, scf::SCFDialect,
                  tensor::TensorDialect, transform::TransformDialect>();
  registerTilingInterfaceExternalModels(registry);
  registerAggregatedOpInterfaceExternalModels(registry);
  // What upstream tiling of flash.attention needs from a host that did not
  // register all of MLIR: transform.structured.tile_using_forall/_for and
  // decompose_interface, the scf/tensor transforms around them, linalg's own
  // TilingInterface (for fusing linalg producers and consumers), and the
  // value-bounds models that fold the tile-size arithmetic.
  linalg::registerTransformDialectExtension(registry);
  scf::registerTransformDialectExtension(registry);
  tensor::registerTransformDialectExtension(registry);
  linalg::registerTilingInterfaceExternalModels(registry);
  affine::registerValueBoundsOpInterfaceExternalModels(registry);
  arith::registerValueBoundsOpInterfaceExternalModels(registry);
  scf::registerValueBoundsOpInterfaceExternalModels(registry);
  tensor::registerValueBoundsOpInterfaceExternalModels(registry);
  // gpu-module-to-binary translates kernels to LLVM IR inside the pipeline.
  registerAllToLLVMIRTranslations(registry);
}

void mlir::flash::registerFlashPasses() {
  ::mlir::flash::registerFlashTransformsPasses();
  ::mlir::flash::registerFlashConversionPasses();
  ::mlir::flash::registerFlashPipelines();
}
