//===- TilingInterfaceImpl.cpp - TilingInterface of flash.attention -------===//
//
// The iteration domain is (batch..., Lq, Lk, D, Dv). Only the batch dims and
// the query rows are tiled: every output row needs its whole key range (the
// softmax normalises over it) and whole head vectors, and a tile of Dv would
// recompute the log-sum-exp in every tile. A tile is again a flash.attention
// on slices of Q, K, V and the inits; where the op has a mask or score_mod
// it carries `offsets` and `query_len`, so that both still see absolute
// positions and a bottom-right mask still aligns to the whole Lq.
//
// Grouped-query heads: query head h reads key/value head h / G. A tile of
// heads [h0, h0 + t) reads K/V heads [h0 / G, (h0 + t - 1) / G]; the tile
// pairs its heads by its own shapes (local head l reads local K/V head
// l / G'), which is the same pairing exactly when the tile holds whole
// groups (G | t, G | h0: G' = G) or lies inside one group (t | G, t | h0,
// one K/V head: G' = t), or t = 1. Other head tiles are refused.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/InterfaceImpls.h"

#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"

using namespace mlir;
using namespace mlir::flash;

namespace {
/// Positions of the loops in the iteration domain.
struct Loops {
  int64_t nb;
  int64_t lq() const { return nb; }
  int64_t lk() const { return nb + 1; }
  int64_t d() const { return nb + 2; }
  int64_t dv() const { return nb + 3; }
  int64_t count() const { return nb + 4; }
};
} // namespace

static OpFoldResult addIndex(OpBuilder &b, Location loc, OpFoldResult x,
                             OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x),
                         cy = getConstantIntValue(y);
  if (cx && cy)
    return b.getIndexAttr(*cx + *cy);
  if (cx == 0)
    return y;
  if (cy == 0)
    return x;
  return arith::AddIOp::create(b, loc,
                               getValueOrCreateConstantIndexOp(b, loc, x),
                               getValueOrCreateConstantIndexOp(b, loc, y))
      .getResult();
}

static OpFoldResult divIndex(OpBuilder &b, Location loc, OpFoldResult x,
                             OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x),
                         cy = getConstantIntValue(y);
  if (cx && cy && *cy > 0)
    return b.getIndexAttr(*cx / *cy);
  if (cy == 1)
    return x;
  return arith::DivUIOp::create(b, loc,
                                getValueOrCreateConstantIndexOp(b, loc, x),
                                getValueOrCreateConstantIndexOp(b, loc, y))
      .getResult();
}

/// Whether `v` is provably a multiple of `m`: a constant, the induction
/// variable of a loop whose lower bound and step are multiples (what tiling
/// drivers pass as tile offsets), or sums, products and affine maps of such.
static bool isMultipleOf(OpFoldResult v, int64_t m) {
  if (m == 1)
    return true;
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return *c % m == 0;
  auto value = cast<Value>(v);
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto loop = dyn_cast<LoopLikeOpInterface>(arg.getOwner()->getParentOp());
    if (!loop)
      return false;
    std::optional<SmallVector<Value>> ivs = loop.getLoopInductionVars();
    std::optional<SmallVector<OpFoldResult>> lbs = loop.getLoopLowerBounds();
    std::optional<SmallVector<OpFoldResult>> steps = loop.getLoopSteps();
    if (!ivs || !lbs || !steps)
      return false;
    auto it = llvm::find(*ivs, value);
    if (it == ivs->end())
      return false;
    size_t k = it - ivs->begin();
    return isMultipleOf((*lbs)[k], m) && isMultipleOf((*steps)[k], m);
  }
  Operation *def = value.getDefiningOp();
  if (auto add = dyn_cast_if_present<arith::AddIOp>(def))
    return isMultipleOf(add.getLhs(), m) && isMultipleOf(add.getRhs(), m);
  if (auto mul = dyn_cast_if_present<arith::MulIOp>(def))
    return isMultipleOf(mul.getLhs(), m) || isMultipleOf(mul.getRhs(), m);
  if (auto apply = dyn_cast_if_present<affine::AffineApplyOp>(def)) {
    // Operands that are multiples of m may be replaced by m * x, after which
    // the expression's own structure must show the factor.
    AffineMap map = apply.getAffineMap();
    SmallVector<AffineExpr> dims, syms;
    MLIRContext *ctx = apply.getContext();
    for (unsigned k = 0; k < map.getNumDims(); ++k)
      dims.push_back(isMultipleOf(apply.getOperand(k), m)
                         ? getAffineDimExpr(k, ctx) * m
                         : getAffineDimExpr(k, ctx));
    for (unsigned k = 0; k < map.getNumSymbols(); ++k)
      syms.push_back(isMultipleOf(apply.getOperand(map.getNumDims() + k), m)
                         ? getAffineSymbolExpr(k, ctx) * m
                         : getAffineSymbolExpr(k, ctx));
    return map.getResult(0).replaceDimsAndSymbols(dims, syms).isMultipleOf(m);
  }
  return false;
}

/// Whether [offset, offset + size) is all of dim `dim` of `tensor`.
static bool isWholeDim(OpFoldResult offset, OpFoldResult size, Value tensor,
                       int64_t dim) {
  if (!isZeroInteger(offset))
    return false;
  auto type = cast<RankedTensorType>(tensor.getType());
  if (!type.isDynamicDim(dim))
    return isConstantIntValue(size, type.getDimSize(dim));
  if (auto value = dyn_cast<Value>(size))
    if (auto dimOp = value.getDefiningOp<tensor::DimOp>())
      if (dimOp.getSource() == tensor && dimOp.getConstantIndex() == dim)
        return true;
  FailureOr<bool> equal = ValueBoundsConstraintSet::areEqual(
      ValueBoundsConstraintSet::Variable(size),
      ValueBoundsConstraintSet::Variable(tensor, dim));
  return succeeded(equal) && *equal;
}

static SmallVector<OpFoldResult> ones(OpBuilder &b, size_t n) {
  return SmallVector<OpFoldResult>(n, b.getIndexAttr(1));
}

namespace {
struct AttentionTilingInterface
    : TilingInterface::ExternalModel<AttentionTilingInterface, AttentionOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    Loops loops{cast<AttentionOp>(op).getNumBatchDims()};
    SmallVector<utils::IteratorType> types(loops.count(),
                                           utils::IteratorType::parallel);
    types[loops.lk()] = utils::IteratorType::reduction;
    types[loops.d()] = utils::IteratorType::reduction;
    return types;
  }

  SmallVector<Range> getIterationDomain(Operation *op, OpBuilder &b) const {
    auto attn = cast<AttentionOp>(op);
    Location loc = op->getLoc();
    int64_t nb = attn.getNumBatchDims();
    SmallVector<OpFoldResult> q =
        tensor::getMixedSizes(b, loc, attn.getQuery());
    SmallVector<OpFoldResult> sizes(q.begin(), q.begin() + nb + 1);
    sizes.push_back(tensor::getMixedSize(b, loc, attn.getKey(), nb));
    sizes.push_back(q[nb + 1]);
    sizes.push_back(tensor::getMixedSize(b, loc, attn.getValue(), nb + 1));
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    return llvm::map_to_vector(sizes, [&](OpFoldResult s) {
      return Range{zero, s, one};
    });
  }

  FailureOr<TilingResult>
  getTiledImplementation(Operation *op, OpBuilder &b,
                         ArrayRef<OpFoldResult> offsets,
                         ArrayRef<OpFoldResult> sizes) const {
    auto attn = cast<AttentionOp>(op);
    Location loc = op->getLoc();
    Loops loops{attn.getNumBatchDims()};
    int64_t nb = loops.nb;
    if (static_cast<int64_t>(offsets.size()) != loops.count() ||
        static_cast<int64_t>(sizes.size()) != loops.count())
      return op->emitOpError("expects a tile of ")
             << loops.count() << " loops (batch..., Lq, Lk, D, Dv), got "
             << offsets.size();
    struct Whole {
      int64_t loop;
      Value tensor;
      int64_t dim;
      StringRef name;
    };
    for (Whole w : {Whole{loops.lk(), attn.getKey(), nb, "key (Lk)"},
                    Whole{loops.d(), attn.getQuery(), nb + 1, "head (D)"},
                    Whole{loops.dv(), attn.getValue(), nb + 1, "value (Dv)"}})
      if (!isWholeDim(offsets[w.loop], sizes[w.loop], w.tensor, w.dim))
        return op->emitOpError("can only be tiled along its batch dims and "
                               "query rows; the ")
               << w.name << " loop #" << w.loop
               << " must be whole (tile size 0)";

    // Batch offsets and sizes of K/V: those of Q but on the heads dim.
    SmallVector<OpFoldResult> kvOffsets(offsets.take_front(nb)),
        kvSizes(sizes.take_front(nb));
    if (nb > 0) {
      FailureOr<std::pair<OpFoldResult, OpFoldResult>> heads =
          kvHeadTile(attn, b, offsets[nb - 1], sizes[nb - 1]);
      if (failed(heads))
        return failure();
      kvOffsets[nb - 1] = heads->first;
      kvSizes[nb - 1] = heads->second;
    }

    SmallVector<Operation *> slices;
    auto slice = [&](Value source, ArrayRef<OpFoldResult> lead,
                     ArrayRef<OpFoldResult> leadSizes) -> Value {
      auto type = cast<RankedTensorType>(source.getType());
      SmallVector<OpFoldResult> offs(lead), szs(leadSizes);
      for (int64_t d = lead.size(); d < type.getRank(); ++d) {
        offs.push_back(b.getIndexAttr(0));
        szs.push_back(tensor::getMixedSize(b, loc, source, d));
      }
      auto sliceOp = tensor::ExtractSliceOp::create(b, loc, source, offs, szs,
                                                    ones(b, szs.size()));
      slices.push_back(sliceOp);
      return sliceOp.getResult();
    };
    // Q, the output and the log-sum-exp: rows of the tile; K/V: all keys.
    SmallVector<OpFoldResult> rowOffsets(offsets.take_front(nb + 1)),
        rowSizes(sizes.take_front(nb + 1));
    Value query = slice(attn.getQuery(), rowOffsets, rowSizes);
    Value key = slice(attn.getKey(), kvOffsets, kvSizes);
    Value value = slice(attn.getValue(), kvOffsets, kvSizes);
    SmallVector<Value> inits;
    for (Value init : attn.getInits())
      inits.push_back(slice(init, rowOffsets, rowSizes));

    // The tile's absolute position: the op's own offsets (it may itself be a
    // tile) plus the tile's.
    SmallVector<Value> tileOffsets;
    Value queryLen;
    if (attn.hasOffsets() || !attn.getMaskOrNone().isNone() ||
        attn.hasScoreMod() || attn.getSinks()) {
      for (int64_t d = 0; d <= nb; ++d) {
        OpFoldResult base = attn.hasOffsets()
                                ? OpFoldResult(attn.getOffsets()[d])
                                : OpFoldResult(b.getIndexAttr(0));
        tileOffsets.push_back(getValueOrCreateConstantIndexOp(
            b, loc, addIndex(b, loc, base, offsets[d])));
      }
      queryLen =
          attn.hasOffsets()
              ? attn.getQueryLen()
              : getValueOrCreateConstantIndexOp(
                    b, loc, tensor::getMixedSize(b, loc, attn.getQuery(), nb));
    }

    auto tiled =
        AttentionOp::create(b, loc, TypeRange(ValueRange(inits)), query, key,
                            value, inits, attn.getCaptures(), attn.getSinks(), tileOffsets,
                            queryLen, attn.getScaleAttr(), attn.getMaskAttr());
    tiled->setDiscardableAttrs(attn->getDiscardableAttrDictionary());
    IRMapping mapping;
    attn.getScoreMod().cloneInto(&tiled.getScoreMod(), mapping);
    return TilingResult{
        {tiled}, SmallVector<Value>(tiled->getResults()), slices};
  }

  LogicalResult
  getResultTilePosition(Operation *op, OpBuilder &b, unsigned resultNumber,
                        ArrayRef<OpFoldResult> offsets,
                        ArrayRef<OpFoldResult> sizes,
                        SmallVector<OpFoldResult> &resultOffsets,
                        SmallVector<OpFoldResult> &resultSizes) const {
    Loops loops{cast<AttentionOp>(op).getNumBatchDims()};
    resultOffsets.assign(offsets.begin(), offsets.begin() + loops.nb + 1);
    resultSizes.assign(sizes.begin(), sizes.begin() + loops.nb + 1);
    if (resultNumber == 0) {
      resultOffsets.push_back(offsets[loops.dv()]);
      resultSizes.push_back(sizes[loops.dv()]);
    }
    return success();
  }

  LogicalResult getIterationDomainTileFromResultTile(
      Operation *op, OpBuilder &b, unsigned resultNumber,
      ArrayRef<OpFoldResult> offsets, ArrayRef<OpFoldResult> sizes,
      SmallVectorImpl<OpFoldResult> &iterDomainOffsets,
      SmallVectorImpl<OpFoldResult> &iterDomainSizes) const {
    auto attn = cast<AttentionOp>(op);
    Loops loops{attn.getNumBatchDims()};
    int64_t nb = loops.nb;
    // An output tile must hold whole rows: the tile of Dv is not a loop the
    // op can be cut along.
    if (resultNumber == 0 && !isWholeDim(offsets[nb + 1], sizes[nb + 1],
                                         attn.getOutputInit(), nb + 1))
      return failure();
    SmallVector<Range> domain = getIterationDomain(op, b);
    iterDomainOffsets.assign(offsets.begin(), offsets.begin() + nb + 1);
    iterDomainSizes.assign(sizes.begin(), sizes.begin() + nb + 1);
    for (int64_t loop = loops.lk(); loop < loops.count(); ++loop) {
      iterDomainOffsets.push_back(domain[loop].offset);
      iterDomainSizes.push_back(domain[loop].size);
    }
    return success();
  }

  FailureOr<TilingResult>
  generateResultTileValue(Operation *op, OpBuilder &b, unsigned resultNumber,
                          ArrayRef<OpFoldResult> offsets,
                          ArrayRef<OpFoldResult> sizes) const {
    SmallVector<OpFoldResult> domainOffsets, domainSizes;
    if (failed(getIterationDomainTileFromResultTile(
            op, b, resultNumber, offsets, sizes, domainOffsets, domainSizes)))
      return failure();
    return getTiledImplementation(op, b, domainOffsets, domainSizes);
  }

private:
  /// The K/V heads a tile of query heads [offset, offset + size) reads, as
  /// (offset, size); fails with an error where the tile's own head pairing
  /// would differ from the op's (see the file header).
  static FailureOr<std::pair<OpFoldResult, OpFoldResult>>
  kvHeadTile(AttentionOp attn, OpBuilder &b, OpFoldResult offset,
             OpFoldResult size) {
    Location loc = attn.getLoc();
    int64_t h = attn.getNumBatchDims() - 1;
    if (isWholeDim(offset, size, attn.getQuery(), h))
      return std::make_pair(OpFoldResult(b.getIndexAttr(0)),
                            tensor::getMixedSize(b, loc, attn.getKey(), h));
    int64_t hq = attn.getQueryType().getDimSize(h);
    int64_t hkv = attn.getKeyType().getDimSize(h);
    bool staticHeads =
        !ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv);
    std::optional<int64_t> t = getConstantIntValue(size);
    if (staticHeads && hq == hkv)
      return std::make_pair(offset, size);
    if (t == 1) {
      // One query head reads one K/V head, h / G, whatever G is.
      OpFoldResult group =
          divIndex(b, loc, tensor::getMixedSize(b, loc, attn.getQuery(), h),
                   tensor::getMixedSize(b, loc, attn.getKey(), h));
      return std::make_pair(divIndex(b, loc, offset, group),
                            OpFoldResult(b.getIndexAttr(1)));
    }
    if (!staticHeads)
      return attn.emitOpError("cannot tile the heads dim (batch dim #")
             << h << ") into tiles of more than one head: with dynamic head "
             << "counts only the whole dim or single heads are known to pair "
             << "up with their key/value heads";
    if (!t)
      return attn.emitOpError("cannot tile the heads dim (batch dim #")
             << h << ") of a grouped-query attention into tiles of dynamic "
             << "size (a tile size that does not divide the " << hq
             << " query heads leaves a partial tile)";
    int64_t g = hq / hkv;
    OpFoldResult gF = b.getIndexAttr(g);
    if (*t % g == 0 && isMultipleOf(offset, g))
      return std::make_pair(divIndex(b, loc, offset, gF),
                            OpFoldResult(b.getIndexAttr(*t / g)));
    if (g % *t == 0 && isMultipleOf(offset, *t))
      return std::make_pair(divIndex(b, loc, offset, gF),
                            OpFoldResult(b.getIndexAttr(1)));
    return attn.emitOpError("cannot tile the heads dim (batch dim #")
           << h << ") with a tile of " << *t << " heads: query head i reads "
           << "key/value head i / " << g << " (" << hq << " query heads, "
           << hkv << " key/value heads), so a tile must hold whole groups "
           << "(a multiple of " << g << " heads) or lie inside one group (a "
           << "divisor of " << g << "), at an offset that is a multiple of "
           << "its size";
  }
};
} // namespace

void mlir::flash::registerTilingInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FlashDialect *) {
    AttentionOp::attachInterface<AttentionTilingInterface>(*ctx);
  });
}
