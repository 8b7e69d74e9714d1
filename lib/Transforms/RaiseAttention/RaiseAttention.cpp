//===- RaiseAttention.cpp - matmul, softmax, matmul -> flash.attention ----===//
//
// Matching starts at each contraction (the candidate PV), whose reduction
// loop defines the key axis j and whose other free loop on the P side the
// query axis i. The P operand is traced back to a score-space tree, the
// softmax is read off it, and what the softmax normalises must be an
// elementwise function of exactly one other contraction (QKᵀ) whose free
// loops are i and j. Everything depends on indexing maps, not op names.
//
//===----------------------------------------------------------------------===//
#include "RaiseAttentionImpl.h"
#include "flash/Transforms/Passes.h"

#include "mlir/Conversion/TosaToArith/TosaToArith.h"
#include "mlir/Conversion/TosaToLinalg/TosaToLinalg.h"
#include "mlir/Conversion/TosaToTensor/TosaToTensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/Iterators.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/FormatVariadic.h"

#define DEBUG_TYPE "flash-raise-attention"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHRAISEATTENTIONPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

namespace {

/// Score-space layout of a candidate PV contraction.
struct PVLayout {
  unsigned pOperand;
  SmallVector<unsigned> batchLoops; // PV loops of score batch dims
  unsigned iLoop, jLoop, eLoop;
};

/// A float element type flash.attention accepts.
static bool isSupportedFloat(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

static bool isCandidateTree(Node *p) {
  bool hasContraction = false;
  std::function<void(Node *)> walk = [&](Node *n) {
    if (n->kind == Node::Kind::Read)
      if (auto l = n->value.getDefiningOp<linalg::LinalgOp>())
        hasContraction |= isContraction(l);
    for (Node *o : n->operands)
      walk(o);
  };
  walk(p);
  return hasContraction && (findOp(p, "math.exp") ||
                            containsKind(p, Node::Kind::Reduce));
}

/// The block argument `v` is, looking through extf/truncf.
static BlockArgument argThroughCasts(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<arith::ExtFOp, arith::TruncFOp>(def))
      break;
    v = def->getOperand(0);
  }
  return dyn_cast<BlockArgument>(v);
}

/// An elementwise generic over tensors: all loops parallel, identity output
/// map, single result.
static linalg::GenericOp asElementwise(Operation *op) {
  auto g = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!g || !g.hasPureTensorSemantics() || g.getNumDpsInits() != 1 ||
      g.getNumParallelLoops() != g.getNumLoops() ||
      !g.getMatchingIndexingMap(g.getDpsInitOperand(0)).isIdentity() ||
      !g.getBlock()->getArgument(g.getNumDpsInputs()).use_empty())
    return {};
  return g;
}

/// A generic that only converts the float width of its one input.
static bool isFloatCast(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 ||
      !g.getMatchingIndexingMap(g.getDpsInputOperand(0)).isIdentity())
    return false;
  Block *body = g.getBlock();
  Value y = body->getTerminator()->getOperand(0);
  return y.getDefiningOp() && argThroughCasts(y) == body->getArgument(0) &&
         y != body->getArgument(0);
}

/// Deferred normalisation after the PV contraction: `norm` divides the PV
/// result (optionally through a float cast `cast`) by a per-row tensor, or
/// multiplies it by one (a reciprocal, in the body or computed before).
struct DeferredNorm {
  linalg::GenericOp cast;      // null if none
  linalg::GenericOp norm;
  Value denominator;           // the per-row operand of `norm`
  AffineMap denominatorMap;    // its indexing map in `norm`
  bool reciprocalOperand = false; // norm multiplies by it: it is 1/Z
};

static std::optional<DeferredNorm> findDeferredNorm(Operation *pv) {
  DeferredNorm d;
  Value o = pv->getResult(0);
  if (!o.hasOneUse())
    return std::nullopt;
  linalg::GenericOp next = asElementwise(*o.getUsers().begin());
  if (next && isFloatCast(next)) {
    d.cast = next;
    o = next->getResult(0);
    if (!o.hasOneUse())
      return std::nullopt;
    next = asElementwise(*o.getUsers().begin());
  }
  if (!next || next.getNumDpsInputs() != 2)
    return std::nullopt;
  d.norm = next;
  Block *body = next.getBlock();
  unsigned oIdx = next.getDpsInputs()[0] == o ? 0 : 1;
  if (next.getDpsInputs()[oIdx] != o || next.getDpsInputs()[1 - oIdx] == o ||
      !next.getMatchingIndexingMap(next.getDpsInputOperand(oIdx))
           .isIdentity())
    return std::nullopt;
  BlockArgument oArg = body->getArgument(oIdx);
  BlockArgument zArg = body->getArgument(1 - oIdx);
  d.denominator = next.getDpsInputs()[1 - oIdx];
  d.denominatorMap = next.getMatchingIndexingMap(next.getDpsInputOperand(1 - oIdx));
  Value y = body->getTerminator()->getOperand(0);
  while (Operation *def = y.getDefiningOp())
    if (isa<arith::ExtFOp, arith::TruncFOp>(def))
      y = def->getOperand(0);
    else
      break;
  Operation *op = y.getDefiningOp();
  if (!op || op->getBlock() != body)
    return std::nullopt;
  auto isOne = [](Value v) {
    FloatAttr f;
    return matchPattern(v, m_Constant(&f)) && f.getValueAsDouble() == 1.0;
  };
  if (isa<arith::DivFOp>(op)) {
    if (argThroughCasts(op->getOperand(0)) == oArg &&
        argThroughCasts(op->getOperand(1)) == zArg)
      return d;
    return std::nullopt;
  }
  if (!isa<arith::MulFOp>(op))
    return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    if (argThroughCasts(op->getOperand(k)) != oArg)
      continue;
    Value r = op->getOperand(1 - k);
    if (argThroughCasts(r) == zArg) {
      d.reciprocalOperand = true;
      return d;
    }
    Value rr = r;
    while (Operation *def = rr.getDefiningOp())
      if (isa<arith::ExtFOp, arith::TruncFOp>(def))
        rr = def->getOperand(0);
      else
        break;
    if (auto div = rr.getDefiningOp<arith::DivFOp>();
        div && isOne(div.getLhs()) && argThroughCasts(div.getRhs()) == zArg)
      return d;
  }
  return std::nullopt;
}

class Raiser {
public:
  Raiser(RewriterBase &rw, bool remarks) : rw(rw), remarks(remarks) {}

  /// Tries to rewrite the attention ending at `pv`. Returns true when rewritten.
  bool run(linalg::LinalgOp pv);

  DenseSet<Operation *> erased;

private:
  /// Builds the gradient op at `at` and replaces the graph's dQ, dK, dV.
  void replaceBackward(BackwardMatch &bw, AttentionOp attn, Value q, Value k,
                       Value v, Operation *at);

  RewriterBase &rw;
  bool remarks;
  /// Contractions a backward match examined: a refused training graph has
  /// explained itself at its forward, and they are no attention of their
  /// own.
  DenseSet<Operation *> explained;

  void refuse(const Refusal &why, linalg::LinalgOp pv) {
    if (!remarks)
      return;
    Operation *at = why.at ? why.at : pv.getOperation();
    at->emitRemark() << "attention not raised: " << why.why;
  }
};

/// `v * c` elementwise.
static Value scaleElements(RewriterBase &rw, Location loc, Value v, double c) {
  auto type = cast<RankedTensorType>(v.getType());
  Value empty = tensor::EmptyOp::create(
      rw, loc, tensor::getMixedSizes(rw, loc, v), type.getElementType());
  AffineMap id = rw.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> its(type.getRank(),
                                       utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             rw, loc, empty.getType(), ValueRange{v}, ValueRange{empty},
             ArrayRef<AffineMap>{id, id}, its,
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value f = arith::ConstantOp::create(
                   b, l, FloatAttr::get(type.getElementType(), c));
               linalg::YieldOp::create(
                   b, l, arith::MulFOp::create(b, l, args[0], f).getResult());
             })
      .getResult(0);
}

/// `v` with the shape `shape`, which has the same non-unit dims: a
/// collapse that drops the unit dims, then an expand that inserts the new
/// ones.
static Value reshapeUnitDims(RewriterBase &rw, Location loc, Value v,
                             ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  // Each unit dim joins the group of the next non-unit dim (the last
  // group takes the trailing ones).
  auto groups = [](ArrayRef<int64_t> dims) {
    SmallVector<ReassociationIndices> re;
    ReassociationIndices cur;
    for (auto [d, size] : llvm::enumerate(dims)) {
      cur.push_back(d);
      if (size != 1) {
        re.push_back(cur);
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (re.empty())
        re.push_back({});
      re.back().append(cur.begin(), cur.end());
    }
    return re;
  };
  SmallVector<int64_t> core;
  for (int64_t size : shape)
    if (size != 1)
      core.push_back(size);
  Value c = v;
  if (static_cast<int64_t>(core.size()) != type.getRank())
    c = tensor::CollapseShapeOp::create(rw, loc, v, groups(type.getShape()));
  if (static_cast<int64_t>(core.size()) == static_cast<int64_t>(shape.size()))
    return c;
  return tensor::ExpandShapeOp::create(
      rw, loc, RankedTensorType::get(shape, type.getElementType()), c,
      groups(shape));
}

/// The sinks' gradient of flash.attention from its results: dsinks[h] =
/// −Σ over batch and query rows of exp(sinks[h] − lse)·rowsum(dO ∘ O), the
/// sink's probability times the row's delta (its logit enters only the
/// denominator), in f32, `[Hq]` (the last batch dim of `o` [batch..., Lq,
/// Dv], `lse` [batch..., Lq]).
static Value sinksGradient(RewriterBase &rw, Location loc, Value o,
                           Value gradOut, Value lse, Value sinks) {
  MLIRContext *ctx = rw.getContext();
  Type f32 = rw.getF32Type();
  auto oType = cast<RankedTensorType>(o.getType());
  unsigned rank = oType.getRank(), nb = rank - 2;
  auto toF32 = [&](OpBuilder &b, Location l, Value x) {
    return x.getType() == f32 ? x : arith::ExtFOp::create(b, l, f32, x);
  };
  Value zero = arith::ConstantOp::create(rw, loc, rw.getF32FloatAttr(0.0));
  auto zeros = [&](ArrayRef<OpFoldResult> sizes) {
    Value e = tensor::EmptyOp::create(rw, loc, sizes, f32);
    return linalg::FillOp::create(rw, loc, zero, e).getResult(0);
  };
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rw, loc, o);
  // delta = rowsum(dO ∘ O) over Dv.
  SmallVector<AffineExpr> rowDims;
  for (unsigned d = 0; d <= nb; ++d)
    rowDims.push_back(getAffineDimExpr(d, ctx));
  AffineMap all = rw.getMultiDimIdentityMap(rank);
  AffineMap row = AffineMap::get(rank, 0, rowDims, ctx);
  SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
  its.back() = utils::IteratorType::reduction;
  Value delta =
      linalg::GenericOp::create(
          rw, loc, TypeRange{RankedTensorType::get(
                       oType.getShape().drop_back(), f32)},
          ValueRange{gradOut, o},
          ValueRange{zeros(ArrayRef(sizes).drop_back())},
          ArrayRef<AffineMap>{all, all, row}, its,
          [&](OpBuilder &b, Location l, ValueRange a) {
            Value p = arith::MulFOp::create(b, l, toF32(b, l, a[0]),
                                            toF32(b, l, a[1]));
            linalg::YieldOp::create(
                b, l, arith::AddFOp::create(b, l, p, a[2]).getResult());
          })
          .getResult(0);
  // −Σ exp(sinks[h] − lse)·delta over every dim of (batch..., Lq) but h.
  AffineMap rows = rw.getMultiDimIdentityMap(nb + 1);
  AffineMap head = AffineMap::get(nb + 1, 0, getAffineDimExpr(nb - 1, ctx));
  SmallVector<utils::IteratorType> rits(nb + 1,
                                        utils::IteratorType::reduction);
  rits[nb - 1] = utils::IteratorType::parallel;
  auto sType = cast<RankedTensorType>(sinks.getType());
  return linalg::GenericOp::create(
             rw, loc, TypeRange{RankedTensorType::get(sType.getShape(), f32)},
             ValueRange{sinks, lse, delta},
             ValueRange{zeros(tensor::getMixedSizes(rw, loc, sinks))},
             ArrayRef<AffineMap>{head, rows, rows, head}, rits,
             [&](OpBuilder &b, Location l, ValueRange a) {
               Value p = math::ExpOp::create(
                   b, l,
                   arith::SubFOp::create(b, l, toF32(b, l, a[0]),
                                         toF32(b, l, a[1])));
               Value t = arith::MulFOp::create(b, l, p, toF32(b, l, a[2]));
               linalg::YieldOp::create(
                   b, l, arith::SubFOp::create(b, l, a[3], t).getResult());
             })
      .getResult(0);
}

void Raiser::replaceBackward(BackwardMatch &bw, AttentionOp attn, Value q,
                             Value k, Value v, Operation *at) {
  OpBuilder::InsertionGuard guard(rw);
  rw.setInsertionPoint(at);
  Location loc = at->getLoc();
  Value out = attn.getResult(0);
  Value gradOut = materializeOperand(rw, loc, bw.gradOut);
  gradOut = castElements(rw, loc, gradOut, getElementTypeOrSelf(out.getType()));
  if (gradOut.getType() != out.getType())
    gradOut = tensor::CastOp::create(rw, loc, out.getType(), gradOut);
  // Each gradient in the element type the graph computes it in.
  SmallVector<Value> inits;
  auto initLike = [&](Value like, GradContraction *g) {
    Type elem = g && g->op ? getElementTypeOrSelf(g->op->getResult(0).getType())
                           : getElementTypeOrSelf(like.getType());
    inits.push_back(tensor::EmptyOp::create(
        rw, loc, tensor::getMixedSizes(rw, loc, like), elem));
  };
  initLike(q, &bw.dq);
  initLike(k, &bw.dk);
  initLike(v, &bw.dv);
  for (Value c : attn.getCaptures())
    if (isa<FloatType>(getElementTypeOrSelf(c.getType())))
      initLike(c, nullptr);
  auto grad = AttentionGradOp::create(
      rw, loc, TypeRange(ValueRange(inits)), q, k, v, out, gradOut,
      attn.getResult(1), inits, attn.getCaptures(), attn.getScaleAttr(),
      attn.getMaskAttr());
  if (attn.hasScoreMod()) {
    IRMapping map;
    attn.getScoreMod().cloneInto(&grad.getScoreMod(), map);
  }
  GradContraction *grads[] = {&bw.dq, &bw.dk, &bw.dv};
  for (auto [idx, g] : llvm::enumerate(grads)) {
    if (!g->op)
      continue;
    Value r = grad.getResult(idx);
    // The op's gradient times what the graph's chain rule multiplied in
    // beyond it (1 when the graph differentiates its own scale).
    if (std::abs(g->factor - 1.0) > 1e-6)
      r = scaleElements(rw, loc, r, g->factor);
    r = toResultLayout(rw, loc, r, g->op, g->loops);
    if (g->groupSum) {
      // The graph's sum over each group is the op's gradient of the
      // unrepeated heads.
      auto type = cast<RankedTensorType>(g->groupSum.getType());
      r = reshapeUnitDims(rw, loc, r, type.getShape());
      r = castElements(rw, loc, r, type.getElementType());
      if (r.getType() != type)
        r = tensor::CastOp::create(rw, loc, type, r);
      rw.replaceAllUsesWith(g->groupSum, r);
      // Popped from the back: the chain's last op first.
      SmallVector<Operation *> dead{g->op};
      dead.append(g->groupChain.begin(), g->groupChain.end());
      while (!dead.empty()) {
        Operation *op = dead.pop_back_val();
        if (erased.contains(op) || !isOpTriviallyDead(op))
          continue;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp())
            if (def != g->op && !llvm::is_contained(g->groupChain, def))
              dead.push_back(def);
        erased.insert(op);
        rw.eraseOp(op);
      }
      continue;
    }
    Type type = g->op->getResult(0).getType();
    if (r.getType() != type)
      r = tensor::CastOp::create(rw, loc, type, r);
    rw.replaceOp(g->op, r);
    erased.insert(g->op);
  }
  // The capture gradients follow dq, dk, dv in the order of the float
  // captures.
  for (const BackwardMatch::CaptureGrad &g : bw.captureGrads) {
    unsigned idx = 3;
    for (Value c : attn.getCaptures()) {
      if (c == g.capture)
        break;
      idx += isa<FloatType>(getElementTypeOrSelf(c.getType()));
    }
    Value r = grad.getResult(idx);
    if (std::abs(g.factor - 1.0) > 1e-6)
      r = scaleElements(rw, loc, r, g.factor);
    auto type = cast<RankedTensorType>(g.value.getType());
    r = reshapeUnitDims(rw, loc, r, type.getShape());
    r = castElements(rw, loc, r, type.getElementType());
    if (r.getType() != type)
      r = tensor::CastOp::create(rw, loc, type, r);
    // The backward's own uses of dS die with the contractions it feeds.
    rw.replaceUsesWithIf(g.value, r, [&](OpOperand &use) {
      return !bw.ops.contains(use.getOwner());
    });
  }
  if (bw.sinkGrad) {
    Value r = sinksGradient(rw, loc, out, gradOut, attn.getResult(1),
                            attn.getSinks());
    if (std::abs(bw.sinkGrad->factor - 1.0) > 1e-6)
      r = scaleElements(rw, loc, r, bw.sinkGrad->factor);
    auto type = cast<RankedTensorType>(bw.sinkGrad->value.getType());
    r = reshapeUnitDims(rw, loc, r, type.getShape());
    r = castElements(rw, loc, r, type.getElementType());
    if (r.getType() != type)
      r = tensor::CastOp::create(rw, loc, type, r);
    rw.replaceUsesWithIf(bw.sinkGrad->value, r, [&](OpOperand &use) {
      return !bw.ops.contains(use.getOwner());
    });
  }
}

bool Raiser::run(linalg::LinalgOp pv) {
  if (!isContraction(pv) || explained.contains(pv))
    return false;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(pv);
  if (failed(dims) || dims->k.size() != 1)
    return false;
  MLIRContext *ctx = pv.getContext();
  SmallVector<AffineMap> pvMaps = pv.getIndexingMapsArray();

  // Pick the operand that is a softmax-like tree over a contraction.
  std::unique_ptr<ScoreTracer> tracer;
  PVLayout layout;
  Node *p = nullptr;
  // Or the kept columns of a softmax with a sink column.
  std::optional<SinkMatch> sink;
  SinkResult sinkResult = SinkResult::NotCandidate;
  Refusal sinkWhy;
  for (unsigned o = 0; o < 2 && !p; ++o) {
    const auto &pSide = o == 0 ? dims->m : dims->n;
    const auto &vSide = o == 0 ? dims->n : dims->m;
    if (pSide.size() != 1 || vSide.size() != 1)
      continue;
    PVLayout l{o, SmallVector<unsigned>(dims->batch.begin(), dims->batch.end()),
               pSide[0], dims->k[0], vSide[0]};
    llvm::sort(l.batchLoops);
    SmallVector<int64_t> extents;
    AffineMap loopMap =
        scoreSpaceMap(pv, l.batchLoops, l.iLoop, l.jLoop, extents);
    auto t = std::make_unique<ScoreTracer>(ctx, extents);
    Node *n = t->trace(pv.getDpsInputs()[o], pvMaps[o].compose(loopMap));
    SinkMatch sm;
    SinkResult sr = SinkResult::NotCandidate;
    if (!isCandidateTree(n))
      sr = matchSinkSoftmax(*t, n, sm, sinkWhy, pv.getOperation());
    if (isCandidateTree(n) || sr != SinkResult::NotCandidate) {
      p = n;
      layout = l;
      tracer = std::move(t);
      sinkResult = sr;
      if (sr == SinkResult::Matched)
        sink = std::move(sm);
    }
  }
  if (!p)
    return false;
  ScoreTracer &t = *tracer;
  unsigned nb = layout.batchLoops.size();
  Operation *pvOp = pv.getOperation();
  Refusal why;
  auto fail = [&]() {
    refuse(why, pv);
    return false;
  };

  Type outElem = getElementTypeOrSelf(pv->getResult(0).getType());
  if (!isSupportedFloat(outElem)) {
    why = {pvOp, "the second matmul produces " +
                     llvm::formatv("{0}", outElem).str() +
                     " elements; flash.attention supports bf16, f16 and f32"};
    return fail();
  }
  if (!hasZeroInit(pv)) {
    why = {pvOp, "the second matmul accumulates into an init that is not "
                 "zero"};
    return fail();
  }

  // Link 1: P is a softmax over j, or its numerator when the row sum
  // divides the second matmul's result instead (deferred normalisation),
  // or the scores' columns of a softmax with a sink column.
  if (sinkResult == SinkResult::Refused) {
    why = sinkWhy;
    return fail();
  }
  FailureOr<SoftmaxMatch> sm =
      sink ? FailureOr<SoftmaxMatch>(sink->softmax)
           : matchSoftmax(t, p, why, pvOp);
  if (sink)
    t.visited.insert(sink->ops.begin(), sink->ops.end());
  Operation *root = pvOp; // the op whose result the fused op replaces
  std::optional<DeferredNorm> deferred;
  if (!sink && failed(sm) &&
      stripCasts(simplifyIdentities(t, p))->isOp("math.exp")) {
    Refusal partial = why;
    deferred = findDeferredNorm(pvOp);
    if (!deferred) {
      why = partial;
      return fail();
    }
    // The normaliser's loops are the PV output dims; its denominator must
    // index only batch dims and i (a row value broadcast over Dv).
    AffineMap pvOutMap = pv.getMatchingIndexingMap(pv.getDpsInitOperand(0));
    SmallVector<AffineExpr> zView;
    bool perRow = true;
    for (AffineExpr e : deferred->denominatorMap.getResults()) {
      if (auto c = dyn_cast<AffineConstantExpr>(e);
          c && c.getValue() == 0) {
        zView.push_back(e);
        continue;
      }
      auto d = dyn_cast<AffineDimExpr>(e);
      unsigned loop = layout.eLoop;
      if (d)
        if (auto outDim =
                dyn_cast<AffineDimExpr>(pvOutMap.getResult(d.getPosition())))
          loop = outDim.getPosition();
      if (loop == layout.iLoop) {
        zView.push_back(getAffineDimExpr(nb, ctx));
      } else if (auto it = llvm::find(layout.batchLoops, loop);
                 loop != layout.eLoop && it != layout.batchLoops.end()) {
        zView.push_back(
            getAffineDimExpr(it - layout.batchLoops.begin(), ctx));
      } else {
        perRow = false;
      }
    }
    if (!perRow) {
      why = {deferred->norm, "the second matmul's result is divided by a "
                             "tensor that varies along the value columns, "
                             "not by the row sum of the exponentials"};
      return fail();
    }
    Node *z = t.trace(deferred->denominator,
                      AffineMap::get(nb + 2, 0, zView, ctx));
    if (deferred->reciprocalOperand) {
      Node *r = stripCasts(simplifyIdentities(t, z));
      std::optional<double> one =
          r->isOp("arith.divf") ? r->operands[0]->getFloat() : std::nullopt;
      if (!one || *one != 1.0) {
        why = {deferred->norm,
               "the second matmul's result is multiplied by " +
                   describe(r) + ", not by the reciprocal of the row sum"};
        return fail();
      }
      z = r->operands[1];
    }
    sm = matchDeferredSoftmax(t, p, z, why, deferred->norm);
    if (failed(sm))
      return fail();
    root = deferred->norm;
    outElem = getElementTypeOrSelf(root->getResult(0).getType());
    if (!isSupportedFloat(outElem)) {
      why = {root, "the normalised output has " +
                       llvm::formatv("{0}", outElem).str() +
                       " elements; flash.attention supports bf16, f16 and "
                       "f32"};
      return fail();
    }
  } else if (failed(sm)) {
    return fail();
  }
  // A frontend's own row-max shift before the softmax changes nothing. (With
  // a sink it was peeled off the whole row; one of the scores alone would
  // move them against the sink.)
  Node *x = sink ? sm->scores : peelRowMaxShift(t, sm->scores);
  if (!isa<FloatType>(x->type)) {
    why = {pvOp, "the softmax runs on integer scores (quantized softmax)"};
    return fail();
  }

  // Link 2: the scores are an elementwise function of one QKᵀ contraction.
  SmallVector<Node *> sLeaves;
  std::function<void(Node *)> collect = [&](Node *n) {
    if (n->kind == Node::Kind::Read)
      if (auto l = n->value.getDefiningOp<linalg::LinalgOp>();
          l && isContraction(l) && !llvm::is_contained(sLeaves, n))
        sLeaves.push_back(n);
    for (Node *o : n->operands)
      collect(o);
  };
  collect(x);
  if (sLeaves.empty()) {
    why = {pvOp, "no first matmul (QKᵀ) feeds the softmax"};
    return fail();
  }
  Operation *qkOp = sLeaves[0]->value.getDefiningOp();
  for (Node *n : sLeaves) {
    if (n->value.getDefiningOp() != qkOp) {
      why = {n->value.getDefiningOp(),
             "the softmax input combines the results of several matmuls"};
      return fail();
    }
    if (!structurallyEqual(n, sLeaves[0])) {
      why = {qkOp, "the scores of the first matmul are read at more than "
                   "one position (e.g. transposed) before the softmax"};
      return fail();
    }
  }
  Node *sLeaf = sLeaves[0];
  auto qk = cast<linalg::LinalgOp>(qkOp);
  if (sink && readsFrom(sink->logit, qkOp)) {
    why = {qkOp, "the sink column is read from the scores of the first "
                 "matmul; a sink is a logit of its own"};
    return fail();
  }
  if (!sLeaf->map.isPermutation()) {
    why = {qkOp, "the scores of the first matmul are broadcast or sliced "
                 "on the way to the softmax"};
    return fail();
  }
  FailureOr<linalg::ContractionDimensions> qkDims =
      linalg::inferContractionDims(qk);
  AffineMap qkOut = qk.getMatchingIndexingMap(qk.getDpsInitOperand(0));
  SmallVector<int64_t> loopOfScore(nb + 2, -1);
  for (unsigned r = 0; r < qkOut.getNumResults(); ++r) {
    auto d = dyn_cast<AffineDimExpr>(qkOut.getResult(r));
    if (!d) {
      why = {qkOp, "the first matmul's output map is not a permutation"};
      return fail();
    }
    loopOfScore[sLeaf->map.getDimPosition(r)] = d.getPosition();
  }
  if (failed(qkDims) || qkDims->k.size() != 1) {
    why = {qkOp, "the first matmul contracts more than one dimension; "
                 "attention contracts the head dim only"};
    return fail();
  }
  unsigned qi = loopOfScore[nb], kj = loopOfScore[nb + 1], dk = qkDims->k[0];
  auto in = [](unsigned l, ArrayRef<unsigned> set) {
    return llvm::is_contained(set, l);
  };
  unsigned qOperand;
  if (in(qi, qkDims->m) && in(kj, qkDims->n))
    qOperand = 0;
  else if (in(qi, qkDims->n) && in(kj, qkDims->m))
    qOperand = 1;
  else {
    why = {qkOp, "the softmax rows and columns are not the two free axes "
                 "of the first matmul (one is a batch axis)"};
    return fail();
  }
  for (unsigned b = 0; b < nb; ++b)
    if (!in(loopOfScore[b], qkDims->batch)) {
      why = {qkOp, "a batch axis of the second matmul is not a batch axis "
                   "of the first"};
      return fail();
    }
  if (!isSupportedFloat(getElementTypeOrSelf(qk->getResult(0).getType())) &&
      !getElementTypeOrSelf(qk->getResult(0).getType()).isF64()) {
    why = {qkOp, "the first matmul is an integer contraction (quantized attention); "
                 "flash.attention takes bf16, f16 or f32 operands"};
    return fail();
  }

  // Link 3: scale, mask and score_mod.
  int64_t lq = t.getExtents()[nb], lk = t.getExtents()[nb + 1];
  FailureOr<ScoreModPlan> plan = planScoreMod(t, x, sLeaf, lq, lk, why, pvOp);
  if (failed(plan))
    return fail();

  // Operands in the fused op's layout [batch..., L, D].
  SmallVector<unsigned> qkBatch(loopOfScore.begin(), loopOfScore.begin() + nb);
  SmallVector<unsigned> qLoops(qkBatch), kLoops(qkBatch), vLoops(
                                                              layout.batchLoops);
  qLoops.append({qi, dk});
  kLoops.append({kj, dk});
  vLoops.append({layout.jLoop, layout.eLoop});
  SmallVector<AffineMap> qkMaps = qk.getIndexingMapsArray();
  auto qPerm = operandPerm(qkMaps[qOperand], qLoops);
  auto kPerm = operandPerm(qkMaps[1 - qOperand], kLoops);
  auto vPerm = operandPerm(pvMaps[1 - layout.pOperand], vLoops);
  if (!qPerm || !kPerm || !vPerm) {
    why = {!qPerm || !kPerm ? qkOp : pvOp,
           "an operand of the matmuls is broadcast or indexed by a map "
           "that is not a permutation of [batch..., L, D]"};
    return fail();
  }

  double scale = plan->scale;
  llvm::SetVector<Operation *> seen;
  OperandView qView = lookThroughOperand(qk.getDpsInputs()[qOperand], *qPerm,
                                         &scale, seen);
  OperandView kView = lookThroughOperand(qk.getDpsInputs()[1 - qOperand],
                                         *kPerm, &scale, seen);
  OperandView vView = lookThroughOperand(pv.getDpsInputs()[1 - layout.pOperand],
                                         *vPerm, nullptr, seen);
  if (!isSupportedFloat(getElementTypeOrSelf(qView.value.getType())) ||
      !isSupportedFloat(getElementTypeOrSelf(kView.value.getType())) ||
      !isSupportedFloat(getElementTypeOrSelf(vView.value.getType()))) {
    why = {qkOp, "Q, K or V has elements that are not bf16, f16 or f32"};
    return fail();
  }

  // Link 4: no intermediate that depends on the scores escapes, except
  // into a recognised backward (a training graph), which the gradient op
  // then replaces too.
  std::optional<BackwardMatch> bw;
  DenseSet<Operation *> bwEnds;
  auto inBackward = [&](Operation *op) {
    return bw && (bw->ops.contains(op) || bwEnds.contains(op));
  };
  DenseMap<Operation *, bool> dependent;
  std::function<bool(Operation *)> dependsOnScores = [&](Operation *op) {
    if (op == qkOp)
      return true;
    if (!t.visited.contains(op) && !(bw && bw->ops.contains(op)))
      return false;
    if (auto it = dependent.find(op); it != dependent.end())
      return it->second;
    dependent[op] = false;
    bool d = false;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        d |= dependsOnScores(def);
    dependent[op] = d;
    return d;
  };
  SmallVector<Operation *> chain{qkOp};
  chain.append(t.visited.begin(), t.visited.end());
  DenseSet<Operation *> ends{pvOp};
  if (deferred) {
    ends.insert(deferred->norm);
    if (deferred->cast)
      ends.insert(deferred->cast);
  }
  auto inChain = [&](Operation *op) {
    return op == qkOp || ends.contains(op) || t.visited.contains(op) ||
           inBackward(op);
  };

  // The row log-sum-exp is the one intermediate the fused op can hand out
  // (a frontend keeps it for the backward pass). An escaping use is fine
  // when everything it feeds ends in a value that provably is that LSE,
  // read as [batch..., Lq] or keepdim [batch..., Lq, 1]. With sinks it is
  // the LSE over the scores and the sink column, in the softmax's own score
  // space; an LSE over the scores alone is not the op's and is refused.
  DenseMap<Operation *, bool> lseMemo;
  Operation *lseWithoutSink = nullptr;
  auto isLseRoot = [&](Operation *op) -> bool {
    if (auto it = lseMemo.find(op); it != lseMemo.end())
      return it->second;
    bool found = false;
    auto type = op->getNumResults() == 1
                    ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                    : RankedTensorType();
    if (type && isa<FloatType>(type.getElementType()) &&
        (type.getRank() == nb + 1 ||
         (type.getRank() == nb + 2 && type.getDimSize(nb + 1) == 1))) {
      bool shapeOk = true;
      for (unsigned d = 0; d <= nb; ++d)
        shapeOk &= type.getDimSize(d) == t.getExtents()[d] ||
                   ShapedType::isDynamic(type.getDimSize(d)) ||
                   ShapedType::isDynamic(t.getExtents()[d]);
      SmallVector<AffineExpr> rowView;
      for (unsigned d = 0; d <= nb; ++d)
        rowView.push_back(getAffineDimExpr(d, ctx));
      if (type.getRank() == nb + 2)
        rowView.push_back(getAffineConstantExpr(0, ctx));
      AffineMap rowMap = AffineMap::get(nb + 2, 0, rowView, ctx);
      if (shapeOk && sink) {
        ScoreTracer lt(ctx, sink->extended->getExtents());
        found = isRowLogSumExp(lt, lt.trace(op->getResult(0), rowMap),
                               sink->extendedScores);
        ScoreTracer st(ctx, t.getExtents());
        if (!found &&
            isRowLogSumExp(st, st.trace(op->getResult(0), rowMap), x))
          lseWithoutSink = op;
      } else if (shapeOk) {
        ScoreTracer lt(ctx, t.getExtents());
        found = isRowLogSumExp(lt, lt.trace(op->getResult(0), rowMap), x);
      }
    }
    lseMemo[op] = found;
    return found;
  };
  SmallVector<Operation *> lseRoots, absorbed;
  DenseMap<Operation *, bool> absorbMemo;
  std::function<bool(Operation *)> absorbs = [&](Operation *op) -> bool {
    if (auto it = absorbMemo.find(op); it != absorbMemo.end())
      return it->second;
    absorbMemo[op] = false;
    bool ok;
    if (inChain(op)) {
      ok = false;
    } else if (isLseRoot(op)) {
      lseRoots.push_back(op);
      ok = true;
    } else {
      ok = !op->hasTrait<OpTrait::IsTerminator>() && isMemoryEffectFree(op) &&
           op->getNumResults() > 0;
      for (Operation *user : op->getUsers())
        ok = ok && absorbs(user);
      if (ok)
        absorbed.push_back(op);
    }
    absorbMemo[op] = ok;
    return ok;
  };
  // The uses of score-dependent intermediates outside the chain.
  auto escapes = [&]() {
    lseRoots.clear();
    absorbed.clear();
    absorbMemo.clear();
    dependent.clear();
    SmallVector<std::pair<Operation *, Operation *>> found;
    SmallVector<Operation *> all(chain);
    if (bw)
      all.append(bw->ops.begin(), bw->ops.end());
    for (Operation *op : all) {
      // A gradient the graph returns is read outside, as it should be.
      if (bwEnds.contains(op) || !dependsOnScores(op))
        continue;
      for (Operation *user : op->getUsers()) {
        if (inChain(user))
          continue;
        if (isLseRoot(op)) {
          if (!llvm::is_contained(lseRoots, op))
            lseRoots.push_back(op);
          continue;
        }
        if (absorbs(user))
          continue;
        found.push_back({op, user});
      }
    }
    return found;
  };
  auto escapeMessage = [](std::pair<Operation *, Operation *> e) {
    return "an intermediate of the attention (result of '" +
           e.first->getName().getStringRef().str() + "') is also used by '" +
           e.second->getName().getStringRef().str() + "' outside the chain";
  };
  SmallVector<std::pair<Operation *, Operation *>> escaped = escapes();
  if (!escaped.empty() && lseWithoutSink) {
    why = {lseWithoutSink,
           "the row log-sum-exp this chain exports is over the scores "
           "without the sink column; flash.attention's LSE counts the sinks"};
    return fail();
  }
  if (!escaped.empty()) {
    // A training graph: the backward reads P (or exp, or the softmax's
    // inputs) too.
    Refusal bwWhy;
    DenseSet<Operation *> examined;
    FailureOr<BackwardMatch> match = failure();
    if (!deferred) {
      ForwardFacts fwd{x,     &*plan, nb,    qkOp,
                       pvOp,  qView,  kView, vView,
                       static_cast<float>(scale), sink ? &*sink : nullptr};
      SmallVector<Operation *> users;
      for (auto [op, user] : escaped)
        users.push_back(user);
      match = matchBackward(fwd, users, examined, bwWhy);
      explained.insert(examined.begin(), examined.end());
    }
    if (failed(match)) {
      if (examined.empty())
        why = {escaped.front().first, escapeMessage(escaped.front())};
      else
        why = {bwWhy.at, escapeMessage(escaped.front()) +
                             ", in a backward that is not recognised: " +
                             bwWhy.why};
      return fail();
    }
    bw = std::move(*match);
    for (GradContraction *g : {&bw->dq, &bw->dk, &bw->dv})
      if (g->op)
        bwEnds.insert(g->op);
    for (const BackwardMatch::CaptureGrad &g : bw->captureGrads)
      bwEnds.insert(g.value.getDefiningOp());
    if (bw->sinkGrad)
      bwEnds.insert(bw->sinkGrad->value.getDefiningOp());
    escaped = escapes();
    if (!escaped.empty()) {
      why = {escaped.front().first, escapeMessage(escaped.front())};
      // A slice of the softmax gradient's last column: the sinks' gradient.
      auto slice = dyn_cast<tensor::ExtractSliceOp>(escaped.front().second);
      if (sink && slice && slice.getSourceType().hasStaticShape()) {
        int64_t last = slice.getSourceType().getRank() - 1;
        if (slice.getStaticOffsets()[last] ==
            slice.getSourceType().getDimSize(last) - 1)
          why.why += ": the sinks' own gradient (the sink column of the "
                     "softmax gradient), which is not recognised yet";
      }
      return fail();
    }
  }
  // The LSE is defined where the fused op goes (at the second matmul).
  DominanceInfo dom;
  for (Operation *r : lseRoots)
    for (Operation *user : r->getUsers())
      if (!inChain(user) && !dom.properlyDominates(pvOp, user)) {
        why = {r, "the row log-sum-exp is used by '" +
                      user->getName().getStringRef().str() +
                      "' before the second matmul, where the fused op "
                      "would produce it"};
        return fail();
      }
  // The gradient op goes before the first gradient matmul: the forward's
  // results and dO must be there.
  Operation *firstGrad = nullptr;
  if (bw) {
    SmallVector<Operation *> gradOps;
    for (GradContraction *g : {&bw->dq, &bw->dk, &bw->dv})
      if (g->op)
        gradOps.push_back(g->op);
    for (const BackwardMatch::CaptureGrad &g : bw->captureGrads)
      gradOps.push_back(g.value.getDefiningOp());
    if (bw->sinkGrad)
      gradOps.push_back(bw->sinkGrad->value.getDefiningOp());
    for (Operation *g : gradOps) {
      if (g->getBlock() != pvOp->getBlock() || !pvOp->isBeforeInBlock(g)) {
        why = {g, "a gradient of the backward is computed before the "
                  "forward's second matmul, where the fused op would "
                  "produce the output and its log-sum-exp"};
        return fail();
      }
      if (!firstGrad || g->isBeforeInBlock(firstGrad))
        firstGrad = g;
    }
    if (!dom.properlyDominates(bw->gradOut.value, firstGrad)) {
      why = {firstGrad, "the output's gradient dO is defined after the "
                        "first matmul of the backward"};
      return fail();
    }
  }

  rw.setInsertionPoint(pvOp);
  Location loc = pvOp->getLoc();
  // Repeated K/V heads become the op's group factor. In a training graph
  // only when the graph sums dK and dV over each group (the repeat's
  // backward), which the op's gradients of the unrepeated heads then
  // replace; otherwise the gradients stay per query head, as the graph
  // reads them.
  if (nb > 0) {
    SmallVector<Operation *> created;
    auto kg = peelRepeatInterleave(rw, loc, kView.value, kView.perm[nb - 1],
                                   created);
    auto vg = peelRepeatInterleave(rw, loc, vView.value, vView.perm[nb - 1],
                                   created);
    bool grouped = kg && vg && kg->second == vg->second;
    if (grouped && bw)
      for (GradContraction *g : {&bw->dk, &bw->dv})
        grouped = grouped && (!g->op || matchGroupSum(*g, g->loops[nb - 1],
                                                      kg->second));
    if (grouped) {
      kView.value = kg->first;
      vView.value = vg->first;
    } else {
      if (bw)
        for (GradContraction *g : {&bw->dk, &bw->dv}) {
          g->groupSum = nullptr;
          g->groupChain.clear();
        }
      for (Operation *op : llvm::reverse(created))
        if (op->use_empty())
          rw.eraseOp(op);
    }
  }
  Value q = materializeOperand(rw, loc, qView);
  Value k = materializeOperand(rw, loc, kView);
  Value v = materializeOperand(rw, loc, vView);
  Type qe = getElementTypeOrSelf(q.getType()),
       ke = getElementTypeOrSelf(k.getType()),
       ve = getElementTypeOrSelf(v.getType());
  if (qe != ke || qe != ve) {
    // Mixed inputs meet in the widest type, as the matmuls' extf did.
    Type wide = rw.getF32Type();
    if (qe == ke && qe == ve)
      wide = qe;
    q = castElements(rw, loc, q, wide);
    k = castElements(rw, loc, k, wide);
    v = castElements(rw, loc, v, wide);
  }

  CaptureList captures;
  if (failed(collectCaptures(rw, loc, *plan, captures, why, pvOp)))
    return fail();

  SmallVector<OpFoldResult> outSizes;
  SmallVector<OpFoldResult> qSizes = tensor::getMixedSizes(rw, loc, q);
  SmallVector<OpFoldResult> vSizes = tensor::getMixedSizes(rw, loc, v);
  outSizes.append(qSizes.begin(), qSizes.begin() + nb + 1);
  outSizes.push_back(vSizes[nb + 1]);
  SmallVector<Value> inits{
      tensor::EmptyOp::create(rw, loc, outSizes, outElem).getResult()};
  if (!lseRoots.empty() || bw) {
    SmallVector<OpFoldResult> lseSizes(qSizes.begin(),
                                       qSizes.begin() + nb + 1);
    inits.push_back(
        tensor::EmptyOp::create(rw, loc, lseSizes, rw.getF32Type()));
  }
  Value sinks;
  if (sink)
    sinks = materializeSinks(rw, loc, *sink, qSizes[nb - 1]);
  auto attn = AttentionOp::create(rw, loc, q, k, v, inits,
                                  captures.operands, static_cast<float>(scale),
                                  plan->mask);
  if (sinks)
    attn.getSinksMutable().assign(sinks);
  if (plan->body &&
      failed(buildScoreModRegion(rw, attn, *plan, captures, nb + 2))) {
    rw.eraseOp(attn);
    why = {pvOp, "the score modification could not be cloned into a region"};
    return fail();
  }
  Value result = attn.getResult(0);

  // Back to the PV's own output layout.
  SmallVector<unsigned> pvLoops(layout.batchLoops);
  pvLoops.append({layout.iLoop, layout.eLoop});
  result = toResultLayout(rw, loc, result, pv, pvLoops);
  Type rootType = root->getResult(0).getType();
  if (result.getType() != rootType)
    result = tensor::CastOp::create(rw, loc, rootType, result);

  // Each LSE user gets the op's [batch..., Lq] f32 LSE in its own shape and
  // element type.
  for (Operation *r : lseRoots) {
    auto rt = cast<RankedTensorType>(r->getResult(0).getType());
    Value lse = attn.getResult(1);
    if (rt.getRank() == static_cast<int64_t>(nb) + 2) {
      SmallVector<ReassociationIndices> re;
      for (unsigned d = 0; d < nb; ++d)
        re.push_back({d});
      re.push_back({nb, nb + 1});
      SmallVector<int64_t> shape(
          cast<RankedTensorType>(lse.getType()).getShape());
      shape.push_back(1);
      lse = tensor::ExpandShapeOp::create(
          rw, loc, RankedTensorType::get(shape, rw.getF32Type()), lse, re);
    }
    lse = castElements(rw, loc, lse, rt.getElementType());
    if (lse.getType() != rt)
      lse = tensor::CastOp::create(rw, loc, rt, lse);
    rw.replaceUsesWithIf(r->getResult(0), lse, [&](OpOperand &use) {
      return !inChain(use.getOwner());
    });
  }

  SmallVector<Operation *> worklist(chain.begin(), chain.end());
  worklist.append(lseRoots.begin(), lseRoots.end());
  worklist.append(absorbed.begin(), absorbed.end());
  if (bw) {
    worklist.append(bw->ops.begin(), bw->ops.end());
    if (bw->dp)
      worklist.push_back(bw->dp);
    ends.insert(bwEnds.begin(), bwEnds.end());
  }
  for (Operation *op : ends)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
  if (root != pvOp)
    worklist.push_back(pvOp);
  if (bw)
    replaceBackward(*bw, attn, q, k, v, firstGrad);
  rw.replaceOp(root, result);
  erased.insert(root);

  // The chain is dead now; erase what became trivially dead.
  worklist.append(seen.begin(), seen.end());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (erased.contains(op) || !isOpTriviallyDead(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (!erased.contains(def))
          worklist.push_back(def);
    erased.insert(op);
    rw.eraseOp(op);
  }
  return true;
}

/// Whether a contraction uses `v`, directly or through a few elementwise or
/// reshaping steps (a mask or dropout after the softmax): then the PV
/// candidate has already explained itself.
static bool reachesContraction(Value v, unsigned depth = 8) {
  for (Operation *user : v.getUsers()) {
    auto l = dyn_cast<linalg::LinalgOp>(user);
    if (l && isContraction(l))
      return true;
    if (depth > 0 && user->getNumResults() == 1 &&
        (l || isa<linalg::SoftmaxOp, tensor::ExpandShapeOp,
                  tensor::CollapseShapeOp, tensor::CastOp>(user)) &&
        reachesContraction(user->getResult(0), depth - 1))
      return true;
  }
  return false;
}

/// With remarks on: a softmax over the scores of a contraction `qk` that
/// nothing contracts afterwards is a softmax, not attention. The user asking
/// why nothing fused hears that at the softmax, instead of silence (there is
/// no PV candidate whose refusal could explain it).
static void remarkSoftmaxWithoutSecondMatmul(linalg::LinalgOp qk) {
  // Score-side values within a few elementwise steps of the scores.
  SmallVector<Value> frontier{qk->getResult(0)};
  DenseSet<Operation *> seen;
  for (unsigned step = 0; step < 32 && !frontier.empty(); ++step) {
    Value v = frontier.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second || user->getNumResults() != 1)
        continue;
      auto l = dyn_cast<linalg::LinalgOp>(user);
      if (l && isContraction(l))
        continue;
      if (!l && !isa<linalg::SoftmaxOp, tensor::ExpandShapeOp,
                     tensor::CollapseShapeOp, tensor::CastOp>(user))
        continue;
      Value r = user->getResult(0);
      frontier.push_back(r);
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type || type.getRank() < 2 || !isa<FloatType>(type.getElementType()))
        continue;
      if (reachesContraction(r))
        continue;
      // Try each axis as the softmax axis (the tracer's last dim).
      int64_t rank = type.getRank();
      MLIRContext *ctx = user->getContext();
      for (int64_t axis = 0; axis < rank; ++axis) {
        SmallVector<AffineExpr> view;
        SmallVector<int64_t> extents;
        for (int64_t d = 0; d < rank; ++d)
          if (d != axis)
            extents.push_back(type.getDimSize(d));
        extents.push_back(type.getDimSize(axis));
        for (int64_t d = 0, k = 0; d < rank; ++d)
          view.push_back(getAffineDimExpr(d == axis ? rank - 1 : k++, ctx));
        ScoreTracer t(ctx, extents);
        Node *p = t.trace(r, AffineMap::get(rank, 0, view, ctx));
        Refusal ignored;
        FailureOr<SoftmaxMatch> sm = matchSoftmax(t, p, ignored, user);
        if (failed(sm) || !readsFrom(sm->scores, qk))
          continue;
        user->emitRemark()
            << "attention not raised: this softmax over the scores of a "
               "matmul has no second matmul (its result is not contracted "
               "with V); only attention is fused";
        return;
      }
    }
  }
}

/// Skips value-preserving TOSA data movement between quantised steps.
static Value throughTosaRescale(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tosa::RescaleOp, tosa::CastOp, tosa::ReshapeOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// With remarks on, before TOSA is lowered: the quantised softmax of TOSA
/// legalisations (TF/TFLite int8/int16) computes exp with a lookup table on
/// x - reduce_max(x). It is recognised by exactly that: a tosa.table whose
/// input is (after rescales) such a difference, over values that come from
/// a tosa.matmul within a few steps. Anything else stays silent.
static void remarkIntegerSoftmax(FunctionOpInterface func) {
  func.walk([&](tosa::TableOp table) {
    auto sub = throughTosaRescale(table.getInput1()).getDefiningOp<tosa::SubOp>();
    if (!sub)
      return;
    auto max =
        throughTosaRescale(sub.getInput2()).getDefiningOp<tosa::ReduceMaxOp>();
    if (!max || throughTosaRescale(max.getInput()) !=
                    throughTosaRescale(sub.getInput1()))
      return;
    Value x = sub.getInput1();
    bool fromMatmul = false;
    for (unsigned step = 0; step < 8 && !fromMatmul; ++step) {
      Operation *def = x.getDefiningOp();
      if (!def || !isa<tosa::TosaDialect>(def->getDialect()) ||
          def->getNumOperands() == 0)
        break;
      fromMatmul = isa<tosa::MatMulOp>(def);
      x = def->getOperand(0);
    }
    if (!fromMatmul)
      return;
    table->emitRemark()
        << "attention not raised: integer softmax (a tosa.table lookup of "
           "x - reduce_max(x) on quantised scores) is not raised; "
           "flash.attention computes a float softmax";
  });
}

struct FlashRaiseAttentionPass
    : flash::impl::FlashRaiseAttentionPassBase<FlashRaiseAttentionPass> {
  using Base::Base;

  static void buildTosaNormalization(OpPassManager &pm) {
    pm.addPass(tosa::createTosaToLinalgNamed());
    pm.addPass(tosa::createTosaToLinalg());
    pm.addPass(createTosaToArithPass());
    pm.addPass(createTosaToTensorPass());
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    OpPassManager pm;
    buildTosaNormalization(pm);
    pm.getDependentDialects(registry);
  }

  // Any function-like op is a scope: func.func, or another compiler's own
  // (IREE's util.func), whether the pass is nested on it or runs on a module
  // and visits them all.
  void runOnOperation() override {
    SmallVector<FunctionOpInterface> funcs;
    getOperation()->walk([&](FunctionOpInterface f) { funcs.push_back(f); });
    for (FunctionOpInterface func : funcs)
      if (failed(raiseIn(func)))
        return signalPassFailure();
  }

  LogicalResult raiseIn(FunctionOpInterface func) {
    bool normalizedTosa = false;
    if (remarks)
      remarkIntegerSoftmax(func);
    if (normalizeTosa) {
      bool hasTosa = false;
      func.walk([&](Operation *op) {
        hasTosa |= isa<tosa::TosaDialect>(op->getDialect());
      });
      if (hasTosa) {
        OpPassManager pm;
        buildTosaNormalization(pm);
        if (failed(runPipeline(pm, func)))
          return failure();
        normalizedTosa = true;
      }
    }
    SmallVector<linalg::LinalgOp> candidates;
    func.walk([&](linalg::LinalgOp op) {
      if (isContraction(op))
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    Raiser raiser(rewriter, remarks);
    for (linalg::LinalgOp pv : candidates) {
      if (raiser.erased.contains(pv.getOperation()))
        continue;
      raiser.run(pv);
    }
    if (remarks)
      for (linalg::LinalgOp qk : candidates)
        if (!raiser.erased.contains(qk.getOperation()))
          remarkSoftmaxWithoutSecondMatmul(qk);
    foldPagedGathers(rewriter, func, remarks);
    // TOSA normalisation leaves dead reshapes and broadcasts behind (each
    // tosa.reshape used once more than its folded form needs); a fused
    // attention must not keep the repeated K/V alive through them.
    if (normalizedTosa) {
      SmallVector<Operation *> ops;
      func.walk<WalkOrder::PostOrder, ReverseIterator>(
          [&](Operation *op) { ops.push_back(op); });
      for (Operation *op : ops)
        if (op != func.getOperation() && isOpTriviallyDead(op))
          rewriter.eraseOp(op);
    }
    return success();
  }
};
} // namespace
