//===- Backward.cpp - autodiff's backward of a recognised attention -------===//
//
// A training graph reads the forward's P a second time, in the backward:
//
//   dV = Pᵀ·dO    dP = dO·Vᵀ    dS = P ∘ (dP − rowsum_j(dP ∘ P))
//   dQ = c·dS·K   dK = c·dSᵀ·Q  (c: the scale's chain rule)
//
// Each contraction reached from the escaping intermediates is classified by
// its other operand (the forward's K: dQ; its Q: dK; anything else: dV, whose
// other operand is dO), and its score-side operand is traced over the score
// space exactly as the forward's P (ScoreTrace.cpp). That tree is read as a
// polynomial in three atoms: P (a softmax of the forward's scores, matched by
// Softmax.cpp), dP (one contraction dO·Vᵀ) and R = rowsum_j(P ∘ dP). Every
// spelling autodiff emits — torch's grad·out − out·sum(grad·out), JAX's
// ct·y + y·sum(−ct·y), the hand-written (dP − R) ∘ P — and every placement of
// the scale's constants reduces to a·(P·dP − P·R), so one comparison accepts
// them all, and `a` is the factor by which the graph's gradient differs from
// flash.attention_grad's (1 for a correct chain rule; anything else is kept
// as an explicit multiply, so the function never changes).
//
// With a sink column (gpt-oss), P and dS are read through the slice that
// drops it: the slice's source is traced in the softmax's own score space,
// where the sink column of dP is a zero column (the slice's backward) and so
// adds nothing to the row sum; the polynomial is then the same. The sinks'
// own gradient is that expression at the sink column, where dP is 0:
// −a·P_sink·R, summed over batch and query rows (matchSinkGrad).
//
// A bias's gradient is the same polynomial summed over the score dims its
// read does not index (none for a bias of the scores' shape): the graph's
// value is traced at the bias's own read, so the reductions bind exactly the
// broadcast dims, and it becomes the gradient op's result for that capture.
//
//===----------------------------------------------------------------------===//
#include "RaiseAttentionImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <array>
#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

namespace {
/// Exponents of P, dP and R in one term.
using Monomial = std::array<uint8_t, 3>;
constexpr Monomial kOne{0, 0, 0}, kP{1, 0, 0}, kDP{0, 1, 0}, kR{0, 0, 1},
    kPdP{1, 1, 0}, kPR{1, 0, 1};

struct Poly {
  std::map<Monomial, double> terms;

  static Poly term(Monomial m, double c) {
    Poly p;
    if (c != 0.0)
      p.terms[m] = c;
    return p;
  }
  Poly plus(const Poly &o, double sign) const {
    Poly r = *this;
    for (auto [m, c] : o.terms)
      if ((r.terms[m] += sign * c) == 0.0)
        r.terms.erase(m);
    return r;
  }
  Poly scaled(double c) const {
    Poly r;
    for (auto [m, x] : terms)
      if (x * c != 0.0)
        r.terms[m] = x * c;
    return r;
  }
  /// The product; nullopt past degree 2 in an atom (nothing of the softmax
  /// backward is).
  std::optional<Poly> times(const Poly &o) const {
    Poly r;
    for (auto [a, x] : terms)
      for (auto [b, y] : o.terms) {
        Monomial m;
        for (int k = 0; k < 3; ++k) {
          m[k] = a[k] + b[k];
          if (m[k] > 2)
            return std::nullopt;
        }
        if ((r.terms[m] += x * y) == 0.0)
          r.terms.erase(m);
      }
    return r;
  }
  /// c when the polynomial is c·m alone.
  std::optional<double> only(Monomial m) const {
    if (terms.size() != 1 || terms.begin()->first != m)
      return std::nullopt;
    return terms.begin()->second;
  }
  /// a when the polynomial is a·(P·dP − P·R): the softmax backward.
  std::optional<double> softmaxGrad() const {
    auto a = terms.find(kPdP), b = terms.find(kPR);
    if (terms.size() != 2 || a == terms.end() || b == terms.end())
      return std::nullopt;
    if (std::abs(a->second + b->second) > 1e-12 * std::abs(a->second))
      return std::nullopt;
    return a->second;
  }
};

static bool dependsOn(const Node *n, const Node *leaf) {
  if (n == leaf)
    return true;
  for (Node *o : n->operands)
    if (dependsOn(o, leaf))
      return true;
  return false;
}

/// Whether d score_mod / d score is 1 wherever the score is not masked out
/// (the score plus terms free of it, under selects that replace it by a
/// fill): then flash.attention_grad's dS is the graph's, with no chain rule
/// through the score_mod for the backward to spell.
static bool hasUnitDerivative(Node *n, const Node *leaf) {
  n = stripCasts(n);
  if (n == leaf)
    return true;
  if (n->isOp("arith.addf") || n->isOp("arith.subf")) {
    bool a = dependsOn(n->operands[0], leaf),
         b = dependsOn(n->operands[1], leaf);
    if (a && !b)
      return hasUnitDerivative(n->operands[0], leaf);
    if (b && !a && n->isOp("arith.addf"))
      return hasUnitDerivative(n->operands[1], leaf);
    return false;
  }
  if (n->isOp("arith.select") && !dependsOn(n->operands[0], leaf)) {
    if (isMaskFill(n->operands[2]))
      return hasUnitDerivative(n->operands[1], leaf);
    if (isMaskFill(n->operands[1]))
      return hasUnitDerivative(n->operands[2], leaf);
  }
  return false;
}

/// Whether `op` is computed from `target` (use-def, within `limit` ops).
static bool computedFrom(Operation *op, Operation *target,
                         unsigned limit = 512) {
  SmallVector<Operation *> stack{op};
  DenseSet<Operation *> seen;
  while (!stack.empty() && seen.size() < limit) {
    Operation *o = stack.pop_back_val();
    if (o == target)
      return true;
    if (!seen.insert(o).second)
      continue;
    for (Value v : o->getOperands())
      if (Operation *def = v.getDefiningOp())
        stack.push_back(def);
  }
  return false;
}

/// The view of `type` (a bias's gradient) over the score space when it has
/// the shape of the capture `read` reads (a projection of the score
/// indices), up to unit dims: the read's index for each non-unit dim, 0 for
/// each unit dim. nullopt when the shapes differ in a non-unit dim.
static std::optional<AffineMap> biasView(const Node *read,
                                         RankedTensorType type) {
  auto ct = cast<RankedTensorType>(read->value.getType());
  if (!ct.hasStaticShape() || !type.hasStaticShape() ||
      !read->map.isProjectedPermutation())
    return std::nullopt;
  SmallVector<unsigned> nonUnit; // capture dims
  for (unsigned d = 0; d < ct.getRank(); ++d)
    if (ct.getDimSize(d) != 1)
      nonUnit.push_back(d);
  if (nonUnit.empty() && type.getShape() != ct.getShape())
    return std::nullopt;
  MLIRContext *ctx = type.getContext();
  SmallVector<AffineExpr> view;
  unsigned k = 0;
  for (int64_t size : type.getShape()) {
    if (size == 1) {
      view.push_back(getAffineConstantExpr(0, ctx));
      continue;
    }
    if (k == nonUnit.size() || ct.getDimSize(nonUnit[k]) != size)
      return std::nullopt;
    view.push_back(read->map.getResult(nonUnit[k++]));
  }
  if (k != nonUnit.size())
    return std::nullopt;
  return AffineMap::get(read->map.getNumDims(), 0, view, ctx);
}

static bool sameView(const OperandView &a, const OperandView &b) {
  return a.value == b.value && a.perm == b.perm;
}

class Matcher {
public:
  Matcher(const ForwardFacts &fwd, Refusal &why) : fwd(fwd), why(why) {
    collectMaskSelects(fwd.scores);
  }
  FailureOr<BackwardMatch> run(ArrayRef<Operation *> escapes,
                               DenseSet<Operation *> &examined);

private:
  enum class Kind { DQ, DK, DV };
  void collectMaskSelects(Node *n);
  bool isP(ScoreTracer &t, Node *n);
  FailureOr<Poly> poly(ScoreTracer &t, Node *n, Operation *at);
  FailureOr<Poly> slicedPoly(ScoreTracer &t, Node *n,
                             tensor::ExtractSliceOp slice, Operation *at);
  Value zeroPaddedKeys(Value v);
  LogicalResult matchSinkGrad();
  LogicalResult fail(const Node *n, Operation *at, std::string msg) {
    why = {n && n->origin ? n->origin : at, std::move(msg)};
    return failure();
  }
  LogicalResult setGradOut(const OperandView &v, Operation *at);
  LogicalResult classify(linalg::LinalgOp c);
  LogicalResult matchCaptureGrads();
  LogicalResult matchCaptureGrad(Operation *root,
                                 ArrayRef<const Node *> reads);
  Refusal matchCaptureGradOf(Operation *root, const Node *read,
                             AffineMap view);
  FailureOr<double> checkDP();

  const ForwardFacts &fwd;
  Refusal &why;
  BackwardMatch m;
  bool haveGradOut = false;
  Value dpValue;
  AffineMap dpMap;
  SmallVector<int64_t> extents; // the score space's
  /// Inside slicedPoly: tracing in the sink softmax's own score space.
  bool extended = false;
  bool sawSelect = false;
  /// The softmax gradient over all Lk + 1 columns (what dS is sliced from,
  /// laid out as the score space) and its factor a in a·(P·dP − P·R).
  Value fullGrad;
  double fullGradFactor = 1.0;
  /// The forward's mask selects: predicate and the operand (1 or 2) that
  /// holds the fill.
  SmallVector<std::pair<Node *, unsigned>> maskSelects;
};
} // namespace

void Matcher::collectMaskSelects(Node *n) {
  if (n->isOp("arith.select"))
    for (unsigned b : {1u, 2u})
      if (isMaskFill(n->operands[b]))
        maskSelects.push_back({n->operands[0], b});
  for (Node *o : n->operands)
    collectMaskSelects(o);
}

bool Matcher::isP(ScoreTracer &t, Node *n) {
  Refusal ignored;
  FailureOr<SoftmaxMatch> sm = matchSoftmax(t, n, ignored, nullptr);
  if (failed(sm))
    return false;
  if (extended)
    return structurallyEqual(stripCasts(peelRowMaxShift(t, sm->scores)),
                             stripCasts(fwd.sink->extendedScores));
  return structurallyEqual(stripCasts(sm->scores), stripCasts(fwd.scores));
}

/// With a sink column last, autodiff reads the softmax's gradient through
/// the same slice as the forward (dS = G[..., :Lk], P = P_full[..., :Lk]),
/// where G is the softmax backward over all Lk + 1 columns. `n` reads such
/// a slice: its source is traced in the softmax's own score space, where
/// P_full is the forward's softmax, dP_full is dP beside a zero column (the
/// slice's own backward) and the row sum runs over Lk + 1 columns, whose
/// sink term is 0. On the kept columns the polynomial is then the one
/// without a sink.
FailureOr<Poly> Matcher::slicedPoly(ScoreTracer &t, Node *n,
                                    tensor::ExtractSliceOp slice,
                                    Operation *at) {
  unsigned j = t.rank() - 1;
  RankedTensorType src = slice.getSourceType();
  auto fail = [&](const std::string &msg) -> FailureOr<Poly> {
    why = {slice, "with a sink column, " + msg};
    return failure();
  };
  if (!slice.hasUnitStride() || src.getRank() != slice.getType().getRank() ||
      !src.hasStaticShape())
    return fail("the backward reads the softmax through a slice that is "
                "not a static, unit-stride slice of the key axis");
  std::optional<unsigned> keyDim;
  unsigned narrowed = 0;
  for (auto [k, off] : llvm::enumerate(slice.getStaticOffsets())) {
    if (off != 0)
      return fail("the backward's slice does not start at column 0; only "
                  "a sink column after the scores is recognised in a "
                  "training graph");
    if (slice.getStaticSizes()[k] != src.getDimSize(k)) {
      keyDim = k;
      ++narrowed;
    }
  }
  if (narrowed != 1 || n->map.getResult(*keyDim) != getAffineDimExpr(j, t.getContext()) ||
      src.getDimSize(*keyDim) != slice.getStaticSizes()[*keyDim] + 1 ||
      fwd.sink->extended->getExtents()[j] != src.getDimSize(*keyDim))
    return fail("the backward's slice does not drop exactly the sink "
                "column from the softmax's key axis");
  SmallVector<int64_t> ext(t.getExtents());
  ext[j] = src.getDimSize(*keyDim);
  ScoreTracer te(t.getContext(), ext);
  Node *y = te.trace(slice.getSource(), n->map);
  extended = true;
  sawSelect = false;
  FailureOr<Poly> p = poly(te, y, at);
  extended = false;
  if (succeeded(p)) {
    m.ops.insert(te.visited.begin(), te.visited.end());
    m.ops.insert(slice);
    // The same elementwise expression at the sink column is the sinks'
    // gradient (matchSinkGrad); a select could treat that column apart.
    std::optional<double> a = p->softmaxGrad();
    if (a && !sawSelect && n->map.isIdentity()) {
      fullGrad = slice.getSource();
      fullGradFactor = *a;
    }
  }
  return p;
}

/// The graph's gradient of the sinks: the last column of the softmax
/// gradient G (where dP is 0, so G = a·(0 − P_sink·R) with R = rowsum(dP ∘
/// P), i.e. −a·exp(sink − lse)·rowsum(dO ∘ O)), summed over every score dim
/// but the head, in the shape of the sinks up to unit dims.
LogicalResult Matcher::matchSinkGrad() {
  if (!fwd.sink || !fullGrad)
    return success();
  const SinkMatch &sk = *fwd.sink;
  unsigned nb = fwd.numBatch;
  auto gType = cast<RankedTensorType>(fullGrad.getType());
  int64_t last = gType.getRank() - 1;
  for (Operation *user : fullGrad.getUsers()) {
    auto col = dyn_cast<tensor::ExtractSliceOp>(user);
    if (!col || m.ops.contains(col) || !col.hasUnitStride() ||
        !gType.hasStaticShape() ||
        col.getStaticOffsets()[last] != gType.getDimSize(last) - 1)
      continue;
    auto refuse = [&](const std::string &msg) {
      why = {col, "the sinks' gradient " + msg};
      return failure();
    };
    for (int64_t d = 0; d < last; ++d)
      if (col.getStaticOffsets()[d] != 0 ||
          col.getStaticSizes()[d] != gType.getDimSize(d))
        return refuse("reads part of the softmax gradient's rows");
    if (sk.source != SinkMatch::Source::HeadVector || sk.tiles != 1)
      return refuse("is taken of sinks that are not one tensor of one "
                    "logit per head");
    // Steps (reductions, reshapes, casts) from the column to its end.
    Operation *root = col;
    while (root->getResult(0).hasOneUse()) {
      Operation *next = *root->getUsers().begin();
      auto l = dyn_cast<linalg::LinalgOp>(next);
      if (next->getNumResults() != 1 ||
          !((l && !isMatmul(l)) ||
            isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                tensor::CastOp>(next)))
        break;
      root = next;
    }
    auto type = dyn_cast<RankedTensorType>(root->getResult(0).getType());
    int64_t hq = fwd.sink->extended->getExtents()[nb - 1];
    SmallVector<AffineExpr> view;
    unsigned heads = 0;
    MLIRContext *ctx = root->getContext();
    for (int64_t size : type ? type.getShape() : ArrayRef<int64_t>()) {
      if (size == 1) {
        view.push_back(getAffineConstantExpr(0, ctx));
      } else if (size == hq && !heads++) {
        view.push_back(getAffineDimExpr(nb - 1, ctx));
      } else {
        heads = 2;
        break;
      }
    }
    if (heads != 1 || !type.hasStaticShape())
      return refuse("does not end in the sinks' shape, one value per head");
    ScoreTracer t(ctx, extents);
    Node *n = t.trace(root->getResult(0),
                      AffineMap::get(nb + 2, 0, view, ctx));
    SmallVector<unsigned> summed;
    while (n->kind == Node::Kind::Reduce) {
      std::optional<double> init = n->operands[0]->getFloat();
      if (n->combiner != "arith.addf" || !init || *init != 0.0)
        return refuse("reduces the sink column other than by a sum from 0");
      summed.append(n->reduced.begin(), n->reduced.end());
      n = stripCasts(n->operands[1]);
    }
    llvm::sort(summed);
    SmallVector<unsigned> want;
    for (unsigned d = 0; d <= nb; ++d)
      if (d != nb - 1)
        want.push_back(d);
    if (summed != want)
      return refuse("does not sum the sink column over exactly the batch "
                    "and the query rows");
    // The column read at (batch..., i), rank-reduced or keepdim.
    SmallVector<AffineExpr> rows;
    for (unsigned d = 0; d <= nb; ++d)
      rows.push_back(getAffineDimExpr(d, ctx));
    AffineMap reduced = AffineMap::get(nb + 2, 0, rows, ctx);
    rows.push_back(getAffineConstantExpr(0, ctx));
    AffineMap keepdim = AffineMap::get(nb + 2, 0, rows, ctx);
    if (n->kind != Node::Kind::Read || n->value != col.getResult() ||
        (n->map != reduced && n->map != keepdim))
      return refuse("is not the softmax gradient's sink column summed");
    if (m.sinkGrad)
      return refuse("is computed twice");
    m.sinkGrad = BackwardMatch::SinkGrad{root->getResult(0), fullGradFactor};
    m.ops.insert(t.visited.begin(), t.visited.end());
    m.ops.insert(col);
    m.ops.insert(root);
  }
  return success();
}

/// `v` when it is dP beside a zero column along one axis (the backward of
/// the slice that drops the sink: tensor.pad by 1 at the high end, or
/// tensor.insert_slice at offset 0 into zeros), its source then; else
/// `v` itself.
Value Matcher::zeroPaddedKeys(Value v) {
  auto isZero = [](Value z) {
    std::optional<double> c;
    if (auto cst = z.getDefiningOp<arith::ConstantOp>())
      if (auto f = dyn_cast<FloatAttr>(cst.getValue()))
        c = f.getValueAsDouble();
    return c && *c == 0.0;
  };
  auto oneMore = [](RankedTensorType a, RankedTensorType b) {
    if (a.getRank() != b.getRank() || !a.hasStaticShape() ||
        !b.hasStaticShape())
      return false;
    unsigned grown = 0;
    for (int64_t k = 0; k < a.getRank(); ++k) {
      if (b.getDimSize(k) == a.getDimSize(k) + 1)
        ++grown;
      else if (b.getDimSize(k) != a.getDimSize(k))
        return false;
    }
    return grown == 1;
  };
  if (auto pad = v.getDefiningOp<tensor::PadOp>()) {
    Value fill = pad.getConstantPaddingValue();
    if (fill && isZero(fill) &&
        llvm::all_of(pad.getStaticLow(), [](int64_t l) { return l == 0; }) &&
        oneMore(pad.getSourceType(), pad.getResultType())) {
      m.ops.insert(pad);
      return pad.getSource();
    }
    return v;
  }
  auto ins = v.getDefiningOp<tensor::InsertSliceOp>();
  if (!ins || !ins.hasUnitStride() ||
      !llvm::all_of(ins.getStaticOffsets(), [](int64_t o) { return o == 0; }) ||
      ins.getSourceType().getShape() != ArrayRef(ins.getStaticSizes()) ||
      !oneMore(ins.getSourceType(), ins.getResultType()))
    return v;
  auto fill = ins.getDest().getDefiningOp<linalg::FillOp>();
  if (!fill || !isZero(fill.getInputs()[0]))
    return v;
  m.ops.insert(ins);
  return ins.getSource();
}

FailureOr<Poly> Matcher::poly(ScoreTracer &t, Node *n, Operation *at) {
  if (n->kind == Node::Kind::Const) {
    if (std::optional<double> c = n->getFloat())
      return Poly::term(kOne, *c);
    return fail(n, at, "the softmax gradient uses " + describe(n));
  }
  if (isP(t, n))
    return Poly::term(kP, 1.0);
  if (n->kind == Node::Kind::Read) {
    Value value = n->value;
    if (fwd.sink && !extended)
      if (auto slice = value.getDefiningOp<tensor::ExtractSliceOp>())
        return slicedPoly(t, n, slice, at);
    if (extended)
      value = zeroPaddedKeys(value);
    auto def = value.getDefiningOp<linalg::LinalgOp>();
    if (!def || !isMatmul(def) || def == fwd.qk || def == fwd.pv ||
        !n->map.isPermutation())
      return fail(n, at,
                  "the softmax gradient reads " + describe(n) +
                      ", which is neither P nor a matmul dO·Vᵀ (dP)");
    if (!dpValue) {
      dpValue = value;
      dpMap = n->map;
    } else if (dpValue != value || dpMap != n->map) {
      return fail(n, at, "the softmax gradient reads two different matmuls "
                         "(or one at two positions) as dP");
    }
    return Poly::term(kDP, 1.0);
  }
  if (n->kind == Node::Kind::Reduce) {
    std::optional<double> init = n->operands[0]->getFloat();
    if (n->combiner != "arith.addf" || n->reduced.size() != 1 ||
        n->reduced[0] != t.rank() - 1 || !init || *init != 0.0)
      return fail(n, at, "the softmax gradient's reduction is not a sum "
                         "over the keys from 0");
    FailureOr<Poly> body = poly(t, n->operands[1], at);
    if (failed(body))
      return failure();
    std::optional<double> b = body->only(kPdP);
    if (!b)
      return fail(n, at, "the softmax gradient's row sum is not a sum of "
                         "dP ∘ P");
    return Poly::term(kR, *b);
  }
  if (n->kind != Node::Kind::Op)
    return fail(n, at, "the softmax gradient uses " + describe(n));
  auto operand = [&](unsigned k) { return poly(t, n->operands[k], at); };
  if (n->isOp("arith.extf") || n->isOp("arith.truncf"))
    return operand(0);
  if (n->isOp("arith.negf")) {
    FailureOr<Poly> a = operand(0);
    if (failed(a))
      return failure();
    return a->scaled(-1.0);
  }
  if (n->isOp("arith.addf") || n->isOp("arith.subf") ||
      n->isOp("arith.mulf")) {
    FailureOr<Poly> a = operand(0);
    if (failed(a))
      return failure();
    FailureOr<Poly> b = operand(1);
    if (failed(b))
      return failure();
    if (!n->isOp("arith.mulf"))
      return a->plus(*b, n->isOp("arith.addf") ? 1.0 : -1.0);
    std::optional<Poly> p = a->times(*b);
    if (!p)
      return fail(n, at, "the softmax gradient is not linear in dP");
    return *p;
  }
  if (n->isOp("arith.divf")) {
    std::optional<double> c = stripCasts(n->operands[1])->getFloat();
    if (!c || *c == 0.0)
      return fail(n, at, "the softmax gradient divides by " +
                             describe(stripCasts(n->operands[1])));
    FailureOr<Poly> a = operand(0);
    if (failed(a))
      return failure();
    return a->scaled(1.0 / *c);
  }
  if (n->isOp("arith.select")) {
    sawSelect = true;
    // The mask's chain rule (torch's masked_fill backward): zero where the
    // forward filled, which changes nothing because P is 0 there.
    for (auto [pred, fill] : maskSelects) {
      if (!structurallyEqual(pred, n->operands[0]))
        continue;
      std::optional<double> z = stripCasts(n->operands[fill])->getFloat();
      if (!z || *z != 0.0)
        break;
      return operand(3 - fill);
    }
    return fail(n, at, "the softmax gradient selects on a predicate that "
                       "is not the forward's mask, or keeps a value where "
                       "the forward masked");
  }
  return fail(n, at, "the softmax gradient uses " + describe(n));
}

LogicalResult Matcher::setGradOut(const OperandView &v, Operation *at) {
  if (!haveGradOut) {
    m.gradOut = v;
    haveGradOut = true;
    return success();
  }
  if (sameView(v, m.gradOut))
    return success();
  why = {at, "dV and dP read different tensors as the output's gradient dO"};
  return failure();
}

LogicalResult Matcher::classify(linalg::LinalgOp c) {
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(c);
  unsigned nb = fwd.numBatch;
  if (failed(dims) || dims->k.size() != 1 || dims->m.size() != 1 ||
      dims->n.size() != 1 || dims->batch.size() != nb) {
    why = {c, "a matmul that reads the attention's probabilities is not a "
              "batched matmul over one axis (dV, dQ or dK)"};
    return failure();
  }
  SmallVector<unsigned> batch(dims->batch.begin(), dims->batch.end());
  llvm::sort(batch);
  SmallVector<AffineMap> maps = c.getIndexingMapsArray();
  bool reported = false;
  for (unsigned o = 0; o < 2; ++o) {
    unsigned scoreFree = (o == 0 ? dims->m : dims->n)[0];
    unsigned otherFree = (o == 0 ? dims->n : dims->m)[0];
    unsigned red = dims->k[0];
    SmallVector<unsigned> otherLoops(batch);
    otherLoops.append({red, otherFree});
    std::optional<SmallVector<int64_t>> perm =
        operandPerm(maps[1 - o], otherLoops);
    if (!perm)
      continue;
    double s = 1.0;
    llvm::SetVector<Operation *> seen;
    OperandView other =
        lookThroughOperand(c.getDpsInputs()[1 - o], *perm, &s, seen);
    Kind kind = sameView(other, fwd.k)   ? Kind::DQ
                : sameView(other, fwd.q) ? Kind::DK
                                         : Kind::DV;
    unsigned iLoop = kind == Kind::DQ ? scoreFree : red;
    unsigned jLoop = kind == Kind::DQ ? red : scoreFree;
    SmallVector<int64_t> ext;
    AffineMap loopMap = scoreSpaceMap(c, batch, iLoop, jLoop, ext);
    if (extents.empty())
      extents = ext;
    ScoreTracer t(c.getContext(), ext);
    Node *n = t.trace(c.getDpsInputs()[o], maps[o].compose(loopMap));
    bool reads = readsFrom(n, fwd.qk);
    // With a sink the operand is a slice of the softmax's own score space.
    if (!reads && fwd.sink)
      forEachNode(n, [&](const Node *r) {
        if (r->kind == Node::Kind::Read)
          if (Operation *def = r->value.getDefiningOp<tensor::ExtractSliceOp>())
            reads = computedFrom(def, fwd.qk);
        return !reads;
      });
    if (!reads)
      continue;
    reported = true;
    FailureOr<Poly> p = poly(t, n, c);
    if (failed(p))
      return failure();
    GradContraction g{c, batch, 1.0};
    g.loops.append({scoreFree, otherFree});
    GradContraction *slot;
    if (kind == Kind::DV) {
      std::optional<double> a = p->only(kP);
      if (!a) {
        why = {c, "a matmul contracts the query axis of a function of the "
                  "probabilities that is neither P (dV = Pᵀ·dO) nor the "
                  "softmax gradient with the forward's Q (dK)"};
        return failure();
      }
      if (failed(setGradOut(other, c)))
        return failure();
      g.factor = *a * s;
      slot = &m.dv;
    } else {
      std::optional<double> a = p->softmaxGrad();
      if (!a) {
        why = {c, std::string("the matmul with the forward's ") +
                      (kind == Kind::DQ ? "K" : "Q") +
                      " reads a function of the probabilities that is not "
                      "the softmax gradient P ∘ (dP − rowsum(dP ∘ P))"};
        return failure();
      }
      g.factor = *a * s / double(fwd.scale);
      slot = kind == Kind::DQ ? &m.dq : &m.dk;
    }
    if (slot->op) {
      why = {c, "two matmuls compute the same gradient of the attention"};
      return failure();
    }
    *slot = g;
    m.ops.insert(t.visited.begin(), t.visited.end());
    return success();
  }
  if (!reported)
    why = {c, "a matmul reads the attention's probabilities in a layout "
              "that is none of dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q"};
  return failure();
}

LogicalResult Matcher::matchCaptureGrads() {
  const ScoreModPlan &plan = *fwd.plan;
  Operation *dpOp = dpValue ? dpValue.getDefiningOp() : nullptr;
  if (!plan.body || !dpOp)
    return success();
  SmallVector<const Node *> reads;
  forEachNode(plan.body, [&](const Node *n) {
    if (n->kind == Node::Kind::Read && isa<FloatType>(n->type))
      reads.push_back(n);
    return true;
  });
  if (reads.empty())
    return success();
  // The values the backward computes from dS besides dQ and dK: each ends
  // where a chain of elementwise, reducing or reshaping steps stops.
  auto isGrad = [&](Operation *op) {
    return op == m.dq.op || op == m.dk.op || op == m.dv.op || op == dpOp;
  };
  auto isStep = [&](Operation *op) {
    auto l = dyn_cast<linalg::LinalgOp>(op);
    return op->getNumResults() == 1 &&
           ((l && !isMatmul(l)) ||
            isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                tensor::CastOp>(op));
  };
  llvm::SetVector<Operation *> roots;
  for (Operation *op : m.ops)
    for (Operation *user : op->getUsers()) {
      if (m.ops.contains(user) || isGrad(user))
        continue;
      if (!isStep(user)) {
        // dS itself leaves the backward: a bias of the scores' shape.
        roots.insert(op);
        continue;
      }
      Operation *r = user;
      while (r->getResult(0).hasOneUse()) {
        Operation *next = *r->getUsers().begin();
        if (!isStep(next) || m.ops.contains(next))
          break;
        r = next;
      }
      roots.insert(r);
    }
  for (Operation *r : roots)
    if (isStep(r) && computedFrom(r, dpOp) &&
        failed(matchCaptureGrad(r, reads)))
      return failure();
  return success();
}

LogicalResult Matcher::matchCaptureGrad(Operation *root,
                                        ArrayRef<const Node *> reads) {
  Value value = root->getResult(0);
  auto type = dyn_cast<RankedTensorType>(value.getType());
  std::string name = "'" + root->getName().getStringRef().str() + "'";
  std::optional<Refusal> first;
  for (const Node *read : reads) {
    std::optional<AffineMap> view =
        type ? biasView(read, type) : std::nullopt;
    if (!view)
      continue;
    Refusal r = matchCaptureGradOf(root, read, *view);
    if (!r.at)
      return success();
    if (!first)
      first = r;
  }
  if (first) {
    why = *first;
    return failure();
  }
  why = {root, "the result of " + name + ", computed from the softmax "
               "gradient dS, has the shape of no float capture of the score "
               "modification: it is not dS summed over exactly the dims a "
               "bias is broadcast along"};
  return failure();
}

Refusal Matcher::matchCaptureGradOf(Operation *root, const Node *read,
                                    AffineMap view) {
  const ScoreModPlan &plan = *fwd.plan;
  std::string prefix = "the result of '" +
                       root->getName().getStringRef().str() +
                       "', computed from the softmax gradient dS, is not "
                       "the gradient of the score modification's capture (" +
                       describe(read) + "): ";
  // The op's capture gradient is sum dS · d score_mod / d c; the graph's is
  // read as sum dS, so the capture must enter the score_mod as an added
  // term, read at one position.
  unsigned readsOfIt = 0;
  forEachNode(plan.body, [&](const Node *n) {
    readsOfIt += n->kind == Node::Kind::Read && n->value == read->value;
    return true;
  });
  if (readsOfIt != 1 || !hasUnitDerivative(plan.body, read))
    return {root, prefix + "the score modification is not the score plus "
                           "that capture (its derivative in the capture is "
                           "not 1)"};
  ScoreTracer t(root->getContext(), extents);
  Node *n = t.trace(root->getResult(0), view);
  SmallVector<unsigned> summed;
  while (n->kind == Node::Kind::Reduce) {
    std::optional<double> init = n->operands[0]->getFloat();
    if (n->combiner != "arith.addf" || !init || *init != 0.0)
      return {root, prefix + "a reduction is not a sum from 0"};
    summed.append(n->reduced.begin(), n->reduced.end());
    n = stripCasts(n->operands[1]);
  }
  llvm::sort(summed);
  SmallVector<unsigned> broadcast;
  for (unsigned d = 0; d < t.rank(); ++d)
    if (!read->map.isFunctionOfDim(d))
      broadcast.push_back(d);
  if (summed != broadcast)
    return {root, prefix + "it does not sum dS over exactly the score dims "
                           "the capture is broadcast along"};
  Refusal saved = why;
  FailureOr<Poly> p = poly(t, n, root);
  if (failed(p)) {
    Refusal r{root, prefix + "what it sums at the capture's positions is "
                             "not the softmax gradient: " + why.why};
    why = saved;
    return r;
  }
  std::optional<double> a = p->softmaxGrad();
  if (!a)
    return {root, prefix + "what it sums is not the softmax gradient "
                           "P ∘ (dP − rowsum(dP ∘ P))"};
  for (const BackwardMatch::CaptureGrad &g : m.captureGrads)
    if (g.capture == read->value)
      return {root, prefix + "two values compute that capture's gradient"};
  m.captureGrads.push_back({read->value, root->getResult(0), *a});
  m.ops.insert(t.visited.begin(), t.visited.end());
  m.ops.insert(root);
  return {};
}

FailureOr<double> Matcher::checkDP() {
  auto dp = dpValue.getDefiningOp<linalg::LinalgOp>();
  unsigned nb = fwd.numBatch;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(dp);
  AffineMap out = dp.getMatchingIndexingMap(dp.getDpsInitOperand(0));
  if (failed(dims) || dims->k.size() != 1 || !out.isProjectedPermutation() ||
      out.getNumResults() != nb + 2) {
    why = {dp, "dP is not a matmul dO·Vᵀ over the value axis"};
    return failure();
  }
  SmallVector<unsigned> loopOfScore(nb + 2);
  for (unsigned r = 0; r < nb + 2; ++r)
    loopOfScore[dpMap.getDimPosition(r)] = out.getDimPosition(r);
  unsigned e = dims->k[0];
  SmallVector<unsigned> doLoops(loopOfScore.begin(), loopOfScore.begin() + nb);
  SmallVector<unsigned> vLoops(doLoops);
  doLoops.append({loopOfScore[nb], e});
  vLoops.append({loopOfScore[nb + 1], e});
  SmallVector<AffineMap> maps = dp.getIndexingMapsArray();
  for (unsigned o = 0; o < 2; ++o) {
    auto doPerm = operandPerm(maps[o], doLoops);
    auto vPerm = operandPerm(maps[1 - o], vLoops);
    if (!doPerm || !vPerm)
      continue;
    double s = 1.0;
    llvm::SetVector<Operation *> seen;
    OperandView v = lookThroughOperand(dp.getDpsInputs()[1 - o], *vPerm, &s,
                                       seen);
    if (!sameView(v, fwd.v)) {
      why = {dp, "dP = dO·Vᵀ does not read the forward's V"};
      return failure();
    }
    OperandView grad =
        lookThroughOperand(dp.getDpsInputs()[o], *doPerm, &s, seen);
    if (failed(setGradOut(grad, dp)))
      return failure();
    m.dp = dp;
    return s;
  }
  why = {dp, "dP is not a matmul dO·Vᵀ over the value axis"};
  return failure();
}

FailureOr<BackwardMatch> Matcher::run(ArrayRef<Operation *> escapes,
                                      DenseSet<Operation *> &examined) {
  // The contractions that the escaping values reach through elementwise
  // and reshaping steps: the candidate gradient matmuls.
  llvm::SetVector<Operation *> candidates;
  SmallVector<Operation *> worklist(escapes.begin(), escapes.end());
  DenseSet<Operation *> visited;
  while (!worklist.empty() && visited.size() < 256) {
    Operation *op = worklist.pop_back_val();
    if (!visited.insert(op).second)
      continue;
    auto l = dyn_cast<linalg::LinalgOp>(op);
    if (l && isMatmul(l)) {
      if (op != fwd.qk && op != fwd.pv)
        candidates.insert(op);
      continue;
    }
    bool sliced = fwd.sink && isa<tensor::ExtractSliceOp, tensor::PadOp,
                                  tensor::InsertSliceOp>(op);
    if (!l && !sliced &&
        !isa<linalg::SoftmaxOp, tensor::ExpandShapeOp,
             tensor::CollapseShapeOp, tensor::CastOp>(op))
      continue;
    for (Operation *user : op->getUsers())
      worklist.push_back(user);
  }
  if (candidates.empty()) {
    why = {escapes.front(), "no matmul of a backward (dV, dQ, dK) reads it"};
    return failure();
  }
  examined.insert(candidates.begin(), candidates.end());
  const ScoreModPlan &plan = *fwd.plan;
  if (plan.body && !hasUnitDerivative(plan.body, plan.scoreLeaf)) {
    why = {fwd.pv, "the score modification's derivative is not 1, and its "
                   "chain rule in the backward is not recognised"};
    return failure();
  }
  if (plan.body) {
    // flash.attention_grad differentiates a float capture only where each
    // read indexes it by distinct score indices.
    bool differentiable = forEachNode(plan.body, [](const Node *n) {
      return !(n->kind == Node::Kind::Read && isa<FloatType>(n->type) &&
               !n->map.isProjectedPermutation(/*allowZeroInResults=*/false));
    });
    if (!differentiable) {
      why = {fwd.pv, "the score modification reads a float capture at "
                     "constant or repeated indices, which the gradient "
                     "op cannot differentiate"};
      return failure();
    }
  }
  for (Operation *c : candidates)
    if (failed(classify(cast<linalg::LinalgOp>(c))))
      return failure();
  if (fwd.scale == 0.0f && (m.dq.op || m.dk.op)) {
    why = {fwd.pv, "the scale is 0: the scores' gradient cannot be read "
                   "back from dQ or dK"};
    return failure();
  }
  if (failed(matchCaptureGrads()) || failed(matchSinkGrad()))
    return failure();
  if (m.dq.op || m.dk.op || !m.captureGrads.empty() || m.sinkGrad) {
    FailureOr<double> dpFactor = checkDP();
    if (failed(dpFactor))
      return failure();
    m.dq.factor *= *dpFactor;
    m.dk.factor *= *dpFactor;
    for (BackwardMatch::CaptureGrad &g : m.captureGrads)
      g.factor *= *dpFactor;
    if (m.sinkGrad)
      m.sinkGrad->factor *= *dpFactor;
  }
  return m;
}

/// The sizes of `shape` that are not 1, in order.
static SmallVector<int64_t> nonUnitSizes(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> r;
  for (int64_t s : shape)
    if (s != 1)
      r.push_back(s);
  return r;
}

/// Whether `red` sums its one input from 0 over exactly loop `dim`, with
/// identity input and an output that drops `dim` or reads it at 0.
static bool isSumOverLoop(linalg::LinalgOp red, unsigned dim) {
  if (red.getNumDpsInputs() != 1 || red.getNumDpsInits() != 1 ||
      red->getNumResults() != 1 || !hasZeroInit(red))
    return false;
  SmallVector<AffineMap> maps = red.getIndexingMapsArray();
  if (!maps[0].isIdentity())
    return false;
  SmallVector<utils::IteratorType> its = red.getIteratorTypesArray();
  for (unsigned l = 0; l < its.size(); ++l)
    if ((its[l] == utils::IteratorType::reduction) != (l == dim))
      return false;
  MLIRContext *ctx = red.getContext();
  SmallVector<AffineExpr> dropped, keepdim;
  for (unsigned l = 0; l < its.size(); ++l) {
    if (l != dim)
      dropped.push_back(getAffineDimExpr(l, ctx));
    keepdim.push_back(l == dim ? getAffineConstantExpr(0, ctx)
                               : getAffineDimExpr(l, ctx));
  }
  unsigned n = its.size();
  if (maps[1] != AffineMap::get(n, 0, dropped, ctx) &&
      maps[1] != AffineMap::get(n, 0, keepdim, ctx))
    return false;
  Block *body = red.getBlock();
  if (body->getNumArguments() != 2 || body->getOperations().size() != 2)
    return false;
  auto add = dyn_cast<arith::AddFOp>(body->front());
  auto yield = body->getTerminator();
  return add && yield->getNumOperands() == 1 &&
         yield->getOperand(0) == add.getResult() &&
         ((add.getLhs() == body->getArgument(0) &&
           add.getRhs() == body->getArgument(1)) ||
          (add.getLhs() == body->getArgument(1) &&
           add.getRhs() == body->getArgument(0)));
}

bool raise::matchGroupSum(GradContraction &g, unsigned headLoop,
                          int64_t group) {
  Value x = g.op->getResult(0);
  auto xt = cast<RankedTensorType>(x.getType());
  AffineMap out = g.op.getMatchingIndexingMap(g.op.getDpsInitOperand(0));
  std::optional<unsigned> hd = out.getResultPosition(
      getAffineDimExpr(headLoop, g.op.getContext()));
  if (!hd || !xt.hasStaticShape() || !x.hasOneUse() || group <= 1 ||
      xt.getDimSize(*hd) % group != 0)
    return false;
  int64_t heads = xt.getDimSize(*hd), kvHeads = heads / group;
  // Query head h reads KV head h / group (peelRepeatInterleave's order), so
  // the head dim splits as (kvHeads, group) and the group dim is summed.
  auto expand = dyn_cast<tensor::ExpandShapeOp>(*x.getUsers().begin());
  if (!expand || !expand.getResultType().hasStaticShape())
    return false;
  ArrayRef<int64_t> es = expand.getResultType().getShape();
  std::optional<unsigned> groupDim;
  for (auto [src, re] : llvm::enumerate(expand.getReassociationIndices())) {
    SmallVector<int64_t> sizes, dims;
    for (int64_t d : re)
      if (es[d] != 1) {
        sizes.push_back(es[d]);
        dims.push_back(d);
      }
    if (src != *hd) {
      if (sizes.size() > 1)
        return false;
      continue;
    }
    SmallVector<int64_t> want{kvHeads, group};
    if (kvHeads == 1)
      want.erase(want.begin());
    if (sizes != want)
      return false;
    groupDim = dims.back();
  }
  Value cur = expand.getResult();
  if (!groupDim || !cur.hasOneUse())
    return false;
  auto red = dyn_cast<linalg::LinalgOp>(*cur.getUsers().begin());
  if (!red || red.getDpsInputs()[0] != cur || !isSumOverLoop(red, *groupDim))
    return false;
  SmallVector<Operation *> chain{expand, red};
  cur = red->getResult(0);
  // At most reshapes that add or drop unit dims follow.
  while (cur.hasOneUse()) {
    Operation *user = *cur.getUsers().begin();
    if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user))
      break;
    auto from = cast<RankedTensorType>(cur.getType());
    auto to = cast<RankedTensorType>(user->getResult(0).getType());
    if (!to.hasStaticShape() ||
        nonUnitSizes(from.getShape()) != nonUnitSizes(to.getShape()))
      break;
    chain.push_back(user);
    cur = user->getResult(0);
  }
  SmallVector<int64_t> expected(xt.getShape());
  expected[*hd] = kvHeads;
  if (nonUnitSizes(cast<RankedTensorType>(cur.getType()).getShape()) !=
      nonUnitSizes(expected))
    return false;
  g.groupSum = cur;
  g.groupChain = std::move(chain);
  return true;
}

FailureOr<BackwardMatch> raise::matchBackward(const ForwardFacts &fwd,
                                              ArrayRef<Operation *> escapes,
                                              DenseSet<Operation *> &examined,
                                              Refusal &why) {
  Matcher matcher(fwd, why);
  return matcher.run(escapes, examined);
}
