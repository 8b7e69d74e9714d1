//===- AttentionIntoDestination.cpp - write attention into the caller's buffer
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHATTENTIONINTODESTINATIONPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;

namespace {
struct FlashAttentionIntoDestinationPass
    : flash::impl::FlashAttentionIntoDestinationPassBase<
          FlashAttentionIntoDestinationPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rewriter(&getContext());
    func.walk([&](AttentionOp op) {
      Value out = op.getOutput();
      if (!out.hasOneUse() || !op.getOutputInit().getDefiningOp<tensor::EmptyOp>())
        return;
      auto store = dyn_cast<bufferization::MaterializeInDestinationOp>(
          *out.getUsers().begin());
      if (!store || !store.getRestrict() || !store.getWritable())
        return;
      Value dest = store.getDest();
      auto destType = dyn_cast<MemRefType>(dest.getType());
      if (!destType || destType.getShape() != op.getOutputType().getShape() ||
          destType.getElementType() != op.getOutputType().getElementType())
        return;
      // The destination must be visible at the op, and no one else may look
      // at it as a tensor (that is what `restrict` promises).
      if (auto arg = dyn_cast<BlockArgument>(dest)) {
        if (!arg.getOwner()->getParent()->isAncestor(op->getParentRegion()))
          return;
      } else {
        return;
      }
      for (Operation *user : dest.getUsers())
        if (isa<bufferization::ToTensorOp>(user))
          return;
      rewriter.setInsertionPoint(op);
      auto tensorType = cast<RankedTensorType>(op.getOutputType());
      Value view = bufferization::ToTensorOp::create(
          rewriter, op.getLoc(), tensorType, dest, /*restrict=*/true,
          /*writable=*/true);
      rewriter.modifyOpInPlace(op, [&] { op.getInitsMutable()[0].set(view); });
    });
  }
};
} // namespace
