//===- DecomposeAggregatedOps.cpp - linalg.softmax and kin as generics ----===//
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHDECOMPOSEAGGREGATEDOPSPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

namespace {
struct FlashDecomposeAggregatedOpsPass
    : flash::impl::FlashDecomposeAggregatedOpsPassBase<
          FlashDecomposeAggregatedOpsPass> {
  void runOnOperation() override {
    // Linalg's aggregates only: flash.attention is one too, but decomposing
    // it is flash-decompose-attention's choice (the unfused reference), not
    // a step every pipeline that meets a left-over linalg.softmax takes.
    SmallVector<linalg::AggregatedOpInterface> aggregates;
    getOperation()->walk([&](linalg::AggregatedOpInterface op) {
      if (isa<linalg::LinalgDialect>(op->getDialect()))
        aggregates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::AggregatedOpInterface op : aggregates) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> results = op.decomposeOperation(rewriter);
      if (failed(results)) {
        op->emitError("could not be decomposed into linalg generics");
        return signalPassFailure();
      }
      rewriter.replaceOp(op, *results);
    }
  }
};
} // namespace
