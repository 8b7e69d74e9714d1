//===- AttentionIntoDestination.cpp - write attention into the caller's buffer
#include "flash/Transforms/Passes.h"

#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

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

/// Makes init `i` of `op` the memref its result is materialised in, when
/// the init is a tensor.empty, the result has no other use and no one else
/// looks at that memref as a tensor.
static void writeResultIntoDestination(IRRewriter &rewriter,
                                       DestinationStyleOpInterface op,
                                       unsigned i) {
  Value out = op->getResult(i);
  OpOperand *init = op.getDpsInitOperand(i);
  if (!out.hasOneUse() || !init->get().getDefiningOp<tensor::EmptyOp>())
    return;
  auto store = dyn_cast<bufferization::MaterializeInDestinationOp>(
      *out.getUsers().begin());
  if (!store || !store.getRestrict() || !store.getWritable())
    return;
  Value dest = store.getDest();
  auto destType = dyn_cast<MemRefType>(dest.getType());
  auto tensorType = cast<RankedTensorType>(out.getType());
  if (!destType || destType.getShape() != tensorType.getShape() ||
      destType.getElementType() != tensorType.getElementType())
    return;
  // The destination must be visible at the op, and no one else may look
  // at it as a tensor (that is what `restrict` promises).
  auto arg = dyn_cast<BlockArgument>(dest);
  if (!arg || !arg.getOwner()->getParent()->isAncestor(op->getParentRegion()))
    return;
  for (Operation *user : dest.getUsers())
    if (isa<bufferization::ToTensorOp>(user))
      return;
  rewriter.setInsertionPoint(op);
  Value view = bufferization::ToTensorOp::create(
      rewriter, op.getLoc(), tensorType, dest, /*restrict=*/true,
      /*writable=*/true);
  rewriter.modifyOpInPlace(op, [&] { init->set(view); });
}

void flash::writeAttentionIntoDestinations(Operation *root) {
  IRRewriter rewriter(root->getContext());
  // The forward's output (its LSE stays where it is), and every result of
  // the gradient (dq, dk, dv and the capture gradients).
  root->walk([&](AttentionOp op) {
    writeResultIntoDestination(
        rewriter, cast<DestinationStyleOpInterface>(op.getOperation()), 0);
  });
  root->walk([&](PagedAttentionOp op) {
    writeResultIntoDestination(
        rewriter, cast<DestinationStyleOpInterface>(op.getOperation()), 0);
  });
  root->walk([&](AttentionGradOp op) {
    for (unsigned i = 0, e = op->getNumResults(); i < e; ++i)
      writeResultIntoDestination(
          rewriter, cast<DestinationStyleOpInterface>(op.getOperation()), i);
  });
}

namespace {
struct FlashAttentionIntoDestinationPass
    : flash::impl::FlashAttentionIntoDestinationPassBase<
          FlashAttentionIntoDestinationPass> {
  void runOnOperation() override {
    writeAttentionIntoDestinations(getOperation());
  }
};
} // namespace
