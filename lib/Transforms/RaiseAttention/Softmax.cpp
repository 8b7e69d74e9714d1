//===- Softmax.cpp - softmax over the key axis, in every frontend shape ---===//
//
// Works on the score-space tree, so div vs rcp*mul, keepdim vs projected vs
// broadcast maps, fused sub+exp or exp+sum and linalg.softmax all reduce to
// one shape: exp(X - max_j X) / sum_j exp(X - max_j X), with the max
// optional (softmax is shift invariant) and the log-sum-exp spelling
// exp(X - (max_j X + log sum_j exp(X - max_j X))) accepted too.
//
//===----------------------------------------------------------------------===//
#include "RaiseAttentionImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

static Operation *at(const Node *n, Operation *fallback) {
  return n->origin ? n->origin : fallback;
}

/// The reduction must run over exactly the key axis j = rank - 1.
static LogicalResult checkAxis(ScoreTracer &t, const Node *r, StringRef what,
                               Refusal &why, Operation *fallback) {
  unsigned j = t.rank() - 1, i = t.rank() - 2;
  if (r->reduced.size() == 1 && r->reduced[0] == j)
    return success();
  why.at = at(r, fallback);
  if (r->reduced.size() == 1 && r->reduced[0] == i)
    why.why = llvm::formatv("softmax {0} reduces over the query axis, but the "
                            "second matmul contracts the key axis",
                            what);
  else if (r->reduced.size() > 1)
    why.why = llvm::formatv("softmax {0} reduces over {1} axes; only a "
                            "single-axis softmax over the keys is attention",
                            what, r->reduced.size());
  else
    why.why = llvm::formatv("softmax {0} reduces over a batch axis, not the "
                            "key axis the second matmul contracts",
                            what);
  return failure();
}

/// A max init must not exceed any input: -inf, the lowest finite value of
/// its type, or NaN when the combiner ignores NaN (maxnumf).
static bool isMaxIdentity(const Node *init, StringRef combiner) {
  std::optional<double> v = init->getFloat();
  if (!v)
    return false;
  auto ft = dyn_cast<FloatType>(init->type);
  if (!ft)
    return false;
  if (std::isnan(*v))
    return combiner == "arith.maxnumf";
  if (std::isinf(*v) && *v < 0)
    return true;
  APFloat lowest =
      APFloat::getLargest(ft.getFloatSemantics(), /*Negative=*/true);
  return *v <= lowest.convertToDouble();
}

static bool isFloatZero(const Node *n) {
  std::optional<double> v = n->getFloat();
  return v && *v == 0.0;
}

/// m = max_j X: returns X.
static FailureOr<Node *> matchRowMax(ScoreTracer &t, Node *m, Refusal &why,
                                     Operation *fallback) {
  m = stripCasts(m);
  if (m->kind != Node::Kind::Reduce) {
    why = {at(m, fallback), "the value subtracted before exp is " +
                                describe(m) + ", not a row max"};
    return failure();
  }
  if (m->combiner != "arith.maximumf" && m->combiner != "arith.maxnumf") {
    why = {at(m, fallback),
           "the reduction subtracted before exp is not a max (" +
               (m->combiner.empty() ? std::string("unrecognised combiner")
                                    : m->combiner) +
               ")"};
    return failure();
  }
  if (failed(checkAxis(t, m, "max", why, fallback)))
    return failure();
  if (!isMaxIdentity(m->operands[0], m->combiner)) {
    why = {at(m, fallback),
           "softmax max starts from " + describe(m->operands[0]) +
               " that is not -inf, the lowest value, or NaN with maxnumf: "
               "it clamps the scores"};
    return failure();
  }
  return m->operands[1];
}

/// z = sum_j e: checks combiner, axis, init and that it sums `e`.
static LogicalResult matchRowSum(ScoreTracer &t, Node *z, Node *e,
                                 Refusal &why, Operation *fallback) {
  z = stripCasts(z);
  if (z->kind != Node::Kind::Reduce) {
    why = {at(z, fallback), "the softmax denominator is " + describe(z) +
                                ", not a row sum of the exponentials"};
    return failure();
  }
  if (z->combiner != "arith.addf") {
    why = {at(z, fallback),
           "the softmax denominator is a reduction that is not a sum (" +
               (z->combiner.empty() ? std::string("unrecognised combiner")
                                    : z->combiner) +
               ")"};
    return failure();
  }
  if (failed(checkAxis(t, z, "sum", why, fallback)))
    return failure();
  if (!isFloatZero(z->operands[0])) {
    why = {at(z, fallback), "softmax sum starts from " +
                                describe(z->operands[0]) + ", not 0"};
    return failure();
  }
  if (!structurallyEqual(stripCasts(z->operands[1]), stripCasts(e))) {
    why = {at(z, fallback),
           "the softmax denominator sums something other than the "
           "exponentials in the numerator"};
    return failure();
  }
  return success();
}

/// e = exp(X - max X) or exp(X): fills X.
static LogicalResult matchExp(ScoreTracer &t, Node *e, SoftmaxMatch &m,
                              Refusal &why, Operation *fallback) {
  e = stripCasts(e);
  if (!e->isOp("math.exp")) {
    why = {at(e, fallback), "the softmax numerator is " + describe(e) +
                                ", not exp"};
    return failure();
  }
  Node *y = e->operands[0];
  if (y->isOp("arith.subf") &&
      stripCasts(y->operands[1])->kind == Node::Kind::Reduce) {
    FailureOr<Node *> x = matchRowMax(t, y->operands[1], why, fallback);
    if (failed(x))
      return failure();
    if (!structurallyEqual(stripCasts(*x), stripCasts(y->operands[0]))) {
      why = {at(y, fallback), "the row max is taken over a different tensor "
                              "than the one exponentiated"};
      return failure();
    }
    m.scores = y->operands[0];
    m.subtractsMax = true;
    return success();
  }
  m.scores = y;
  return success();
}

FailureOr<SoftmaxMatch> raise::matchSoftmax(ScoreTracer &t, Node *p,
                                            Refusal &why,
                                            Operation *fallback) {
  SoftmaxMatch m;
  p = stripCasts(simplifyIdentities(t, p));
  Node *e = nullptr, *z = nullptr;
  if (p->isOp("arith.divf")) {
    e = p->operands[0];
    z = p->operands[1];
  } else if (p->isOp("arith.mulf")) {
    for (int k = 0; k < 2 && !z; ++k) {
      Node *r = stripCasts(p->operands[k]);
      std::optional<double> one =
          r->isOp("arith.divf") ? r->operands[0]->getFloat() : std::nullopt;
      if (one && *one == 1.0) {
        z = r->operands[1];
        e = p->operands[1 - k];
      }
    }
    if (!z) {
      why = {at(p, fallback),
             "the second matmul reads a product that is not exp * 1/sum: a "
             "multiplicative mask or dropout after the softmax"};
      return failure();
    }
  } else if (p->isOp("math.exp")) {
    // Log-sum-exp form: exp(X - (max + log(sum exp(X - max)))).
    Node *y = p->operands[0];
    if (y->isOp("arith.subf")) {
      Node *lse = stripCasts(y->operands[1]);
      if (lse->isOp("arith.addf")) {
        for (int k = 0; k < 2; ++k) {
          Node *lg = stripCasts(lse->operands[k]);
          if (!lg->isOp("math.log"))
            continue;
          FailureOr<Node *> x = matchRowMax(t, lse->operands[1 - k], why,
                                            fallback);
          if (failed(x))
            return failure();
          if (!structurallyEqual(stripCasts(*x), stripCasts(y->operands[0]))) {
            why = {at(y, fallback), "the log-sum-exp is taken over a "
                                    "different tensor than the one "
                                    "exponentiated"};
            return failure();
          }
          Node *sum = lg->operands[0];
          Node *inner = stripCasts(stripCasts(sum)->kind == Node::Kind::Reduce
                                       ? stripCasts(sum)->operands[1]
                                       : sum);
          SoftmaxMatch im;
          if (failed(matchExp(t, inner, im, why, fallback)))
            return failure();
          if (failed(matchRowSum(t, sum, inner, why, fallback)))
            return failure();
          if (!im.subtractsMax ||
              !structurallyEqual(stripCasts(im.scores),
                                 stripCasts(y->operands[0]))) {
            why = {at(lg, fallback), "the log-sum-exp does not normalise the "
                                     "exponentiated scores"};
            return failure();
          }
          m.scores = y->operands[0];
          m.subtractsMax = true;
          m.lseForm = true;
          return m;
        }
      }
    }
    why = {at(p, fallback), "partial softmax: the exponentials are not "
                            "normalised by their row sum"};
    return failure();
  } else if (p->isOp("arith.select")) {
    why = {at(p, fallback), "a select between the softmax and the second "
                            "matmul: a mask after the softmax or dropout"};
    return failure();
  } else {
    why = {at(p, fallback), "the second matmul reads " + describe(p) +
                                ", not a softmax"};
    return failure();
  }
  if (stripCasts(e)->isOp("arith.select") || stripCasts(e)->isOp("arith.mulf")) {
    why = {at(stripCasts(e), fallback),
           "the softmax numerator is masked or scaled after exp: a mask "
           "after the softmax or dropout"};
    return failure();
  }
  if (failed(matchExp(t, e, m, why, fallback)))
    return failure();
  if (failed(matchRowSum(t, z, e, why, fallback)))
    return failure();
  return m;
}

FailureOr<SoftmaxMatch> raise::matchDeferredSoftmax(ScoreTracer &t, Node *p,
                                                    Node *z, Refusal &why,
                                                    Operation *fallback) {
  // sum_j(e_j v_j) / Z == sum_j (e_j / Z) v_j because Z does not depend on
  // j: the normalisation commutes with the second matmul.
  SoftmaxMatch m;
  Node *e = stripCasts(simplifyIdentities(t, p));
  if (failed(matchExp(t, e, m, why, fallback)))
    return failure();
  if (failed(matchRowSum(t, simplifyIdentities(t, z), e, why, fallback)))
    return failure();
  return m;
}

bool raise::isRowLogSumExp(ScoreTracer &t, Node *n, Node *x) {
  Refusal ignored;
  n = stripCasts(simplifyIdentities(t, n));
  x = stripCasts(x);
  // log(sum_j exp(X_j - M)) is the log-sum-exp only when M is added back.
  auto logOfSum = [&](Node *lg, bool subtractsMax) {
    lg = stripCasts(lg);
    if (!lg->isOp("math.log"))
      return false;
    Node *sum = stripCasts(lg->operands[0]);
    if (sum->kind != Node::Kind::Reduce)
      return false;
    Node *inner = stripCasts(sum->operands[1]);
    SoftmaxMatch im;
    return succeeded(matchExp(t, inner, im, ignored, nullptr)) &&
           im.subtractsMax == subtractsMax &&
           structurallyEqual(stripCasts(im.scores), x) &&
           succeeded(matchRowSum(t, sum, inner, ignored, nullptr));
  };
  if (n->isOp("arith.addf")) {
    for (int k = 0; k < 2; ++k) {
      if (!stripCasts(n->operands[k])->isOp("math.log"))
        continue;
      FailureOr<Node *> mx = matchRowMax(t, n->operands[1 - k], ignored,
                                         nullptr);
      if (failed(mx) || !structurallyEqual(stripCasts(*mx), x))
        return false;
      // The max inside the log must be this same row max (matchExp checks
      // that it is a max of the exponentiated tensor, i.e. of X).
      return logOfSum(n->operands[k], /*subtractsMax=*/true);
    }
    return false;
  }
  return logOfSum(n, /*subtractsMax=*/false);
}

Node *raise::peelRowMaxShift(ScoreTracer &t, Node *x) {
  SmallVector<Node *> casts;
  Node *s = x;
  while (s->isOp("arith.extf") || s->isOp("arith.truncf")) {
    casts.push_back(s);
    s = s->operands[0];
  }
  if (!s->isOp("arith.subf") ||
      stripCasts(s->operands[1])->kind != Node::Kind::Reduce)
    return x;
  Refusal ignored;
  FailureOr<Node *> inner = matchRowMax(t, s->operands[1], ignored, nullptr);
  if (failed(inner) ||
      !structurallyEqual(stripCasts(*inner), stripCasts(s->operands[0])))
    return x;
  Node *r = peelRowMaxShift(t, s->operands[0]);
  for (Node *c : llvm::reverse(casts))
    r = t.rebuild(c, {r});
  return r;
}

//===----------------------------------------------------------------------===//
// Attention sinks
//===----------------------------------------------------------------------===//
//
// gpt-oss appends one learned logit per head to every row of scores
// (torch.cat([scores, sinks], -1)), takes the softmax over Lk + 1 columns
// and slices the sink column off again before the second matmul: that is
// flash.attention's `sinks`, a key of value zero counted in the
// denominator. The softmax is matched in a score space of its own whose key
// extent is the concatenation's; the scores and the sink column are then
// traced over the second matmul's space (the kept columns are exactly the
// scores, so their key index is the second matmul's), and everything after
// this point sees the plain scores X.

namespace {
/// One input of the concatenation: columns [offset, offset + size) along
/// its axis (`axis` of `value`), all of every other dim; `dropped` are the
/// dims that a rank-reducing insert_slice leaves out of `value`. Offset and
/// size are unknown (nullopt, dynamic) after or at a dynamic size.
struct Piece {
  Value value;
  std::optional<int64_t> offset;
  int64_t size = 0;
  unsigned axis = 0;
  llvm::SmallDenseSet<unsigned> dropped;
};
} // namespace

/// Whether `size` provably is dim `dim` of `src`.
static bool isWholeDim(OpFoldResult size, Value src, int64_t dim) {
  int64_t n = cast<RankedTensorType>(src.getType()).getDimSize(dim);
  std::optional<int64_t> c = getConstantIntValue(size);
  if (c && !ShapedType::isDynamic(n))
    return *c == n;
  FailureOr<bool> equal = ValueBoundsConstraintSet::areEqual(
      ValueBoundsConstraintSet::Variable(size),
      ValueBoundsConstraintSet::Variable(src, dim));
  return succeeded(equal) && *equal;
}

/// The inputs of the concatenation `c` along `axis`: a tensor.concat, or
/// two insert_slices that together overwrite all of their destination.
static FailureOr<SmallVector<Piece>>
splitConcat(Value c, unsigned axis, SmallVectorImpl<Operation *> &ops,
            Refusal &why) {
  SmallVector<Piece> pieces;
  if (auto cat = c.getDefiningOp<tensor::ConcatOp>()) {
    ops.push_back(cat);
    if (cat.getDim() != axis) {
      why = {cat, llvm::formatv("the concatenation joins along dim {0}, but "
                                "the softmax runs along dim {1}",
                                cat.getDim(), axis)};
      return failure();
    }
    std::optional<int64_t> off = 0;
    for (Value in : cat.getInputs()) {
      int64_t n = cast<RankedTensorType>(in.getType()).getDimSize(axis);
      pieces.push_back({in, off, n, axis, {}});
      if (off && !ShapedType::isDynamic(n))
        *off += n;
      else
        off = std::nullopt;
    }
    return pieces;
  }
  auto outer = c.getDefiningOp<tensor::InsertSliceOp>();
  auto dest = cast<RankedTensorType>(c.getType());
  SmallVector<tensor::InsertSliceOp, 2> inserts;
  for (auto ins = outer; ins && inserts.size() < 2;
       ins = ins.getDest().getDefiningOp<tensor::InsertSliceOp>())
    inserts.push_back(ins);
  for (tensor::InsertSliceOp ins : inserts) {
    ops.push_back(ins);
    auto fail = [&](const Twine &what) {
      why = {ins, ("the insert_slice building the softmax input " + what)
                      .str()};
      return failure();
    };
    if (!ins.hasUnitStride())
      return fail("has strides");
    ArrayRef<int64_t> offs = ins.getStaticOffsets();
    ArrayRef<int64_t> sizes = ins.getStaticSizes();
    Piece p{ins.getSource(), 0, 0, 0, {}};
    for (unsigned k = 0; k < dest.getRank(); ++k) {
      if (ShapedType::isDynamic(offs[k]) || ShapedType::isDynamic(sizes[k]) ||
          ShapedType::isDynamic(dest.getDimSize(k)))
        return fail("has dynamic offsets or sizes; a sink column is "
                    "recognised at static sizes");
      if (k == axis) {
        p.offset = offs[k];
        p.size = sizes[k];
      } else if (offs[k] != 0 || sizes[k] != dest.getDimSize(k)) {
        return fail(llvm::formatv("covers part of dim {0}; the scores and "
                                  "the sink must span every dim but the "
                                  "key axis {1}",
                                  k, axis)
                        .str());
      }
    }
    auto dropped = computeRankReductionMask(
        sizes, ins.getSourceType().getShape());
    if (!dropped)
      return fail("drops dims that are not unit");
    p.dropped = *dropped;
    p.axis = axis;
    for (unsigned d : *dropped)
      p.axis -= d < axis;
    pieces.push_back(p);
  }
  // The outer insert wins where they overlap: they must not, and together
  // they must leave nothing of the destination.
  llvm::sort(pieces, [](const Piece &a, const Piece &b) {
    return *a.offset < *b.offset;
  });
  int64_t end = 0;
  for (const Piece &p : pieces) {
    if (*p.offset != end)
      break;
    end += p.size;
  }
  if (end != dest.getDimSize(axis)) {
    why = {outer, "the insert_slices building the softmax input do not "
                  "cover it exactly once along the key axis (the scores "
                  "beside one sink column)"};
    return failure();
  }
  return pieces;
}

/// `map` without the results at `dropped`, result `pos` replaced by `e`.
static AffineMap pieceView(AffineMap map, unsigned pos, AffineExpr e,
                           const llvm::SmallDenseSet<unsigned> &dropped) {
  SmallVector<AffineExpr> results;
  for (auto [k, r] : llvm::enumerate(map.getResults()))
    if (!dropped.contains(k))
      results.push_back(k == pos ? e : r);
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(), results,
                        map.getContext());
}

static bool isSupportedSinkType(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

/// Fills the sink's source in `m` from the traced sink column `logit`.
static LogicalResult analyseSinkLogit(ScoreTracer &t, Node *logit,
                                      SinkMatch &m, Refusal &why,
                                      Operation *at) {
  unsigned nb = t.rank() - 2;
  m.logit = logit;
  Node *core = logit;
  SmallVector<Type> casts;
  while (core->isOp("arith.extf") || core->isOp("arith.truncf")) {
    casts.push_back(core->type);
    core = core->operands[0];
  }
  m.casts.assign(casts.rbegin(), casts.rend());
  if (!isSupportedSinkType(logit->type)) {
    why = {at, llvm::formatv("the sink column has {0} elements; sinks are "
                             "f32, f16 or bf16",
                             logit->type)};
    return failure();
  }
  if (!isa<FloatType>(core->type)) {
    why = {at, "the sink column is converted from " +
                   llvm::formatv("{0}", core->type).str() +
                   " values; a sink is a float logit"};
    return failure();
  }
  if (nb == 0) {
    why = {at, "a sink is one logit per head, but the attention has no "
               "heads dim"};
    return failure();
  }
  unsigned head = nb - 1;
  switch (core->kind) {
  case Node::Kind::Const:
    m.source = SinkMatch::Source::Constant;
    m.constant = core->cst;
    return success();
  case Node::Kind::Scalar:
    m.source = SinkMatch::Source::Scalar;
    m.value = core->value;
    return success();
  case Node::Kind::Read:
    break;
  default:
    why = {at, "the sink column is " + describe(core) +
                   ", not a per-head value read from a tensor"};
    return failure();
  }
  auto type = dyn_cast<RankedTensorType>(core->value.getType());
  if (!type) {
    why = {at, "the sink column is read from a value that is not a ranked "
               "tensor"};
    return failure();
  }
  std::optional<unsigned> headPos;
  SmallVector<int64_t> index;
  int64_t hq = t.getExtents()[head];
  for (auto [k, e] : llvm::enumerate(core->map.getResults())) {
    if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      index.push_back(c.getValue());
      continue;
    }
    auto d = dyn_cast<AffineDimExpr>(e);
    // Heads merged into the batch ([B * H], as a batch_matmul over
    // collapsed batch and heads reads them) index the vector by bh mod H.
    if (auto mod = dyn_cast<AffineBinaryOpExpr>(e);
        !headPos && mod && mod.getKind() == AffineExprKind::Mod) {
      auto md = dyn_cast<AffineDimExpr>(mod.getLHS());
      auto mc = dyn_cast<AffineConstantExpr>(mod.getRHS());
      int64_t h = mc ? mc.getValue() : 0;
      if (md && md.getPosition() == head && h > 0 &&
          type.getDimSize(k) == h && !ShapedType::isDynamic(hq) &&
          hq % h == 0) {
        headPos = k;
        m.tiles = hq / h;
        index.push_back(0);
        continue;
      }
    }
    if (d && d.getPosition() == head && !headPos) {
      headPos = k;
      index.push_back(0);
      continue;
    }
    std::string where =
        !d ? "a computed index"
        : d.getPosition() == head ? "the head index twice"
        : d.getPosition() == nb   ? "the query row"
        : d.getPosition() == nb + 1
            ? "the key column"
            : llvm::formatv("batch dim {0}", d.getPosition()).str();
    why = {at, "the sink column varies with " + where +
                   "; a sink is one logit per head"};
    return failure();
  }
  if (!headPos) {
    m.source = SinkMatch::Source::Element;
    m.value = core->value;
    m.index = index;
    return success();
  }
  for (int64_t k = 0; k < type.getRank(); ++k)
    if (k != static_cast<int64_t>(*headPos) && type.getDimSize(k) != 1) {
      why = {at, llvm::formatv("the sink column reads one slice of {0}; "
                               "sinks are a tensor of one logit per head",
                               type)};
      return failure();
    }
  int64_t hs = type.getDimSize(*headPos);
  if (m.tiles == 1 && !ShapedType::isDynamic(hq) &&
      !ShapedType::isDynamic(hs) && hq != hs) {
    why = {at, llvm::formatv("the sinks {0} hold {1} logits for {2} query "
                             "heads",
                             type, hs, hq)};
    return failure();
  }
  m.source = SinkMatch::Source::HeadVector;
  m.value = core->value;
  return success();
}

/// Whether a contraction is among the producers of `v` within a few ops.
static bool computedByMatmul(Value v, unsigned depth = 8) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (auto l = dyn_cast<linalg::LinalgOp>(def); l && isContraction(l))
    return true;
  if (depth == 0)
    return false;
  for (Value operand : def->getOperands())
    if (computedByMatmul(operand, depth - 1))
      return true;
  return false;
}

SinkResult raise::matchSinkSoftmax(ScoreTracer &t, Node *p, SinkMatch &m,
                                   Refusal &why, Operation *fallback) {
  unsigned nb = t.rank() - 2, j = nb + 1;
  MLIRContext *ctx = t.getContext();
  Node *r = stripCasts(simplifyIdentities(t, p));
  if (r->kind != Node::Kind::Read)
    return SinkResult::NotCandidate;
  auto slice = r->value.getDefiningOp<tensor::ExtractSliceOp>();
  if (!slice || !slice.hasUnitStride() ||
      slice.getSourceType().getRank() != slice.getResultType().getRank())
    return SinkResult::NotCandidate;
  Value src = slice.getSource();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  // Dims the slice narrows, or may narrow (a dynamic size it cannot show
  // whole); the one the key axis reads first.
  SmallVector<unsigned> narrowed;
  for (unsigned k = 0; k < offsets.size(); ++k)
    if (!isConstantIntValue(offsets[k], 0) || !isWholeDim(sizes[k], src, k))
      narrowed.push_back(k);
  if (narrowed.empty())
    return SinkResult::NotCandidate;
  std::stable_partition(narrowed.begin(), narrowed.end(), [&](unsigned k) {
    return r->map.getResult(k) == getAffineDimExpr(j, ctx);
  });
  unsigned axis = narrowed.front();
  auto axisDim = dyn_cast<AffineDimExpr>(r->map.getResult(axis));
  if (!axisDim)
    return SinkResult::NotCandidate;
  unsigned sd = axisDim.getPosition();
  for (auto [k, e] : llvm::enumerate(r->map.getResults()))
    if (k != axis && e.isFunctionOfDim(sd))
      return SinkResult::NotCandidate;

  // The slice's source over a score space whose dim `sd` is the source's.
  SmallVector<int64_t> extents(t.getExtents());
  extents[sd] = slice.getSourceType().getDimSize(axis);
  auto extended = std::make_shared<ScoreTracer>(ctx, extents);
  ScoreTracer &te = *extended;
  Node *y = te.trace(src, r->map);
  bool reduces = findOp(y, "math.exp") || containsKind(y, Node::Kind::Reduce);
  bool fromScores = false;
  forEachNode(y, [&](const Node *n) {
    fromScores = n->kind == Node::Kind::Read && computedByMatmul(n->value);
    return !fromScores;
  });
  if (!reduces || !fromScores)
    return SinkResult::NotCandidate;

  // From here on the chain is attention-like: every mismatch explains
  // itself.
  auto refuse = [&](Operation *at, const std::string &msg) {
    why = {at ? at : fallback, msg};
    return SinkResult::Refused;
  };
  if (narrowed.size() > 1)
    return refuse(slice, llvm::formatv("the slice after the softmax narrows "
                                       "{0} dims (or cannot show them whole "
                                       "at dynamic sizes); a sink slice "
                                       "drops one column of the key axis "
                                       "only",
                                       narrowed.size()));
  if (sd != j)
    return refuse(slice, "the second matmul reads the softmax through a "
                         "slice along the " +
                             (sd == nb ? std::string("query axis")
                                       : llvm::formatv("batch dim {0}", sd)
                                             .str()) +
                             "; only a slice along the key axis that drops "
                             "a sink column is recognised");
  FailureOr<SoftmaxMatch> sm = matchSoftmax(te, y, why, fallback);
  if (failed(sm))
    return SinkResult::Refused;
  std::optional<int64_t> keptOff = getConstantIntValue(offsets[axis]);
  std::optional<int64_t> keptSize = getConstantIntValue(sizes[axis]);
  if (!keptOff)
    return refuse(slice, "the slice after the softmax starts at a dynamic "
                         "column; a sink is the first or the last one");
  // Columns for remarks: [a, b) of n, '?' where dynamic.
  auto num = [](std::optional<int64_t> v) {
    return v && !ShapedType::isDynamic(*v) ? std::to_string(*v)
                                           : std::string("?");
  };
  std::optional<int64_t> keptEnd;
  if (keptSize)
    keptEnd = *keptOff + *keptSize;
  std::string kept = "columns [" + num(keptOff) + ", " + num(keptEnd) +
                     ") of the " + num(extents[j]);

  // What the softmax normalises: the concatenation, up to casts.
  Node *xe = peelRowMaxShift(te, sm->scores);
  SmallVector<Node *> casts;
  Node *c = xe;
  while (c->isOp("arith.extf") || c->isOp("arith.truncf")) {
    casts.push_back(c);
    c = c->operands[0];
  }
  Operation *cDef = c->kind == Node::Kind::Read ? c->value.getDefiningOp()
                                                : nullptr;
  if (!isa_and_nonnull<tensor::ConcatOp, tensor::InsertSliceOp>(cDef))
    return refuse(c->origin ? c->origin : slice.getOperation(),
                  "the second matmul reads " + kept +
                      " columns the softmax normalises, and what it "
                      "normalises is " +
                      describe(c) +
                      ", not the scores concatenated with a sink column");
  std::optional<unsigned> cAxis;
  for (auto [k, e] : llvm::enumerate(c->map.getResults())) {
    if (!e.isFunctionOfDim(j))
      continue;
    if (cAxis || e != getAffineDimExpr(j, ctx))
      return refuse(cDef, "the concatenation is read at a key index that "
                          "is not its own column");
    cAxis = k;
  }
  if (!cAxis)
    return refuse(cDef, "the concatenation the softmax normalises is "
                        "broadcast along the key axis");
  FailureOr<SmallVector<Piece>> pieces =
      splitConcat(c->value, *cAxis, m.ops, why);
  if (failed(pieces))
    return SinkResult::Refused;
  if (pieces->size() != 2)
    return refuse(cDef, llvm::formatv("the softmax normalises {0} tensors "
                                      "joined along the key axis; a sink "
                                      "is one column beside the scores",
                                      pieces->size()));
  // The kept columns must be one piece; the other is the sink.
  const Piece *scores = nullptr, *sink = nullptr;
  for (int k = 0; k < 2; ++k) {
    const Piece &a = (*pieces)[k], &b = (*pieces)[1 - k];
    if (b.size != 1 || a.offset != keptOff)
      continue;
    bool sameSize =
        keptSize && !ShapedType::isDynamic(a.size)
            ? *keptSize == a.size
            : isWholeDim(sizes[axis], a.value, a.axis);
    if (sameSize) {
      scores = &a;
      sink = &b;
    }
  }
  if (!scores) {
    for (const Piece &b : *pieces)
      if (b.size == 1 && b.offset && *b.offset >= *keptOff &&
          (!keptEnd || *b.offset < *keptEnd))
        return refuse(slice, "the slice after the softmax keeps " + kept +
                                 ", the sink column " + num(b.offset) +
                                 " among them; only the scores may reach "
                                 "the second matmul");
    return refuse(slice, "the slice after the softmax keeps " + kept +
                             ", not exactly the scores beside one sink "
                             "column");
  }

  // The kept columns are the scores at the second matmul's key index; the
  // sink is the other piece's only column.
  Node *x = t.trace(scores->value,
                    pieceView(c->map, *cAxis, getAffineDimExpr(j, ctx),
                              scores->dropped));
  Node *logit = t.trace(sink->value,
                        pieceView(c->map, *cAxis, getAffineConstantExpr(0, ctx),
                                  sink->dropped));
  for (Node *cast : llvm::reverse(casts)) {
    x = t.rebuild(cast, {x});
    logit = t.rebuild(cast, {logit});
  }
  if (failed(analyseSinkLogit(t, logit, m, why, cDef)))
    return SinkResult::Refused;
  m.softmax = *sm;
  m.softmax.scores = x;
  m.extended = std::move(extended);
  m.extendedScores = xe;
  m.ops.push_back(slice);
  m.ops.append(te.visited.begin(), te.visited.end());
  return SinkResult::Matched;
}

/// `v` with elements of float type `to`.
static Value convertElements(RewriterBase &rw, Location loc, Value v,
                             Type to) {
  auto from = cast<FloatType>(getElementTypeOrSelf(v.getType()));
  if (from != to && from.getWidth() == cast<FloatType>(to).getWidth())
    v = castElements(rw, loc, v, rw.getF32Type());
  return castElements(rw, loc, v, to);
}

Value raise::materializeSinks(RewriterBase &rw, Location loc,
                              const SinkMatch &m, OpFoldResult hq) {
  auto fill = [&](Value scalar) {
    Value empty = tensor::EmptyOp::create(rw, loc, ArrayRef<OpFoldResult>{hq},
                                          scalar.getType());
    return linalg::FillOp::create(rw, loc, scalar, empty).getResult(0);
  };
  Value v;
  switch (m.source) {
  case SinkMatch::Source::HeadVector: {
    v = m.value;
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() != 1) {
      ReassociationIndices all;
      for (int64_t k = 0; k < type.getRank(); ++k)
        all.push_back(k);
      v = tensor::CollapseShapeOp::create(rw, loc, v,
                                          ArrayRef<ReassociationIndices>{all});
    }
    if (m.tiles > 1) {
      auto vt = cast<RankedTensorType>(v.getType());
      int64_t h = vt.getDimSize(0);
      Value empty = tensor::EmptyOp::create(
          rw, loc, ArrayRef<int64_t>{m.tiles, h}, vt.getElementType());
      v = linalg::BroadcastOp::create(rw, loc, v, empty,
                                      ArrayRef<int64_t>{0})
              ->getResult(0);
      v = tensor::CollapseShapeOp::create(
          rw, loc, v, ArrayRef<ReassociationIndices>{{0, 1}});
    }
    break;
  }
  case SinkMatch::Source::Element: {
    SmallVector<Value> index;
    for (int64_t c : m.index)
      index.push_back(arith::ConstantIndexOp::create(rw, loc, c));
    v = fill(tensor::ExtractOp::create(rw, loc, m.value, index));
    break;
  }
  case SinkMatch::Source::Scalar:
    v = fill(m.value);
    break;
  case SinkMatch::Source::Constant:
    v = fill(arith::ConstantOp::create(rw, loc, m.constant));
    break;
  }
  for (Type to : m.casts)
    v = convertElements(rw, loc, v, to);
  return v;
}
