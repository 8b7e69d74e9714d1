//===- MapLoopsToGrid.cpp - host parallel loops onto a 1-D grid -----------===//
//
// What a whole function computes around its attention (elementwise ops, row
// reductions, copies) reaches the host side of a device function as
// scf.parallel nests over device buffers. Each outermost one is collapsed
// to one dimension and tiled by the block size, and the tile loop is mapped
// to blocks, the loop in a tile to threads: one thread per element of the
// parallel iteration space, reductions sequential in the thread, whatever
// the rank and the sizes (grid.x reaches 2^31 - 1 blocks, the other axes
// only 65535). convert-parallel-loops-to-gpu then makes them launches.
//
//===----------------------------------------------------------------------===//
#include "flash/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"

#include <numeric>

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHMAPLOOPSTOGRIDPASS
#include "flash/Conversion/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

/// The scf.parallel nests not yet on the GPU and not inside another one.
static SmallVector<scf::ParallelOp> outermostHostLoops(func::FuncOp func) {
  SmallVector<scf::ParallelOp> loops;
  func.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<gpu::LaunchOp>(op))
      return WalkResult::skip();
    if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
      if (!loop->hasAttr(gpu::getMappingAttrName()))
        loops.push_back(loop);
      return WalkResult::skip();
    }
    return WalkResult::advance();
  });
  return loops;
}

namespace {
struct FlashMapLoopsToGridPass
    : flash::impl::FlashMapLoopsToGridPassBase<FlashMapLoopsToGridPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (blockSize <= 0) {
      func.emitError("flash-map-loops-to-grid: block-size must be positive");
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp loop : outermostHostLoops(func)) {
      if (loop.getNumResults()) {
        loop.emitOpError("flash-map-loops-to-grid: a parallel loop with "
                         "reduction results is not mapped to the GPU");
        return signalPassFailure();
      }
      unsigned n = loop.getNumLoops();
      if (n < 2)
        continue;
      std::vector<unsigned> all(n);
      std::iota(all.begin(), all.end(), 0u);
      rewriter.setInsertionPoint(loop);
      collapseParallelLoops(rewriter, loop, {all});
    }
    MLIRContext *ctx = &getContext();
    auto dim = [&](gpu::Processor p) {
      return gpu::ParallelLoopDimMappingAttr::get(
          ctx, p, AffineMap::getMultiDimIdentityMap(1, ctx),
          AffineMap::getMultiDimIdentityMap(1, ctx));
    };
    for (scf::ParallelOp loop : outermostHostLoops(func)) {
      // Without min/max bounds: the thread loop has the constant block size
      // as its bound and a guard inside, which convert-parallel-loops-to-gpu
      // turns into the launch's block size and an if.
      auto [grid, block] =
          scf::tileParallelLoop(loop, {blockSize}, /*noMinMaxBounds=*/true);
      if (failed(gpu::setMappingAttr(grid, {dim(gpu::Processor::BlockX)})) ||
          failed(gpu::setMappingAttr(block, {dim(gpu::Processor::ThreadX)})))
        return signalPassFailure();
    }
  }
};
} // namespace
