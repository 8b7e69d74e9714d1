//===- MemrefCopyToLinalg.cpp - memref.copy as a linalg.copy loop nest ----===//
//
// finalize-memref-to-llvm lowers a memref.copy between buffers that are not
// statically contiguous (dynamic-size tiles, strided subviews) to a call of
// `memrefCopy` in MLIR's runner-utils library, which a library built for a
// user's process does not link. As linalg.copy the copy becomes a loop nest
// under convert-linalg-to-loops, and the object needs no runtime.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHMEMREFCOPYTOLINALGPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

namespace {
struct CopyToLinalg : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    if (!isa<MemRefType>(op.getSource().getType()) ||
        !isa<MemRefType>(op.getTarget().getType()))
      return rewriter.notifyMatchFailure(op, "unranked copy");
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(op, op.getSource(),
                                                op.getTarget());
    return success();
  }
};

struct FlashMemrefCopyToLinalgPass
    : flash::impl::FlashMemrefCopyToLinalgPassBase<
          FlashMemrefCopyToLinalgPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<CopyToLinalg>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
