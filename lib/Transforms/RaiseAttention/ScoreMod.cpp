//===- ScoreMod.cpp - scale, structured mask and score_mod from the scores ===//
//
// What sits between QKᵀ and the softmax is an elementwise function of the
// score and its indices. Three parts of it are read off into attributes:
// splat multiplies/divides applied directly to q.k become `scale`; a select
// (or an additive 0/-inf term) whose predicate is j <= i + off with off = 0 or
// Lk - Lq becomes the causal mask kind; x*1 and x+0 residues vanish. The rest
// is cloned into the score_mod region, tensors it reads becoming captures.
//
// A fill <= -1e4 is read as -inf: exp underflows to 0 for both in f32 once the
// row max is subtracted, so only fully masked rows can tell them apart, and
// for those flash.attention defines the output as 0.
//
//===----------------------------------------------------------------------===//
#include "RaiseAttentionImpl.h"

#include "mlir/Dialect/Affine/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

bool raise::isMaskFill(const Node *n) {
  std::optional<double> v = stripCasts(const_cast<Node *>(n))->getFloat();
  return v && *v <= -1e4;
}

namespace {
/// c_i * i + c_j * j + c0 over the query and key indices.
struct Linear {
  int64_t ci = 0, cj = 0, c0 = 0;
};

struct Planner {
  ScoreTracer &t;
  Node *s;
  unsigned rank;
  int64_t lq, lk;
  /// Set by causalOffset: 0 for causal, W for a sliding window.
  mutable int64_t window = 0;

  bool isS(const Node *n) const { return n == s || structurallyEqual(n, s); }
  bool dependsOnS(const Node *n) const {
    if (isS(n))
      return true;
    for (Node *o : n->operands)
      if (dependsOnS(o))
        return true;
    return false;
  }
  int countS(const Node *n) const {
    if (isS(n))
      return 1;
    int c = 0;
    for (Node *o : n->operands)
      c += countS(o);
    return c;
  }

  static bool isFill(const Node *n) { return isMaskFill(n); }
  static bool isZero(const Node *n) {
    std::optional<double> v = stripCasts(const_cast<Node *>(n))->getFloat();
    return v && *v == 0.0;
  }

  std::optional<Linear> linear(const Node *n) const {
    if (n->kind == Node::Kind::Index) {
      if (n->dim == rank - 2)
        return Linear{1, 0, 0};
      if (n->dim == rank - 1)
        return Linear{0, 1, 0};
      return std::nullopt;
    }
    if (n->kind == Node::Kind::Const) {
      if (auto i = dyn_cast<IntegerAttr>(n->cst))
        return Linear{0, 0, i.getValue().getSExtValue()};
      return std::nullopt;
    }
    if (n->kind == Node::Kind::Read)
      return constantRange(n);
    if (n->isOp("arith.index_cast") || n->isOp("arith.index_castui") ||
        n->isOp("arith.extsi") || n->isOp("arith.extui"))
      return linear(n->operands[0]);
    if (n->isOp("arith.addi") || n->isOp("arith.subi")) {
      std::optional<Linear> a = linear(n->operands[0]);
      std::optional<Linear> b = linear(n->operands[1]);
      if (!a || !b)
        return std::nullopt;
      int64_t sign = n->isOp("arith.addi") ? 1 : -1;
      return Linear{a->ci + sign * b->ci, a->cj + sign * b->cj,
                    a->c0 + sign * b->c0};
    }
    return std::nullopt;
  }

  /// A constant integer tensor read along i or j that holds c0 + index (the
  /// range constants TOSA frontends compare for causal masks).
  std::optional<Linear> constantRange(const Node *n) const {
    DenseIntElementsAttr dense;
    if (!matchPattern(n->value, m_Constant(&dense)))
      return std::nullopt;
    auto type = cast<ShapedType>(dense.getType());
    std::optional<unsigned> along;
    int64_t pos = -1;
    for (auto [r, e] : llvm::enumerate(n->map.getResults())) {
      if (auto c = dyn_cast<AffineConstantExpr>(e)) {
        if (c.getValue() != 0)
          return std::nullopt;
        continue;
      }
      auto d = dyn_cast<AffineDimExpr>(e);
      if (!d || along || d.getPosition() + 2 < rank)
        return std::nullopt;
      along = d.getPosition();
      pos = r;
    }
    if (!along)
      return std::nullopt;
    int64_t stride = 1;
    for (int64_t d = type.getRank() - 1; d > pos; --d)
      stride *= type.getDimSize(d);
    auto values = dense.getValues<APInt>();
    int64_t c0 = values[0].getSExtValue();
    for (int64_t p = 0; p < type.getDimSize(pos); ++p)
      if (values[p * stride].getSExtValue() != c0 + p)
        return std::nullopt;
    Linear l;
    (*along == rank - 2 ? l.ci : l.cj) = 1;
    l.c0 = c0;
    return l;
  }

  /// A bound on the allowed keys: j <= i + c (`upper`) or j >= i + c.
  struct Bound {
    bool upper;
    int64_t c;
  };
  std::optional<Bound> bound(const Node *pred, bool negate) const {
    if (!pred->isOp("arith.cmpi"))
      return std::nullopt;
    auto attr = pred->attrs.getAs<arith::CmpIPredicateAttr>("predicate");
    if (!attr)
      return std::nullopt;
    std::optional<Linear> a = linear(pred->operands[0]);
    std::optional<Linear> b = linear(pred->operands[1]);
    if (!a || !b)
      return std::nullopt;
    using P = arith::CmpIPredicate;
    P p = attr.getValue();
    if (negate)
      p = arith::invertPredicate(p);
    // Unsigned compares agree with signed ones on non-negative operands.
    bool nonNeg = a->c0 >= 0 && b->c0 >= 0 && a->ci >= 0 && a->cj >= 0 &&
                  b->ci >= 0 && b->cj >= 0;
    switch (p) {
    case P::ult: if (!nonNeg) return std::nullopt; p = P::slt; break;
    case P::ule: if (!nonNeg) return std::nullopt; p = P::sle; break;
    case P::ugt: if (!nonNeg) return std::nullopt; p = P::sgt; break;
    case P::uge: if (!nonNeg) return std::nullopt; p = P::sge; break;
    default: break;
    }
    Linear d{a->ci - b->ci, a->cj - b->cj, a->c0 - b->c0};
    if (d.ci == -1 && d.cj == 1) { // j - i + c0 (p) 0
      switch (p) {
      case P::sle: return Bound{true, -d.c0};
      case P::slt: return Bound{true, -d.c0 - 1};
      case P::sge: return Bound{false, -d.c0};
      case P::sgt: return Bound{false, -d.c0 + 1};
      default: break;
      }
    }
    if (d.ci == 1 && d.cj == -1) { // i - j + c0 (p) 0
      switch (p) {
      case P::sge: return Bound{true, d.c0};
      case P::sgt: return Bound{true, d.c0 - 1};
      case P::sle: return Bound{false, d.c0};
      case P::slt: return Bound{false, d.c0 + 1};
      default: break;
      }
    }
    return std::nullopt;
  }

  /// The `off` of an allowed-predicate equivalent to j <= i + off; a
  /// conjunction with a lower bound j >= i + l sets `window` to off - l + 1
  /// (the sliding window i + off - W < j <= i + off).
  std::optional<int64_t> causalOffset(const Node *pred, bool negate) const {
    window = 0;
    // allowed = p1 && p2, or by De Morgan !(p1 || p2) with the fill on top.
    if ((!negate && pred->isOp("arith.andi")) ||
        (negate && pred->isOp("arith.ori"))) {
      std::optional<Bound> b0 = bound(pred->operands[0], negate);
      std::optional<Bound> b1 = bound(pred->operands[1], negate);
      if (!b0 || !b1 || b0->upper == b1->upper)
        return std::nullopt;
      int64_t u = b0->upper ? b0->c : b1->c;
      int64_t l = b0->upper ? b1->c : b0->c;
      if (u - l + 1 < 1)
        return std::nullopt;
      window = u - l + 1;
      return u;
    }
    std::optional<Bound> b = bound(pred, negate);
    if (!b || !b->upper)
      return std::nullopt;
    return b->c;
  }

  /// A constant tensor read as a mask: `additive` (0 allowed, fill masked)
  /// or boolean (true allowed, unless `negate`). Returns the causal offset.
  std::optional<int64_t> constantOffset(const Node *n, bool additive,
                                        bool negate) const {
    n = stripCasts(const_cast<Node *>(n));
    if (n->kind != Node::Kind::Read || ShapedType::isDynamic(lq) ||
        ShapedType::isDynamic(lk) || lq * lk > (1 << 22))
      return std::nullopt;
    DenseElementsAttr dense;
    if (!matchPattern(n->value, m_Constant(&dense)))
      return std::nullopt;
    auto type = cast<ShapedType>(dense.getType());
    SmallVector<int64_t> strides(type.getRank(), 1);
    for (int64_t d = type.getRank() - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * type.getDimSize(d + 1);
    int64_t base = 0, si = 0, sj = 0;
    for (auto [r, e] : llvm::enumerate(n->map.getResults())) {
      if (auto c = dyn_cast<AffineConstantExpr>(e))
        base += c.getValue() * strides[r];
      else if (auto d = dyn_cast<AffineDimExpr>(e);
               d && d.getPosition() == rank - 2)
        si += strides[r];
      else if (d && d.getPosition() == rank - 1)
        sj += strides[r];
      else
        return std::nullopt;
    }
    auto values = dense.getValues<Attribute>();
    std::optional<int64_t> result;
    for (int64_t off : {int64_t(0), lk - lq}) {
      bool ok = true;
      for (int64_t i = 0; i < lq && ok; ++i) {
        for (int64_t j = 0; j < lk && ok; ++j) {
          Attribute v = values[base + i * si + j * sj];
          bool allowed;
          if (additive) {
            auto f = dyn_cast<FloatAttr>(v);
            if (!f)
              return std::nullopt;
            double x = f.getValueAsDouble();
            if (x == 0.0)
              allowed = true;
            else if (x <= -1e4)
              allowed = false;
            else
              return std::nullopt;
          } else {
            auto b = dyn_cast<IntegerAttr>(v);
            if (!b)
              return std::nullopt;
            allowed = (b.getValue().getBoolValue()) != negate;
          }
          ok = allowed == (j <= i + off);
        }
      }
      if (ok) {
        result = off;
        break;
      }
    }
    return result;
  }

  std::optional<int64_t> predicateOffset(const Node *pred, bool negate) const {
    if (std::optional<int64_t> off = causalOffset(pred, negate))
      return off;
    return constantOffset(pred, /*additive=*/false, negate);
  }

  /// An S-free additive term that is 0 where allowed and a fill elsewhere.
  std::optional<int64_t> additiveOffset(Node *term) const {
    term = stripCasts(term);
    if (term->isOp("arith.select")) {
      Node *p = term->operands[0], *a = term->operands[1],
           *b = term->operands[2];
      if (isZero(a) && isFill(b))
        return predicateOffset(p, false);
      if (isFill(a) && isZero(b))
        return predicateOffset(p, true);
      return std::nullopt;
    }
    return constantOffset(term, /*additive=*/true, false);
  }

  /// Splits `x` into the allowed-region predicate and the rest.
  std::optional<std::pair<Node *, int64_t>> extractMask(Node *x) {
    if (x->isOp("arith.select") && !dependsOnS(x->operands[0])) {
      Node *p = x->operands[0], *a = x->operands[1], *b = x->operands[2];
      if (isFill(b) && dependsOnS(a))
        if (std::optional<int64_t> off = predicateOffset(p, false))
          return std::make_pair(a, *off);
      if (isFill(a) && dependsOnS(b))
        if (std::optional<int64_t> off = predicateOffset(p, true))
          return std::make_pair(b, *off);
      return std::nullopt;
    }
    if (x->isOp("arith.addf")) {
      for (int k = 0; k < 2; ++k) {
        Node *term = x->operands[k], *other = x->operands[1 - k];
        if (dependsOnS(term) || !dependsOnS(other))
          continue;
        if (std::optional<int64_t> off = additiveOffset(term))
          if (other->type == x->type)
            return std::make_pair(other, *off);
        // -inf + finite bias stays -inf, so a mask may sit under a bias.
        if (auto inner = extractMask(other)) {
          SmallVector<Node *> ops(x->operands.begin(), x->operands.end());
          ops[1 - k] = inner->first;
          return std::make_pair(t.rebuild(x, ops), inner->second);
        }
      }
    }
    return std::nullopt;
  }

  /// Replaces S by `leaf`; splat multiplies/divides and casts directly on
  /// it fold into `scale` (only valid when S occurs once).
  Node *peel(Node *n, Node *leaf, double &scale, bool fold) {
    if (isS(n))
      return leaf;
    if (n->kind != Node::Kind::Op)
      return n;
    if (fold && (n->isOp("arith.extf") || n->isOp("arith.truncf"))) {
      double innerScale = scale;
      Node *inner = peel(n->operands[0], leaf, innerScale, fold);
      scale = innerScale;
      if (inner == leaf)
        return leaf;
      return t.rebuild(n, {inner});
    }
    if (fold && (n->isOp("arith.mulf") || n->isOp("arith.divf"))) {
      for (int k = 0; k < 2; ++k) {
        if (k == 0 && n->isOp("arith.divf"))
          continue; // c / S is not a scale
        Node *c = n->operands[k], *other = n->operands[1 - k];
        std::optional<double> v = stripCasts(c)->getFloat();
        if (!v || dependsOnS(c))
          continue;
        double innerScale = scale;
        Node *inner = peel(other, leaf, innerScale, fold);
        if (inner != leaf)
          continue;
        scale = innerScale;
        if (n->isOp("arith.mulf"))
          scale *= *v;
        else if (*v != 0.0)
          scale /= *v;
        else
          continue;
        return leaf;
      }
    }
    SmallVector<Node *> ops;
    bool changed = false;
    for (Node *o : n->operands) {
      ops.push_back(peel(o, leaf, scale, fold));
      changed |= ops.back() != o;
    }
    return changed ? t.rebuild(n, ops) : n;
  }
};

/// Nodes the region cannot express.
static const Node *firstUnsupported(const Node *n) {
  switch (n->kind) {
  case Node::Kind::Acc:
  case Node::Kind::Reduce:
    return n;
  case Node::Kind::Read:
    // Any symbol-free affine index (e.g. b floordiv H after a head split of
    // the scores) is computed in the region.
    return n->map.getNumSymbols() == 0 ? nullptr : n;
  default:
    break;
  }
  for (Node *o : n->operands)
    if (const Node *u = firstUnsupported(o))
      return u;
  return nullptr;
}
} // namespace

FailureOr<ScoreModPlan> raise::planScoreMod(ScoreTracer &t, Node *x, Node *s,
                                            int64_t lq, int64_t lk,
                                            Refusal &why,
                                            Operation *fallback) {
  Planner pl{t, s, t.rank(), lq, lk};
  pl.window = 0;
  ScoreModPlan plan;
  x = simplifyIdentities(t, x);
  if (const Node *u = firstUnsupported(x)) {
    why.at = u->origin ? u->origin : fallback;
    why.why = u->kind == Node::Kind::Reduce
                  ? "the scores go through a reduction (" + describe(u) +
                        ") before the softmax, which is not elementwise"
                  : "the scores are combined with " + describe(u) +
                        " that a score_mod cannot express";
    return failure();
  }
  if (auto m = pl.extractMask(x)) {
    int64_t off = m->second;
    MaskKind kind = pl.window ? MaskKind::SlidingWindow : MaskKind::Causal;
    if (off == 0) {
      plan.mask = MaskAttr::get(t.getContext(), kind, pl.window,
                                MaskAlignment::TopLeft);
      x = m->first;
    } else if (!ShapedType::isDynamic(lq) && !ShapedType::isDynamic(lk) &&
               off == lk - lq) {
      plan.mask = MaskAttr::get(t.getContext(), kind, pl.window,
                                MaskAlignment::BottomRight);
      x = m->first;
    }
  }
  plan.scoreLeaf = t.make(Node::Kind::Scalar, Float32Type::get(t.getContext()));
  double scale = 1.0;
  Node *rest = pl.peel(x, plan.scoreLeaf, scale, pl.countS(x) == 1);
  plan.scale = scale;
  if (stripCasts(rest) != plan.scoreLeaf)
    plan.body = rest;
  return plan;
}

LogicalResult raise::collectCaptures(RewriterBase &rewriter, Location loc,
                                     const ScoreModPlan &plan,
                                     CaptureList &captures, Refusal &why,
                                     Operation *fallback) {
  if (!plan.body)
    return success();
  forEachNode(plan.body, [&](const Node *n) {
    if ((n->kind == Node::Kind::Read || n->kind == Node::Kind::Scalar) &&
        n->value && !llvm::is_contained(captures.keys, n->value)) {
      captures.keys.push_back(n->value);
      if (n->kind == Node::Kind::Read) {
        captures.operands.push_back(n->value);
      } else {
        auto type = RankedTensorType::get({}, n->value.getType());
        captures.operands.push_back(tensor::FromElementsOp::create(
            rewriter, loc, type, ValueRange{n->value}));
      }
    }
    return true;
  });
  (void)why;
  (void)fallback;
  return success();
}

/// `v` converted to float type `to` (only float <-> float widths).
static Value castTo(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  auto ff = dyn_cast<FloatType>(from), ft = dyn_cast<FloatType>(to);
  if (!ff || !ft)
    return {};
  if (ff.getWidth() < ft.getWidth())
    return arith::ExtFOp::create(b, loc, to, v);
  if (ff.getWidth() > ft.getWidth())
    return arith::TruncFOp::create(b, loc, to, v);
  // Same width, different format (bf16 vs f16): go through f32.
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  return arith::TruncFOp::create(b, loc, to, wide);
}

LogicalResult raise::buildScoreModRegion(RewriterBase &rewriter,
                                         AttentionOp op,
                                         const ScoreModPlan &plan,
                                         const CaptureList &captures,
                                         unsigned rank) {
  OpBuilder::InsertionGuard guard(rewriter);
  Location loc = op.getLoc();
  SmallVector<Type> argTypes{rewriter.getF32Type()};
  argTypes.append(rank, rewriter.getIndexType());
  for (Value c : captures.operands)
    argTypes.push_back(c.getType());
  SmallVector<Location> locs(argTypes.size(), loc);
  Block *block =
      rewriter.createBlock(&op.getScoreMod(), {}, argTypes, locs);
  DenseMap<const Node *, Value> env;
  auto captureArg = [&](Value key) {
    auto it = llvm::find(captures.keys, key);
    return block->getArgument(1 + rank + (it - captures.keys.begin()));
  };
  std::function<Value(const Node *)> emit = [&](const Node *n) -> Value {
    if (auto it = env.find(n); it != env.end())
      return it->second;
    Value v;
    if (n == plan.scoreLeaf) {
      v = block->getArgument(0);
    } else {
      switch (n->kind) {
      case Node::Kind::Index:
        v = block->getArgument(1 + n->dim);
        break;
      case Node::Kind::Const:
        v = arith::ConstantOp::create(rewriter, loc, n->cst);
        break;
      case Node::Kind::Scalar:
        v = tensor::ExtractOp::create(rewriter, loc, captureArg(n->value),
                                      ValueRange{});
        break;
      case Node::Kind::Read: {
        SmallVector<Value> idx;
        SmallVector<Value> dims;
        for (unsigned d = 0; d < rank; ++d)
          dims.push_back(block->getArgument(1 + d));
        for (AffineExpr e : n->map.getResults()) {
          if (auto d = dyn_cast<AffineDimExpr>(e))
            idx.push_back(block->getArgument(1 + d.getPosition()));
          else if (auto c = dyn_cast<AffineConstantExpr>(e))
            idx.push_back(
                arith::ConstantIndexOp::create(rewriter, loc, c.getValue()));
          else
            idx.push_back(
                affine::expandAffineExpr(rewriter, loc, e, dims, {}));
        }
        v = tensor::ExtractOp::create(rewriter, loc, captureArg(n->value),
                                      idx);
        break;
      }
      case Node::Kind::Op: {
        SmallVector<Value> operands;
        for (auto [o, ty] : llvm::zip(n->operands, n->operandTypes)) {
          Value x = emit(o);
          if (!x)
            return {};
          x = castTo(rewriter, loc, x, ty);
          if (!x)
            return {};
          operands.push_back(x);
        }
        OperationState state(loc, *n->name);
        state.addOperands(operands);
        state.addTypes(n->type);
        state.addAttributes(n->attrs.getValue());
        v = rewriter.create(state)->getResult(0);
        break;
      }
      default:
        return {};
      }
    }
    env[n] = v;
    return v;
  };
  Value result = emit(plan.body);
  if (!result)
    return failure();
  result = castTo(rewriter, loc, result, rewriter.getF32Type());
  if (!result)
    return failure();
  flash::YieldOp::create(rewriter, loc, result);
  return success();
}
