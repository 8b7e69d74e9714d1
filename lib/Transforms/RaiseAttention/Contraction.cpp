//===- Contraction.cpp - the two matmuls: classification and operands -----===//
#include "RaiseAttentionImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

/// The block argument `v` is, looking through extf/extsi.
static BlockArgument throughExt(Value v) {
  if (Operation *def = v.getDefiningOp())
    if (isa<arith::ExtFOp, arith::ExtSIOp, arith::ExtUIOp>(def))
      v = def->getOperand(0);
  return dyn_cast<BlockArgument>(v);
}

bool raise::isContraction(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0 || !op.hasPureTensorSemantics())
    return false;
  if (failed(linalg::inferContractionDims(op)))
    return false;
  Block *body = op.getBlock();
  Value y = body->getTerminator()->getOperand(0);
  Operation *add = y.getDefiningOp();
  if (!add || !isa<arith::AddFOp, arith::AddIOp>(add))
    return false;
  BlockArgument acc = body->getArgument(2);
  Value prod;
  if (add->getOperand(0) == acc)
    prod = add->getOperand(1);
  else if (add->getOperand(1) == acc)
    prod = add->getOperand(0);
  else
    return false;
  Operation *mul = prod.getDefiningOp();
  if (!mul || !isa<arith::MulFOp, arith::MulIOp>(mul))
    return false;
  BlockArgument a = throughExt(mul->getOperand(0));
  BlockArgument b = throughExt(mul->getOperand(1));
  return a && b && a.getOwner() == body && b.getOwner() == body &&
         a.getArgNumber() < 2 && b.getArgNumber() < 2 &&
         a.getArgNumber() != b.getArgNumber();
}

bool raise::isMatmul(linalg::LinalgOp op) {
  if (!isContraction(op))
    return false;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  return succeeded(dims) && !dims->m.empty() && !dims->n.empty();
}

static bool isZeroScalar(Value v) {
  return matchPattern(v, m_AnyZeroFloat()) || matchPattern(v, m_Zero());
}

bool raise::hasZeroInit(linalg::LinalgOp op) {
  Value init = op.getDpsInits()[0];
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    return isZeroScalar(fill.getInputs()[0]);
  DenseElementsAttr dense;
  if (matchPattern(init, m_Constant(&dense)) && dense.isSplat()) {
    if (auto f = dyn_cast<FloatAttr>(dense.getSplatValue<Attribute>()))
      return f.getValue().isZero();
  }
  return false;
}

/// The splat float constant `v` holds, looking at scalar constants and splat
/// tensor constants.
static std::optional<double> splatValue(Value v) {
  FloatAttr f;
  if (matchPattern(v, m_Constant(&f)))
    return f.getValueAsDouble();
  DenseElementsAttr dense;
  if (matchPattern(v, m_Constant(&dense)) && dense.isSplat())
    if (auto fa = dyn_cast<FloatAttr>(dense.getSplatValue<Attribute>()))
      return fa.getValueAsDouble();
  return std::nullopt;
}

/// An elementwise op `out = in * c` or `in / c` with splat c: returns `in`
/// and multiplies `*scale` by the factor.
static Value peelSplatScale(linalg::LinalgOp op, double *scale) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return {};
  Block *body = op.getBlock();
  Operation *arith = body->getTerminator()->getOperand(0).getDefiningOp();
  if (!arith || !isa<arith::MulFOp, arith::DivFOp>(arith) ||
      arith->getBlock() != body)
    return {};
  // Each side is either the one tensor input (identity map) or a splat.
  auto sideValue = [&](Value s) -> std::optional<double> {
    if (auto arg = dyn_cast<BlockArgument>(s)) {
      if (arg.getOwner() != body || arg.getArgNumber() >= op.getNumDpsInputs())
        return std::nullopt;
      return splatValue(op.getDpsInputs()[arg.getArgNumber()]);
    }
    return splatValue(s);
  };
  auto tensorInput = [&](Value s) -> Value {
    auto arg = dyn_cast<BlockArgument>(s);
    if (!arg || arg.getOwner() != body ||
        arg.getArgNumber() >= op.getNumDpsInputs())
      return {};
    OpOperand *in = op.getDpsInputOperand(arg.getArgNumber());
    if (!op.getMatchingIndexingMap(in).isIdentity() ||
        in->get().getType() != op->getResult(0).getType())
      return {};
    return in->get();
  };
  Value lhs = arith->getOperand(0), rhs = arith->getOperand(1);
  if (isa<arith::MulFOp>(arith)) {
    if (Value in = tensorInput(lhs))
      if (std::optional<double> c = sideValue(rhs)) {
        *scale *= *c;
        return in;
      }
    if (Value in = tensorInput(rhs))
      if (std::optional<double> c = sideValue(lhs)) {
        *scale *= *c;
        return in;
      }
    return {};
  }
  if (Value in = tensorInput(lhs))
    if (std::optional<double> c = sideValue(rhs); c && *c != 0.0) {
      *scale /= *c;
      return in;
    }
  return {};
}

/// An elementwise widening `extf` to f32 with identity maps: flash.attention
/// widens its operands to f32 itself, exactly, so the narrow input serves.
static Value peelWidening(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block *body = op.getBlock();
  auto ext = body->getTerminator()->getOperand(0).getDefiningOp<arith::ExtFOp>();
  if (!ext || ext.getIn() != body->getArgument(0) || !ext.getType().isF32())
    return {};
  return op.getDpsInputs()[0];
}

/// A yield-only generic with permutation maps: result dim k is input dim
/// src[k].
static std::optional<SmallVector<int64_t>> permutationOf(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      !g.hasPureTensorSemantics() ||
      g.getNumParallelLoops() != g.getNumLoops())
    return std::nullopt;
  Block *body = g.getBlock();
  if (body->getTerminator()->getOperand(0) != body->getArgument(0))
    return std::nullopt;
  AffineMap in = g.getIndexingMapsArray()[0];
  AffineMap out = g.getIndexingMapsArray()[1];
  if (!in.isPermutation() || !out.isPermutation())
    return std::nullopt;
  SmallVector<int64_t> src;
  for (unsigned k = 0; k < out.getNumResults(); ++k) {
    unsigned loop = out.getDimPosition(k);
    std::optional<unsigned> r = in.getResultPosition(
        getAffineDimExpr(loop, g.getContext()));
    if (!r)
      return std::nullopt;
    src.push_back(*r);
  }
  return src;
}

OperandView raise::lookThroughOperand(Value v, ArrayRef<int64_t> perm,
                                      double *scale,
                                      llvm::SetVector<Operation *> &seen) {
  OperandView view{v, SmallVector<int64_t>(perm)};
  while (Operation *def = view.value.getDefiningOp()) {
    if (auto t = dyn_cast<linalg::TransposeOp>(def)) {
      ArrayRef<int64_t> p = t.getPermutation();
      for (int64_t &d : view.perm)
        d = p[d];
      view.value = t.getInput();
    } else if (auto g = dyn_cast<linalg::GenericOp>(def);
               g && permutationOf(g)) {
      SmallVector<int64_t> src = *permutationOf(g);
      for (int64_t &d : view.perm)
        d = src[d];
      view.value = g.getDpsInputs()[0];
    } else if (auto l = dyn_cast<linalg::LinalgOp>(def); l && peelWidening(l)) {
      view.value = peelWidening(l);
    } else if (auto l = dyn_cast<linalg::LinalgOp>(def); l && scale) {
      double s = *scale;
      Value in = peelSplatScale(l, &s);
      if (!in)
        break;
      *scale = s;
      view.value = in;
    } else {
      break;
    }
    seen.insert(def);
  }
  return view;
}

Value raise::materializeOperand(RewriterBase &rewriter, Location loc,
                                const OperandView &view) {
  bool identity = true;
  for (auto [k, d] : llvm::enumerate(view.perm))
    identity &= static_cast<int64_t>(k) == d;
  if (identity)
    return view.value;
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(rewriter, loc, view.value);
  SmallVector<OpFoldResult> tsizes;
  for (int64_t d : view.perm)
    tsizes.push_back(sizes[d]);
  Value empty = tensor::EmptyOp::create(
      rewriter, loc, tsizes, getElementTypeOrSelf(view.value.getType()));
  return linalg::TransposeOp::create(rewriter, loc, view.value, empty,
                                     view.perm)
      ->getResult(0);
}

/// The input of a broadcast op that copies (or adds zero to) one tensor
/// along loop `dim`; the input is indexed by the identity minus `dim`, or
/// with a constant 0 at `dim` (keepdim form).
static Value broadcastSource(Operation *def, int64_t dim, bool &keepdim) {
  if (auto b = dyn_cast_or_null<linalg::BroadcastOp>(def)) {
    if (b.getDimensions().size() == 1 && b.getDimensions()[0] == dim) {
      keepdim = false;
      return b.getInput();
    }
    return {};
  }
  auto g = dyn_cast_or_null<linalg::GenericOp>(def);
  if (!g || !g.hasPureTensorSemantics() || g.getNumDpsInits() != 1 ||
      g.getNumParallelLoops() != g.getNumLoops() ||
      !g.getIndexingMapsArray().back().isIdentity())
    return {};
  Block *body = g.getBlock();
  Value y = body->getTerminator()->getOperand(0);
  Value src;
  if (auto arg = dyn_cast<BlockArgument>(y)) {
    src = arg;
  } else if (auto add = y.getDefiningOp<arith::AddFOp>()) {
    // The TOSA repeat: broadcast by adding a zero tensor.
    for (int k = 0; k < 2; ++k) {
      auto arg = dyn_cast<BlockArgument>(add.getOperand(1 - k));
      if (!arg || arg.getOwner() != body ||
          arg.getArgNumber() >= g.getNumDpsInputs())
        continue;
      std::optional<double> c = splatValue(g.getDpsInputs()[arg.getArgNumber()]);
      if (c && *c == 0.0)
        src = add.getOperand(k);
    }
  }
  auto arg = dyn_cast_or_null<BlockArgument>(src);
  if (!arg || arg.getOwner() != body ||
      arg.getArgNumber() >= g.getNumDpsInputs())
    return {};
  AffineMap m = g.getIndexingMapsArray()[arg.getArgNumber()];
  unsigned n = g.getNumLoops();
  MLIRContext *ctx = g.getContext();
  SmallVector<AffineExpr> dropped, zeroed;
  for (unsigned l = 0; l < n; ++l) {
    if (static_cast<int64_t>(l) != dim)
      dropped.push_back(getAffineDimExpr(l, ctx));
    zeroed.push_back(static_cast<int64_t>(l) == dim
                         ? getAffineConstantExpr(0, ctx)
                         : getAffineDimExpr(l, ctx));
  }
  if (m == AffineMap::get(n, 0, dropped, ctx)) {
    keepdim = false;
    return g.getDpsInputs()[arg.getArgNumber()];
  }
  if (m == AffineMap::get(n, 0, zeroed, ctx)) {
    keepdim = true;
    return g.getDpsInputs()[arg.getArgNumber()];
  }
  return {};
}

/// `collapse_shape(src, re)`, or the tensor an `expand_shape` with the same
/// reassociation made `src` from: the pair cancels, and reusing the original
/// keeps K/V a view of the caller's tensor.
static Value collapseOrReuse(RewriterBase &rewriter, Location loc, Value src,
                             ArrayRef<ReassociationIndices> re,
                             SmallVectorImpl<Operation *> &created) {
  if (auto exp = src.getDefiningOp<tensor::ExpandShapeOp>())
    if (exp.getReassociationIndices() == re)
      return exp.getSrc();
  auto op = tensor::CollapseShapeOp::create(rewriter, loc, src, re);
  created.push_back(op);
  return op.getResult();
}

/// `x[.., h, ..] == base[.., h / G, ..]` along dim `dim`: returns base (same
/// rank as x) and G. Looks through collapse_shape groups (the repeat must sit
/// in the group's innermost dim, which is what makes the linear head index
/// divide by G), transposes, and ends at a broadcast of dim `dim`.
static std::optional<std::pair<Value, int64_t>>
peelGroup(RewriterBase &rewriter, Location loc, Value x, int64_t dim,
          SmallVectorImpl<Operation *> &created) {
  auto type = cast<RankedTensorType>(x.getType());
  Operation *def = x.getDefiningOp();
  bool keepdim = false;
  if (Value src = broadcastSource(def, dim, keepdim)) {
    int64_t group = type.getDimSize(dim);
    if (ShapedType::isDynamic(group))
      return std::nullopt;
    if (keepdim)
      return std::make_pair(src, group);
    // Give the source back its unit dim so base keeps x's rank; the unit
    // dim joins the group of its left neighbour (or the right one at 0).
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = 1;
    int64_t rank = type.getRank();
    SmallVector<ReassociationIndices> re;
    for (int64_t s = 0; s + 1 < rank; ++s) {
      ReassociationIndices g{s < dim ? s : s + 1};
      if (dim > 0 && s == dim - 1)
        g.push_back(dim);
      if (dim == 0 && s == 0)
        g = {0, 1};
      re.push_back(g);
    }
    if (llvm::any_of(shape, ShapedType::isDynamic))
      return std::nullopt;
    auto exp = tensor::ExpandShapeOp::create(
        rewriter, loc, RankedTensorType::get(shape, type.getElementType()),
        src, re);
    created.push_back(exp);
    return std::make_pair(exp.getResult(), group);
  }
  if (auto col = dyn_cast_or_null<tensor::CollapseShapeOp>(def)) {
    SmallVector<ReassociationIndices> re = col.getReassociationIndices();
    auto g = peelGroup(rewriter, loc, col.getSrc(), re[dim].back(), created);
    if (!g)
      return std::nullopt;
    return std::make_pair(collapseOrReuse(rewriter, loc, g->first, re, created),
                          g->second);
  }
  if (auto t = dyn_cast_or_null<linalg::TransposeOp>(def)) {
    ArrayRef<int64_t> perm = t.getPermutation();
    auto g = peelGroup(rewriter, loc, t.getInput(), perm[dim], created);
    if (!g)
      return std::nullopt;
    auto srcType = cast<RankedTensorType>(g->first.getType());
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(srcType.getDimSize(p));
    Value empty = tensor::EmptyOp::create(rewriter, loc, shape,
                                          srcType.getElementType());
    created.push_back(empty.getDefiningOp());
    auto nt = linalg::TransposeOp::create(rewriter, loc, g->first, empty, perm);
    created.push_back(nt);
    return std::make_pair(nt->getResult(0), g->second);
  }
  return std::nullopt;
}

std::optional<std::pair<Value, int64_t>>
raise::peelRepeatInterleave(RewriterBase &rewriter, Location loc, Value x,
                            int64_t headDim,
                            SmallVectorImpl<Operation *> &created) {
  return peelGroup(rewriter, loc, x, headDim, created);
}

std::optional<SmallVector<int64_t>>
raise::operandPerm(AffineMap map, ArrayRef<unsigned> loops) {
  if (map.getNumResults() != loops.size())
    return std::nullopt;
  SmallVector<int64_t> perm;
  for (unsigned l : loops) {
    std::optional<unsigned> pos =
        map.getResultPosition(getAffineDimExpr(l, map.getContext()));
    if (!pos)
      return std::nullopt;
    perm.push_back(*pos);
  }
  return perm;
}

AffineMap raise::scoreSpaceMap(linalg::LinalgOp op,
                               ArrayRef<unsigned> batchLoops, unsigned iLoop,
                               unsigned jLoop, SmallVectorImpl<int64_t> &extents) {
  MLIRContext *ctx = op.getContext();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned nb = batchLoops.size();
  SmallVector<AffineExpr> assign(op.getNumLoops(),
                                 getAffineConstantExpr(0, ctx));
  extents.clear();
  for (auto [k, loop] : llvm::enumerate(batchLoops)) {
    assign[loop] = getAffineDimExpr(k, ctx);
    extents.push_back(ranges[loop]);
  }
  assign[iLoop] = getAffineDimExpr(nb, ctx);
  assign[jLoop] = getAffineDimExpr(nb + 1, ctx);
  extents.push_back(ranges[iLoop]);
  extents.push_back(ranges[jLoop]);
  return AffineMap::get(nb + 2, 0, assign, ctx);
}

Value raise::toResultLayout(RewriterBase &rewriter, Location loc, Value v,
                            linalg::LinalgOp op, ArrayRef<unsigned> loops) {
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  SmallVector<int64_t> perm;
  bool identity = true;
  for (unsigned r = 0; r < out.getNumResults(); ++r) {
    int64_t pos = llvm::find(loops, out.getDimPosition(r)) - loops.begin();
    perm.push_back(pos);
    identity &= pos == static_cast<int64_t>(r);
  }
  if (identity)
    return v;
  return materializeOperand(rewriter, loc, OperandView{v, perm});
}

Value raise::castElements(RewriterBase &rw, Location loc, Value v, Type to) {
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
