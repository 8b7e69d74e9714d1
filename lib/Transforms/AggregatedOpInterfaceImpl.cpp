//===- AggregatedOpInterfaceImpl.cpp - flash.attention as an aggregate ----===//
//
// decomposeOperation is flash-decompose-attention's rewrite, so anything that
// decomposes aggregates through the interface (transform.structured.
// decompose_interface, an embedding compiler's own pass) gets the reference
// semantics, offsets of a tile included.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/InterfaceImpls.h"

#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;
using namespace mlir::flash;

namespace {
struct AttentionAggregatedOpInterface
    : linalg::AggregatedOpInterface::ExternalModel<
          AttentionAggregatedOpInterface, AttentionOp> {
  FailureOr<SmallVector<Value>> decomposeOperation(Operation *op,
                                                   OpBuilder &b) const {
    return decomposeAttention(b, cast<AttentionOp>(op));
  }
};
} // namespace

void mlir::flash::registerAggregatedOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FlashDialect *) {
    AttentionOp::attachInterface<AttentionAggregatedOpInterface>(*ctx);
  });
}
