//===- ScoreModDerivative.cpp - reverse-mode derivative of a score_mod -----===//
//
// The gradient op differentiates whatever the frontend wrote between the two
// matmuls. A score_mod region is one block of scalar ops; the derivative is
// reverse mode over that block: the ops are cloned for one element, then the
// adjoints are propagated from the yielded score (adjoint 1) back through
// every "active" op — one whose value depends on the score or on a float
// capture read — to the score argument and to each capture read. Ops that
// only compute indices, constants or predicates are inactive and need no
// derivative; an active op without a rule is refused by the verifier.
//
//===----------------------------------------------------------------------===//
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::flash;

/// Whether `type` carries a derivative (a float scalar).
static bool isFloat(Type type) { return isa<FloatType>(type); }

/// The first argument that is a capture (score, batch..., i, j come first).
static unsigned firstCaptureArg(Block &body, unsigned numIndices) {
  (void)body;
  return 1 + numIndices;
}

/// Values of the region that depend on the score or on a float capture read.
static DenseSet<Value> activeValues(Block &body, unsigned numIndices) {
  DenseSet<Value> active;
  active.insert(body.getArgument(0));
  unsigned firstCapture = firstCaptureArg(body, numIndices);
  for (Operation &op : body.without_terminator()) {
    bool isActive = false;
    if (auto ex = dyn_cast<tensor::ExtractOp>(&op)) {
      auto arg = dyn_cast<BlockArgument>(ex.getTensor());
      isActive = arg && arg.getOwner() == &body &&
                 arg.getArgNumber() >= firstCapture &&
                 isFloat(ex.getResult().getType());
    } else {
      isActive = llvm::any_of(op.getOperands(),
                              [&](Value v) { return active.contains(v); });
    }
    if (isActive)
      for (Value r : op.getResults())
        if (isFloat(r.getType()))
          active.insert(r);
  }
  return active;
}

static bool hasDerivativeRule(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MaxNumFOp,
             arith::MinimumFOp, arith::MinNumFOp, arith::SelectOp,
             arith::ExtFOp, arith::TruncFOp, math::ExpOp, math::Exp2Op,
             math::LogOp, math::TanhOp, math::AbsFOp, math::SqrtOp,
             tensor::ExtractOp>(op);
}

LogicalResult mlir::flash::verifyScoreModDifferentiable(Operation *owner,
                                                        Region &scoreMod,
                                                        unsigned numIndices) {
  Block &body = scoreMod.front();
  DenseSet<Value> active = activeValues(body, numIndices);
  unsigned firstCapture = firstCaptureArg(body, numIndices);
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions())
      return owner->emitOpError("cannot differentiate the score_mod op '")
             << op.getName() << "': ops with regions have no derivative here";
    bool producesActive = llvm::any_of(
        op.getResults(), [&](Value r) { return active.contains(r); });
    if (!producesActive)
      continue;
    if (!hasDerivativeRule(&op))
      return owner->emitOpError("cannot differentiate the score_mod op '")
             << op.getName() << "': it has no derivative rule";
    if (auto ex = dyn_cast<tensor::ExtractOp>(&op)) {
      // The gradient of a capture is a reduction of the score gradient over
      // the loops its read does not index, which needs the indices to be the
      // region's own index arguments.
      llvm::SmallDenseSet<Value> seen;
      for (Value idx : ex.getIndices()) {
        auto arg = dyn_cast<BlockArgument>(idx);
        if (!arg || arg.getOwner() != &body || arg.getArgNumber() == 0 ||
            arg.getArgNumber() >= firstCapture || !seen.insert(arg).second)
          return owner->emitOpError("cannot differentiate the read of "
                                    "capture #")
                 << cast<BlockArgument>(ex.getTensor()).getArgNumber() -
                        firstCapture
                 << " at computed or repeated indices; a capture with a "
                    "gradient must be indexed by distinct index arguments of "
                    "the score_mod";
      }
    }
  }
  return success();
}

namespace {
/// Reverse-mode state for one element: adjoints of the cloned values.
class Adjoints {
public:
  Adjoints(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  void add(Value original, Value contribution) {
    Value &slot = adjoint[original];
    slot = slot ? arith::AddFOp::create(b, loc, slot, contribution).getResult()
                : contribution;
  }
  Value get(Value original) const { return adjoint.lookup(original); }

private:
  OpBuilder &b;
  Location loc;
  DenseMap<Value, Value> adjoint;
};
} // namespace

tensor::ExtractOp mlir::flash::captureRead(Operation *op, unsigned numIndices) {
  auto ex = dyn_cast<tensor::ExtractOp>(op);
  auto arg = ex ? dyn_cast<BlockArgument>(ex.getTensor()) : BlockArgument();
  if (!arg || arg.getOwner() != op->getBlock() ||
      arg.getArgNumber() < firstCaptureArg(*op->getBlock(), numIndices))
    return nullptr;
  return ex;
}

DenseSet<Value> mlir::flash::scoreModSlice(Region &scoreMod, unsigned argNo) {
  Block &body = scoreMod.front();
  DenseSet<Value> slice = {body.getArgument(argNo)};
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return slice.contains(v); }))
      slice.insert(op.getResults().begin(), op.getResults().end());
  return slice;
}

Value mlir::flash::cloneScoreMod(OpBuilder &b, Location loc, Region &scoreMod,
                                 IRMapping &map, Value s, ValueRange batch,
                                 Value i, Value j, ValueRange captures,
                                 CaptureReader readCapture,
                                 function_ref<bool(Operation *)> only) {
  Block &body = scoreMod.front();
  mapScoreModArguments(map, body, s, batch, i, j, captures);
  for (Operation &op : body.without_terminator()) {
    // Ops `map` already holds were cloned ahead (a prefetch).
    if (op.getNumResults() > 0 &&
        llvm::all_of(op.getResults(), [&](Value r) { return map.contains(r); }))
      continue;
    if (only && !only(&op))
      continue;
    tensor::ExtractOp ex = captureRead(&op, batch.size() + 2);
    if (readCapture && ex) {
      SmallVector<Value> idx;
      for (Value v : ex.getIndices())
        idx.push_back(map.lookup(v));
      map.map(ex.getResult(), readCapture(b, loc, ex, idx));
      continue;
    }
    b.clone(op, map);
  }
  return map.lookupOrNull(body.getTerminator()->getOperand(0));
}

FailureOr<ScoreModGradient> mlir::flash::buildScoreModGradient(
    OpBuilder &b, Location loc, Region &scoreMod, ValueRange captures,
    Value s, ValueRange batch, Value i, Value j, CaptureReader readCapture,
    IRMapping *clones) {
  Block &body = scoreMod.front();
  unsigned nb = batch.size();
  unsigned numIndices = nb + 2;
  IRMapping map;
  ScoreModGradient grad;
  grad.score = cloneScoreMod(b, loc, scoreMod, map, s, batch, i, j, captures,
                             readCapture);
  Value yielded = body.getTerminator()->getOperand(0);
  DenseSet<Value> active = activeValues(body, numIndices);
  Adjoints adj(b, loc);
  auto cst = [&](Type t, double v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
  };
  adj.add(yielded, cst(yielded.getType(), 1.0));
  auto mul = [&](Value x, Value y) -> Value {
    return arith::MulFOp::create(b, loc, x, y);
  };
  auto cloned = [&](Value v) { return map.lookup(v); };

  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() != 1 || !active.contains(op->getResult(0)))
      continue;
    Value g = adj.get(op->getResult(0));
    if (!g)
      continue;
    // Contributions go only to active operands; the rest are constants of
    // this element (indices, inactive values).
    auto push = [&](Value operand, Value contribution) {
      if (active.contains(operand))
        adj.add(operand, contribution);
    };
    Type t = op->getResult(0).getType();
    Value zero = cst(t, 0.0);
    if (isa<arith::AddFOp>(op)) {
      push(op->getOperand(0), g);
      push(op->getOperand(1), g);
    } else if (isa<arith::SubFOp>(op)) {
      push(op->getOperand(0), g);
      push(op->getOperand(1), arith::NegFOp::create(b, loc, g));
    } else if (isa<arith::MulFOp>(op)) {
      push(op->getOperand(0), mul(g, cloned(op->getOperand(1))));
      push(op->getOperand(1), mul(g, cloned(op->getOperand(0))));
    } else if (isa<arith::DivFOp>(op)) {
      // d(a/b) = da / b - (a/b) db / b
      Value bv = cloned(op->getOperand(1));
      Value q = cloned(op->getResult(0));
      push(op->getOperand(0), arith::DivFOp::create(b, loc, g, bv));
      push(op->getOperand(1),
           arith::NegFOp::create(
               b, loc, arith::DivFOp::create(b, loc, mul(g, q), bv)));
    } else if (isa<arith::NegFOp>(op)) {
      push(op->getOperand(0), arith::NegFOp::create(b, loc, g));
    } else if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
                   arith::MinNumFOp>(op)) {
      // The gradient goes to the operand the result took (ties: the first).
      bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(op);
      Value first = arith::CmpFOp::create(
          b, loc, isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE,
          cloned(op->getOperand(0)), cloned(op->getOperand(1)));
      push(op->getOperand(0), arith::SelectOp::create(b, loc, first, g, zero));
      push(op->getOperand(1), arith::SelectOp::create(b, loc, first, zero, g));
    } else if (auto sel = dyn_cast<arith::SelectOp>(op)) {
      Value c = cloned(sel.getCondition());
      push(sel.getTrueValue(), arith::SelectOp::create(b, loc, c, g, zero));
      push(sel.getFalseValue(), arith::SelectOp::create(b, loc, c, zero, g));
    } else if (auto ext = dyn_cast<arith::ExtFOp>(op)) {
      push(ext.getIn(),
           arith::TruncFOp::create(b, loc, ext.getIn().getType(), g));
    } else if (auto tr = dyn_cast<arith::TruncFOp>(op)) {
      push(tr.getIn(), arith::ExtFOp::create(b, loc, tr.getIn().getType(), g));
    } else if (isa<math::ExpOp>(op)) {
      push(op->getOperand(0), mul(g, cloned(op->getResult(0))));
    } else if (isa<math::Exp2Op>(op)) {
      push(op->getOperand(0),
           mul(mul(g, cloned(op->getResult(0))), cst(t, M_LN2)));
    } else if (isa<math::LogOp>(op)) {
      push(op->getOperand(0),
           arith::DivFOp::create(b, loc, g, cloned(op->getOperand(0))));
    } else if (isa<math::TanhOp>(op)) {
      // d tanh(x) = 1 - tanh(x)^2
      Value y = cloned(op->getResult(0));
      Value d = arith::SubFOp::create(b, loc, cst(t, 1.0), mul(y, y));
      push(op->getOperand(0), mul(g, d));
    } else if (isa<math::AbsFOp>(op)) {
      Value x = cloned(op->getOperand(0));
      Value neg = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x,
                                        zero);
      push(op->getOperand(0),
           arith::SelectOp::create(b, loc, neg,
                                   arith::NegFOp::create(b, loc, g), g));
    } else if (isa<math::SqrtOp>(op)) {
      // d sqrt(x) = 1 / (2 sqrt(x))
      Value y = cloned(op->getResult(0));
      push(op->getOperand(0),
           arith::DivFOp::create(b, loc, g, mul(cst(t, 2.0), y)));
    } else if (isa<tensor::ExtractOp>(op)) {
      // A leaf: its adjoint is read off below.
    } else {
      return failure(); // the verifier refuses such regions
    }
  }
  Value ds = adj.get(body.getArgument(0));
  grad.dScore = ds ? ds : cst(s.getType(), 0.0);
  grad.reads = scoreModReads(scoreMod, numIndices);
  unsigned n = 0;
  for (Operation *op : ops) {
    auto ex = dyn_cast<tensor::ExtractOp>(op);
    if (!ex || !active.contains(ex.getResult()))
      continue;
    Value g = adj.get(ex.getResult());
    Type t = ex.getResult().getType();
    if (g && t != b.getF32Type())
      g = arith::ExtFOp::create(b, loc, b.getF32Type(), g);
    grad.reads[n++].partial = g ? g : cst(b.getF32Type(), 0.0);
  }
  if (clones)
    *clones = std::move(map);
  return grad;
}

SmallVector<ScoreModRead> mlir::flash::scoreModReads(Region &scoreMod,
                                                     unsigned numIndices) {
  Block &body = scoreMod.front();
  DenseSet<Value> active = activeValues(body, numIndices);
  unsigned firstCapture = firstCaptureArg(body, numIndices);
  SmallVector<ScoreModRead> reads;
  for (Operation &op : body.without_terminator()) {
    auto ex = dyn_cast<tensor::ExtractOp>(&op);
    if (!ex || !active.contains(ex.getResult()))
      continue;
    ScoreModRead read;
    read.capture =
        cast<BlockArgument>(ex.getTensor()).getArgNumber() - firstCapture;
    for (Value idx : ex.getIndices())
      read.dims.push_back(cast<BlockArgument>(idx).getArgNumber() - 1);
    reads.push_back(read);
  }
  return reads;
}
