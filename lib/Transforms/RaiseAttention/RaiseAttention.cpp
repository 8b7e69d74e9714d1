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
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/Iterators.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

/// `v` with float elements of type `to` (a generic of extf/truncf).
static Value castTensor(RewriterBase &rw, Location loc, Value v, Type to) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getElementType() == to)
    return v;
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rw, loc, v);
  Value empty = tensor::EmptyOp::create(rw, loc, sizes, to);
  int64_t rank = type.getRank();
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
  bool widen = cast<FloatType>(type.getElementType()).getWidth() <
               cast<FloatType>(to).getWidth();
  return linalg::GenericOp::create(
             rw, loc, empty.getType(), ValueRange{v}, ValueRange{empty},
             ArrayRef<AffineMap>{id, id}, its,
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value r = widen ? arith::ExtFOp::create(b, l, to, args[0])
                                     .getResult()
                               : arith::TruncFOp::create(b, l, to, args[0])
                                     .getResult();
               linalg::YieldOp::create(b, l, r);
             })
      .getResult(0);
}

class Raiser {
public:
  Raiser(RewriterBase &rw, bool remarks) : rw(rw), remarks(remarks) {}

  /// Tries to rewrite the attention ending at `pv`. Returns true when rewritten.
  bool run(linalg::LinalgOp pv);

  DenseSet<Operation *> erased;

private:
  RewriterBase &rw;
  bool remarks;

  void refuse(const Refusal &why, linalg::LinalgOp pv) {
    if (!remarks)
      return;
    Operation *at = why.at ? why.at : pv.getOperation();
    at->emitRemark() << "attention not raised: " << why.why;
  }
};

bool Raiser::run(linalg::LinalgOp pv) {
  if (!isContraction(pv))
    return false;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(pv);
  if (failed(dims) || dims->k.size() != 1)
    return false;
  MLIRContext *ctx = pv.getContext();
  SmallVector<int64_t> ranges = pv.getStaticLoopRanges();
  SmallVector<AffineMap> pvMaps = pv.getIndexingMapsArray();

  // Pick the operand that is a softmax-like tree over a contraction.
  std::unique_ptr<ScoreTracer> tracer;
  PVLayout layout;
  Node *p = nullptr;
  for (unsigned o = 0; o < 2 && !p; ++o) {
    const auto &pSide = o == 0 ? dims->m : dims->n;
    const auto &vSide = o == 0 ? dims->n : dims->m;
    if (pSide.size() != 1 || vSide.size() != 1)
      continue;
    PVLayout l{o, SmallVector<unsigned>(dims->batch.begin(), dims->batch.end()),
               pSide[0], dims->k[0], vSide[0]};
    llvm::sort(l.batchLoops);
    unsigned nb = l.batchLoops.size();
    SmallVector<AffineExpr> assign(pv.getNumLoops(),
                                   getAffineConstantExpr(0, ctx));
    SmallVector<int64_t> extents;
    for (auto [k, loop] : llvm::enumerate(l.batchLoops)) {
      assign[loop] = getAffineDimExpr(k, ctx);
      extents.push_back(ranges[loop]);
    }
    assign[l.iLoop] = getAffineDimExpr(nb, ctx);
    assign[l.jLoop] = getAffineDimExpr(nb + 1, ctx);
    extents.push_back(ranges[l.iLoop]);
    extents.push_back(ranges[l.jLoop]);
    AffineMap loopMap = AffineMap::get(nb + 2, 0, assign, ctx);
    auto t = std::make_unique<ScoreTracer>(ctx, extents);
    Node *n = t->trace(pv.getDpsInputs()[o], pvMaps[o].compose(loopMap));
    if (isCandidateTree(n)) {
      p = n;
      layout = l;
      tracer = std::move(t);
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

  // Link 1: P is a softmax over j.
  FailureOr<SoftmaxMatch> sm = matchSoftmax(t, p, why, pvOp);
  if (failed(sm))
    return fail();
  Node *x = sm->scores;
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

  // Link 4: no intermediate that depends on the scores escapes.
  DenseMap<Operation *, bool> dependent;
  std::function<bool(Operation *)> dependsOnScores = [&](Operation *op) {
    if (op == qkOp)
      return true;
    if (!t.visited.contains(op))
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
  for (Operation *op : chain) {
    if (!dependsOnScores(op))
      continue;
    for (Operation *user : op->getUsers()) {
      if (user == pvOp || t.visited.contains(user))
        continue;
      why = {op, "an intermediate of the attention (result of '" +
                     op->getName().getStringRef().str() +
                     "') is also used by '" +
                     user->getName().getStringRef().str() +
                     "' outside the chain"};
      return fail();
    }
  }

  // Operands in the fused op's layout [batch..., L, D].
  auto permFor = [&](AffineMap m, ArrayRef<unsigned> loops)
      -> std::optional<SmallVector<int64_t>> {
    if (m.getNumResults() != loops.size())
      return std::nullopt;
    SmallVector<int64_t> perm;
    for (unsigned l : loops) {
      std::optional<unsigned> pos =
          m.getResultPosition(getAffineDimExpr(l, ctx));
      if (!pos)
        return std::nullopt;
      perm.push_back(*pos);
    }
    return perm;
  };
  SmallVector<unsigned> qkBatch(loopOfScore.begin(), loopOfScore.begin() + nb);
  SmallVector<unsigned> qLoops(qkBatch), kLoops(qkBatch), vLoops(
                                                              layout.batchLoops);
  qLoops.append({qi, dk});
  kLoops.append({kj, dk});
  vLoops.append({layout.jLoop, layout.eLoop});
  SmallVector<AffineMap> qkMaps = qk.getIndexingMapsArray();
  auto qPerm = permFor(qkMaps[qOperand], qLoops);
  auto kPerm = permFor(qkMaps[1 - qOperand], kLoops);
  auto vPerm = permFor(pvMaps[1 - layout.pOperand], vLoops);
  if (!qPerm || !kPerm || !vPerm) {
    why = {!qPerm || !kPerm ? qkOp : pvOp,
           "an operand of the matmuls is broadcast or indexed by a map "
           "that is not a permutation of [batch..., L, D]"};
    return fail();
  }

  rw.setInsertionPoint(pvOp);
  Location loc = pvOp->getLoc();
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
  if (nb > 0) {
    SmallVector<Operation *> created;
    auto kg = peelRepeatInterleave(rw, loc, kView.value, kView.perm[nb - 1],
                                   created);
    auto vg = peelRepeatInterleave(rw, loc, vView.value, vView.perm[nb - 1],
                                   created);
    if (kg && vg && kg->second == vg->second) {
      kView.value = kg->first;
      vView.value = vg->first;
    } else {
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
    q = castTensor(rw, loc, q, wide);
    k = castTensor(rw, loc, k, wide);
    v = castTensor(rw, loc, v, wide);
  }

  CaptureList captures;
  if (failed(collectCaptures(rw, loc, *plan, captures, why, pvOp)))
    return fail();

  SmallVector<OpFoldResult> outSizes;
  SmallVector<OpFoldResult> qSizes = tensor::getMixedSizes(rw, loc, q);
  SmallVector<OpFoldResult> vSizes = tensor::getMixedSizes(rw, loc, v);
  outSizes.append(qSizes.begin(), qSizes.begin() + nb + 1);
  outSizes.push_back(vSizes[nb + 1]);
  Value init = tensor::EmptyOp::create(rw, loc, outSizes, outElem);
  auto attn = AttentionOp::create(rw, loc, q, k, v, ValueRange{init},
                                  captures.operands, static_cast<float>(scale),
                                  plan->mask);
  if (plan->body &&
      failed(buildScoreModRegion(rw, attn, *plan, captures, nb + 2))) {
    rw.eraseOp(attn);
    why = {pvOp, "the score modification could not be cloned into a region"};
    return fail();
  }
  Value result = attn.getResult(0);

  // Back to the PV's own output layout.
  AffineMap pvOut = pv.getMatchingIndexingMap(pv.getDpsInitOperand(0));
  SmallVector<int64_t> outPerm;
  bool identity = true;
  for (unsigned r = 0; r < pvOut.getNumResults(); ++r) {
    unsigned loop = pvOut.getDimPosition(r);
    int64_t pos = loop == layout.iLoop   ? nb
                  : loop == layout.eLoop ? nb + 1
                                         : llvm::find(layout.batchLoops, loop) -
                                               layout.batchLoops.begin();
    outPerm.push_back(pos);
    identity &= pos == static_cast<int64_t>(r);
  }
  if (!identity) {
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rw, loc, result);
    SmallVector<OpFoldResult> tsizes;
    for (int64_t d : outPerm)
      tsizes.push_back(sizes[d]);
    Value empty = tensor::EmptyOp::create(rw, loc, tsizes, outElem);
    result = linalg::TransposeOp::create(rw, loc, result, empty, outPerm)
                 ->getResult(0);
  }
  if (result.getType() != pv->getResult(0).getType())
    result = tensor::CastOp::create(rw, loc, pv->getResult(0).getType(),
                                    result);
  SmallVector<Operation *> worklist(chain.begin(), chain.end());
  for (Value operand : pvOp->getOperands())
    if (Operation *def = operand.getDefiningOp())
      worklist.push_back(def);
  rw.replaceOp(pvOp, result);
  erased.insert(pvOp);

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
    OpPassManager pm(func::FuncOp::getOperationName());
    buildTosaNormalization(pm);
    pm.getDependentDialects(registry);
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    bool normalizedTosa = false;
    if (normalizeTosa) {
      bool hasTosa = false;
      func.walk([&](Operation *op) {
        hasTosa |= isa<tosa::TosaDialect>(op->getDialect());
      });
      if (hasTosa) {
        OpPassManager pm(func::FuncOp::getOperationName());
        buildTosaNormalization(pm);
        if (failed(runPipeline(pm, func)))
          return signalPassFailure();
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
    // TOSA normalisation leaves dead reshapes and broadcasts behind (each
    // tosa.reshape used once more than its folded form needs); a fused
    // attention must not keep the repeated K/V alive through them.
    if (normalizedTosa) {
      SmallVector<Operation *> ops;
      func.walk<WalkOrder::PostOrder, ReverseIterator>(
          [&](Operation *op) { ops.push_back(op); });
      for (Operation *op : ops)
        if (op != func && isOpTriviallyDead(op))
          rewriter.eraseOp(op);
    }
  }
};
} // namespace
