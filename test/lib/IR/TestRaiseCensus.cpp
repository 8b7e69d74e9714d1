//===- TestRaiseCensus.cpp - every softmax fused or explained -------------===//
//
// `test-flash-raise-census` checks the promise of flash-raise-attention's
// remarks: no silent misses. It counts the softmaxes of a module by a
// definition of its own, independent of the raise's matchers — an exp
// (math.exp/exp2 in a linalg body or on tensors, linalg.softmax) of values
// that a contraction produced within a few steps — then runs the raise with
// remarks on and sorts each softmax: fused (its ops are gone and a
// flash.attention took their place), remarked (a remark "attention not
// raised" sits on an op of its use-def chain), or silent, which is an error
// at the softmax. TOSA is lowered to linalg first, as the raise does, so
// that a softmax's ops are the same before and after.
//
//===----------------------------------------------------------------------===//
#include "TestPasses.h"

#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {

// Sites are marked in their location, which no matcher reads (an attribute
// would make the raise's generics differ from what it expects).
constexpr StringLiteral kSitePrefix = "flash.census.site.";

/// The original location of a marked site, or null if `op` is not one.
LocationAttr siteOrigin(Operation *op) {
  auto name = dyn_cast<NameLoc>(op->getLoc());
  if (name && name.getName().getValue().starts_with(kSitePrefix))
    return name.getChildLoc();
  return LocationAttr();
}

bool isExp(Operation *op) { return isa<math::ExpOp, math::Exp2Op>(op); }

/// A matmul by the definition of the upstream interfaces, not the raise's.
bool isMatmul(Operation *op) {
  if (isa<tosa::MatMulOp>(op))
    return true;
  auto l = dyn_cast<linalg::LinalgOp>(op);
  return l && linalg::isaContractionOpInterface(l);
}

/// Whether `op` computes an exponential of a tensor.
bool computesExp(Operation *op) {
  if (isa<linalg::SoftmaxOp, tosa::ExpOp>(op))
    return true;
  if (isExp(op))
    return isa<TensorType>(op->getResult(0).getType());
  auto l = dyn_cast<linalg::LinalgOp>(op);
  if (!l || !l.hasPureTensorSemantics())
    return false;
  bool found = false;
  l.getBlock()->walk([&](Operation *inner) { found |= isExp(inner); });
  return found;
}

/// Whether a matmul produces one of `op`'s operands within `depth` steps.
bool fedByMatmul(Operation *op, unsigned depth) {
  if (depth == 0)
    return false;
  for (Value v : op->getOperands()) {
    Operation *def = v.getDefiningOp();
    if (!def || !isa<TensorType>(v.getType()))
      continue;
    if (isMatmul(def) || fedByMatmul(def, depth - 1))
      return true;
  }
  return false;
}

struct TestRaiseCensusPass
    : PassWrapper<TestRaiseCensusPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestRaiseCensusPass)

  StringRef getArgument() const final { return "test-flash-raise-census"; }
  StringRef getDescription() const final {
    return "Check that every softmax over a matmul's output is fused by "
           "flash-raise-attention or explained by one of its remarks";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<flash::FlashDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (failed(runTextual(
            module, "builtin.module(func.func(tosa-to-linalg-named,"
                    "tosa-to-linalg,tosa-to-arith,tosa-to-tensor))")))
      return signalPassFailure();

    int64_t sites = 0;
    module.walk([&](Operation *op) {
      if (op->getNumResults() == 1 && computesExp(op) && fedByMatmul(op, 24))
        op->setLoc(NameLoc::get(
            StringAttr::get(ctx, kSitePrefix + std::to_string(sites++)),
            op->getLoc()));
    });
    int64_t before = countAttention(module);

    SmallVector<Location> remarks;
    {
      ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &d) {
        if (d.getSeverity() != DiagnosticSeverity::Remark ||
            !StringRef(d.str()).starts_with("attention not raised"))
          return failure(); // everything else goes on as usual
        remarks.push_back(d.getLocation());
        return success();
      });
      if (failed(runTextual(
              module, "builtin.module(flash-raise-attention{remarks=true})")))
        return signalPassFailure();
    }
    int64_t fusedOps = countAttention(module) - before;

    SmallVector<Operation *> remaining;
    module.walk([&](Operation *op) {
      if (siteOrigin(op))
        remaining.push_back(op);
    });
    int64_t fused = sites - static_cast<int64_t>(remaining.size());
    int64_t remarked = 0, silent = 0;
    DenseSet<Location> remarkSet(remarks.begin(), remarks.end());
    for (Operation *op : remaining) {
      bool isExplained = explained(op, remarkSet);
      op->setLoc(Location(siteOrigin(op)));
      if (isExplained) {
        ++remarked;
        continue;
      }
      ++silent;
      op->emitError("softmax over a matmul's output neither fused by "
                    "flash-raise-attention nor explained by a remark");
    }
    if (fused > 0 && fusedOps == 0) {
      module.emitError("softmaxes disappeared but no attention op "
                       "replaced them");
      ++silent;
    }
    llvm::errs() << "census: softmaxes " << sites << " fused " << fused
                 << " remarked " << remarked << " silent " << silent
                 << " remarks " << remarks.size() << "\n";
    if (silent)
      signalPassFailure();
  }

private:
  LogicalResult runTextual(ModuleOp module, StringRef pipeline) {
    FailureOr<OpPassManager> pm = parsePassPipeline(pipeline);
    if (failed(pm)) {
      module.emitError("cannot parse the pipeline ") << pipeline;
      return failure();
    }
    return runPipeline(*pm, module);
  }

  static int64_t countAttention(ModuleOp module) {
    int64_t n = 0;
    module.walk([&](Operation *op) {
      n += isa<flash::AttentionOp, flash::PagedAttentionOp,
               flash::VarlenAttentionOp>(op);
    });
    return n;
  }

  /// Whether a remark sits on an op of `op`'s chain: what computes it, what
  /// uses it, and what uses the matmuls it is computed from (a softmax's
  /// denominator is a sibling of its exponentials), with their bodies.
  static bool explained(Operation *op, const DenseSet<Location> &remarks) {
    SetVector<Operation *> back, slice;
    BackwardSliceOptions backOptions;
    backOptions.omitBlockArguments = true;
    (void)getBackwardSlice(op, &back, backOptions);
    SmallVector<Operation *> roots{op};
    for (Operation *s : back)
      if (isMatmul(s))
        roots.push_back(s);
    for (Operation *root : roots) {
      // Each slice leaves its root out.
      SetVector<Operation *> fwd;
      getForwardSlice(root, &fwd);
      slice.insert(root);
      slice.insert(fwd.begin(), fwd.end());
    }
    slice.insert(back.begin(), back.end());
    for (Operation *s : slice) {
      bool hit = false;
      s->walk([&](Operation *inner) { hit |= remarks.contains(inner->getLoc()); });
      if (hit)
        return true;
    }
    return false;
  }
};

} // namespace

void mlir::flash::test::registerTestRaiseCensusPass() {
  PassRegistration<TestRaiseCensusPass>();
}
