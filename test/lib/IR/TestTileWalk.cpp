//===- TestTileWalk.cpp - run a GPU kernel's key-tile walk on the host ----===//
//
// `test-flash-tile-walk` makes the key tiles a GPU kernel's block visits
// observable on the CPU: the walk is index arithmetic (the structured
// mask's range, the index mask's bisections, the step over a hidden run),
// built by the same TileProgram functions the kernels call. For every
// function declaration marked `flash.tile_walk_of = @f` it defines the body
// `(q0, lq, lk)`: the walk of the flash.attention in @f for the block of
// `block-rows` query rows at q0 (batch indices 0), in tiles of `tile-rows`
// keys, printing each visited tile with vector.print, then "end". @f itself is
// erased, so the module lowers to LLVM with upstream passes alone and runs
// in mlir-runner.
//
//===----------------------------------------------------------------------===//
#include "TestPasses.h"

#include "TileProgram.h"
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
struct TestTileWalkPass
    : public PassWrapper<TestTileWalkPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestTileWalkPass)

  TestTileWalkPass() = default;
  TestTileWalkPass(const TestTileWalkPass &other) : PassWrapper(other) {}

  StringRef getArgument() const final { return "test-flash-tile-walk"; }
  StringRef getDescription() const final {
    return "Define each function marked flash.tile_walk_of as the key-tile "
           "walk of that function's flash.attention, printing the tiles";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry
        .insert<scf::SCFDialect, vector::VectorDialect, arith::ArithDialect>();
  }

  Option<int64_t> blockRows{*this, "block-rows",
                            llvm::cl::desc("Query rows of a block"),
                            llvm::cl::init(64)};
  Option<int64_t> tileRows{*this, "tile-rows", llvm::cl::desc("Keys of a tile"),
                           llvm::cl::init(64)};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> walks;
    module.walk([&](func::FuncOp f) {
      if (f->hasAttr("flash.tile_walk_of"))
        walks.push_back(f);
    });
    DenseSet<Operation *> carriers;
    for (func::FuncOp walk : walks) {
      auto of = walk->getAttrOfType<FlatSymbolRefAttr>("flash.tile_walk_of");
      auto carrier = of ? module.lookupSymbol<func::FuncOp>(of) : nullptr;
      AttentionOp op;
      if (carrier)
        carrier.walk([&](AttentionOp a) { op = a; });
      if (!op || !op.hasScoreMod() || !walk.isDeclaration() ||
          walk.getNumArguments() != 3 || walk.getNumResults() != 0) {
        walk.emitError("flash.tile_walk_of must name a function with a "
                       "flash.attention that has a score_mod, on a "
                       "declaration (index, index, index) -> ()");
        return signalPassFailure();
      }
      std::optional<IndexMask> mask =
          findIndexMask(op.getScoreMod(), op.getNumBatchDims() + 2);
      if (!mask) {
        op.emitError("the score_mod has no mask of the indices alone");
        return signalPassFailure();
      }
      carriers.insert(carrier);
      Block *body = walk.addEntryBlock();
      ImplicitLocOpBuilder b(walk.getLoc(), OpBuilder::atBlockEnd(body));
      Value q0 = body->getArgument(0), lq = body->getArgument(1),
            lk = body->getArgument(2);
      SmallVector<Value> batch(op.getNumBatchDims(), constIdx(b, 0));
      auto range = visibleTileRange(b, op.getMaskOrNone(), q0, blockRows, lq,
                                    lk, tileRows);
      TileWalk tiles = trimHiddenTiles(b, op.getScoreMod(), *mask, batch, batch,
                                       range, q0, blockRows, lq, lk, tileRows);
      auto loop = scf::ForOp::create(b, tiles.begin, tiles.end, constIdx(b, 1));
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(loop.getBody());
        vector::PrintOp::create(b, tiles.tile(b, loop.getInductionVar()));
      }
      vector::PrintOp::create(b, StringRef("end\n"));
      func::ReturnOp::create(b);
      walk->removeAttr("flash.tile_walk_of");
    }
    for (Operation *carrier : carriers)
      carrier->erase();
  }
};
} // namespace

void mlir::flash::test::registerTestTileWalkPass() {
  PassRegistration<TestTileWalkPass>();
}
