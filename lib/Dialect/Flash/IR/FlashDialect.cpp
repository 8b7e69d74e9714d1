//===- FlashDialect.cpp - the flash dialect -------------------------------===//
#include "flash/Dialect/Flash/IR/FlashDialect.h"
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::flash;

#include "flash/Dialect/Flash/IR/FlashOpsDialect.cpp.inc"

void FlashDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "flash/Dialect/Flash/IR/FlashOps.cpp.inc"
      >();
  registerAttributes();
  // Implemented in MLIRFlashTransforms (flash/Transforms/InterfaceImpls.h),
  // registered by flash/InitAll.h: a context without them says so instead
  // of silently treating the op as untileable.
  declarePromisedInterfaces<TilingInterface, AttentionOp>();
  declarePromisedInterface<linalg::AggregatedOpInterface, AttentionOp>();
}
