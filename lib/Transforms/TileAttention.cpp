//===- TileAttention.cpp - flash.attention as an online-softmax loop nest -===//
//
// The fused lowering every backend starts from: a parallel loop over batch
// indices and query blocks, and inside it a sequential loop over key/value
// blocks carrying the online-softmax state (running max m, running sum l,
// accumulator acc). Tiles are static-shaped tensors (block-q x block-kv), so
// no Lq x Lk value ever exists; ragged tails are handled by clamped,
// predicated reads instead of out-of-bounds ones.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "AttentionMath.h"

#include "flash/Dialect/Flash/IR/IndexMask.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHTILEATTENTIONPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;

namespace {
using utils::IteratorType;

/// The online-softmax state carried across key/value blocks.
struct OnlineState {
  Value m;   // tensor<BQ x f32>, running row max (-inf before any score)
  Value l;   // tensor<BQ x f32>, running sum of exp(s - m)
  Value acc; // tensor<BQ x Dv x f32>, running sum of exp(s - m) * v
};

/// Emits the loop nest for one flash.attention.
///
/// For a query block [i0, i0 + qlen) the key/value range that any row may
/// attend is [lo, hi) (from the mask); it is covered by up to three loops:
/// [lo, a) and [b, hi) hold the tiles that straddle a mask edge or the Lk
/// tail and are masked per element; [a, b) holds the tiles every row of the
/// block may see entirely, which skip the mask. Tiles outside [lo, hi) are
/// fully masked and never visited. A score_mod that masks by indices alone
/// (IndexMask.h) sorts every tile of those loops once more: one it masks
/// entirely is skipped, one it allows entirely runs its score_mod without
/// the mask (nothing at all when the region is only the mask).
class Tiler {
public:
  Tiler(RewriterBase &b, AttentionOp op, int64_t blockQ, int64_t blockKv)
      : b(b), op(op), loc(op.getLoc()), nb(op.getNumBatchDims()), bq(blockQ),
        bkv(blockKv), f32(b.getF32Type()), mask(op.getMaskOrNone()) {
    if (op.hasScoreMod())
      indexMask = findIndexMask(op.getScoreMod(), nb + 2);
  }

  FailureOr<SmallVector<Value>> run();

private:
  RewriterBase &b;
  AttentionOp op;
  Location loc;
  int64_t nb;
  int64_t bq, bkv;
  Type f32;
  MaskAttr mask;
  std::optional<IndexMask> indexMask;

  SmallVector<OpFoldResult> qShape, kShape, vShape;
  Value lq, lk, group;
  Value alignLq; // the Lq a bottom-right mask aligns to (a tile's query_len)
  OpFoldResult dF, dvF;

  // Per query block (valid inside the forall body).
  SmallVector<Value> qBatch, kvBatch; // batch indices of Q/out and of K/V
  SmallVector<Value> absBatch;        // qBatch as the score_mod sees it
  Value i0, qlen, qTile;

  Value cIdx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value cF32(OpBuilder &ob, Location l, float v) {
    return arith::ConstantOp::create(ob, l, ob.getF32FloatAttr(v));
  }
  static float ninf() { return -std::numeric_limits<float>::infinity(); }

  AffineMap map(int64_t numDims, ArrayRef<int64_t> dims) {
    SmallVector<AffineExpr> exprs;
    for (int64_t d : dims)
      exprs.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(numDims, 0, exprs, b.getContext());
  }

  Value empty(ArrayRef<OpFoldResult> shape, Type elem = {}) {
    return tensor::EmptyOp::create(b, loc, shape, elem ? elem : f32);
  }
  Value filled(ArrayRef<OpFoldResult> shape, float value) {
    return linalg::FillOp::create(b, loc, cF32(b, loc, value), empty(shape))
        .getResult(0);
  }

  using BodyFn = function_ref<void(OpBuilder &, Location, ValueRange)>;
  ValueRange generic(ValueRange ins, ValueRange outs, ArrayRef<AffineMap> maps,
                     ArrayRef<IteratorType> its, BodyFn body) {
    return linalg::GenericOp::create(b, loc, TypeRange(outs), ins, outs, maps,
                                     its, body)
        .getResults();
  }

  Value toF32(OpBuilder &ob, Location l, Value x) {
    return x.getType() == f32 ? x : arith::ExtFOp::create(ob, l, f32, x);
  }

  /// Reads `src[batch..., min(row, len - 1), col]` as f32, or 0 when
  /// `row >= len`: tail rows are clamped so that no read goes out of bounds.
  Value guardedLoad(OpBuilder &ob, Location l, Value src, ValueRange batch,
                    Value row, Value len, Value col) {
    Value one = arith::ConstantIndexOp::create(ob, l, 1);
    Value last = arith::SubIOp::create(ob, l, len, one);
    Value valid =
        arith::CmpIOp::create(ob, l, arith::CmpIPredicate::slt, row, len);
    Value clamped = arith::MinSIOp::create(ob, l, row, last);
    SmallVector<Value> idx(batch);
    idx.push_back(clamped);
    idx.push_back(col);
    Value x = toF32(ob, l, tensor::ExtractOp::create(ob, l, src, idx));
    return arith::SelectOp::create(ob, l, valid, x, cF32(ob, l, 0.0f));
  }

  /// The key/value tile of `src` that starts at key row j0: [BKV, width] in
  /// f32, zero past Lk, or [width, BKV] when `transposed`.
  Value kvTile(Value src, Value j0, OpFoldResult width, bool transposed) {
    OpFoldResult bkvF = b.getIndexAttr(bkv);
    SmallVector<OpFoldResult> shape{bkvF, width};
    if (transposed)
      std::swap(shape[0], shape[1]);
    return generic(
        {}, {empty(shape)}, {map(2, {0, 1})},
        {IteratorType::parallel, IteratorType::parallel},
        [&](OpBuilder &ob, Location l, ValueRange) {
          Value dim0 = linalg::IndexOp::create(ob, l, 0);
          Value dim1 = linalg::IndexOp::create(ob, l, 1);
          Value j = transposed ? dim1 : dim0, col = transposed ? dim0 : dim1;
          Value row = arith::AddIOp::create(ob, l, j0, j);
          linalg::YieldOp::create(
              ob, l, guardedLoad(ob, l, src, kvBatch, row, lk, col));
        })[0];
  }

  void emitBlock(ValueRange ivs, ValueRange sharedOuts,
                 SmallVectorImpl<Value> &newOuts,
                 SmallVectorImpl<SmallVector<OpFoldResult>> &offsets,
                 SmallVectorImpl<SmallVector<OpFoldResult>> &sizes);
  OnlineState emitKvLoop(Value lo, Value hi, OnlineState state, bool masked);
  OnlineState emitClassifiedKvStep(Value j0, OnlineState state, bool masked);
  /// `full`: the score_mod's index mask allows the whole tile.
  OnlineState emitKvStep(Value j0, OnlineState state, bool masked,
                         bool full = false);
};
} // namespace

FailureOr<SmallVector<Value>> Tiler::run() {
  qShape = tensor::getMixedSizes(b, loc, op.getQuery());
  kShape = tensor::getMixedSizes(b, loc, op.getKey());
  vShape = tensor::getMixedSizes(b, loc, op.getValue());
  lq = getValueOrCreateConstantIndexOp(b, loc, qShape[nb]);
  lk = getValueOrCreateConstantIndexOp(b, loc, kShape[nb]);
  alignLq = getAlignmentQueryLength(op, lq);
  dF = qShape[nb + 1];
  dvF = vShape[nb + 1];
  if (nb > 0) {
    // Grouped-query attention: query head h reads key/value head h / G.
    Value hq = getValueOrCreateConstantIndexOp(b, loc, qShape[nb - 1]);
    Value hkv = getValueOrCreateConstantIndexOp(b, loc, kShape[nb - 1]);
    group = arith::DivUIOp::create(b, loc, hq, hkv);
  }

  SmallVector<OpFoldResult> ubs(qShape.begin(), qShape.begin() + nb);
  Value cBq = cIdx(bq);
  ubs.push_back(arith::CeilDivUIOp::create(b, loc, lq, cBq).getResult());

  auto forall = scf::ForallOp::create(b, loc, ubs, op.getInits(),
                                      /*mapping=*/std::nullopt);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getTerminator());
    SmallVector<Value> newOuts;
    SmallVector<SmallVector<OpFoldResult>> offsets, sizes;
    emitBlock(forall.getInductionVars(), forall.getRegionIterArgs(), newOuts,
              offsets, sizes);
    b.setInsertionPointToEnd(forall.getTerminator().getBody());
    for (auto [k, dest] : llvm::enumerate(forall.getRegionIterArgs())) {
      SmallVector<OpFoldResult> strides(offsets[k].size(), b.getIndexAttr(1));
      tensor::ParallelInsertSliceOp::create(b, loc, newOuts[k], dest,
                                            offsets[k], sizes[k], strides);
    }
  }
  return SmallVector<Value>(forall.getResults());
}

void Tiler::emitBlock(ValueRange ivs, ValueRange sharedOuts,
                      SmallVectorImpl<Value> &newOuts,
                      SmallVectorImpl<SmallVector<OpFoldResult>> &offsets,
                      SmallVectorImpl<SmallVector<OpFoldResult>> &sizes) {
  qBatch.assign(ivs.begin(), ivs.begin() + nb);
  kvBatch = qBatch;
  if (nb > 0)
    kvBatch[nb - 1] = arith::DivUIOp::create(b, loc, qBatch[nb - 1], group);
  absBatch = qBatch;
  if (op.hasOffsets())
    for (auto [index, offset] : llvm::zip(absBatch, op.getBatchOffsets()))
      index = arith::AddIOp::create(b, loc, index, offset);
  Value cBq = cIdx(bq), cBkv = cIdx(bkv), zero = cIdx(0);
  i0 = arith::MulIOp::create(b, loc, ivs[nb], cBq);
  qlen = arith::MinSIOp::create(
      b, loc, cBq, arith::SubIOp::create(b, loc, lq, i0).getResult());

  // Q tile [BQ, D] in f32 with the scale folded in, zero past Lq.
  float scale = op.getScale().convertToFloat();
  OpFoldResult bqF = b.getIndexAttr(bq);
  qTile = generic(
      {}, {empty({bqF, dF})}, {map(2, {0, 1})},
      {IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &ob, Location l, ValueRange) {
        Value i = linalg::IndexOp::create(ob, l, 0);
        Value d = linalg::IndexOp::create(ob, l, 1);
        Value row = arith::AddIOp::create(ob, l, i0, i);
        Value x = guardedLoad(ob, l, op.getQuery(), qBatch, row, lq, d);
        Value s = arith::MulFOp::create(ob, l, x, cF32(ob, l, scale));
        linalg::YieldOp::create(ob, l, s);
      })[0];

  // A sink is a key of value zero seen before all others: the recurrence
  // starts from its (m, l) = (sink, 1) instead of (-inf, 0), so nothing
  // downstream knows about it and a fully masked row ends at 0, lse = sink.
  OnlineState state{filled({bqF}, ninf()), filled({bqF}, 0.0f),
                    filled({bqF, dvF}, 0.0f)};
  if (Value sinks = op.getSinks()) {
    Value sink = buildSinkLogit(b, loc, sinks, absBatch);
    state.m = linalg::FillOp::create(b, loc, sink, empty({bqF})).getResult(0);
    state.l = filled({bqF}, 1.0f);
  }

  // Key range [lo, hi) some row of the block may attend, and the edges of
  // the tiles all rows see whole: the block's first row bounds the window's
  // start and the whole tiles' end, its last row the reverse. For a tile,
  // i is the op's own row, so the diagonal's offset includes the row offset.
  Value lo = zero, hi = lk, fullLo = zero, fullHi = lk;
  if (!mask.isNone()) {
    Value off = buildDiagonalOffset(b, loc, mask, alignLq, lk);
    if (Value rowOffset = op.getRowOffset())
      off = off ? arith::AddIOp::create(b, loc, off, rowOffset).getResult()
                : rowOffset;
    auto clampToLk = [&](Value v) -> Value {
      return arith::MinSIOp::create(
          b, loc, arith::MaxSIOp::create(b, loc, v, zero).getResult(), lk);
    };
    auto after = [&](Value v) -> Value {
      return arith::AddIOp::create(b, loc, v, cIdx(1));
    };
    Value lastRow = arith::SubIOp::create(
        b, loc, arith::AddIOp::create(b, loc, i0, qlen).getResult(), cIdx(1));
    IndexInterval first = buildVisibleKeys(b, loc, mask, i0, off);
    IndexInterval last = buildVisibleKeys(b, loc, mask, lastRow, off);
    hi = clampToLk(after(last.hi));
    fullHi = clampToLk(after(first.hi));
    if (first.lo) {
      lo = clampToLk(first.lo);
      fullLo = clampToLk(last.lo);
    }
  }
  // a = first tile start >= fullLo; b = end of the last whole tile < fullHi.
  Value a = lo;
  if (mask.getKind() == MaskKind::SlidingWindow) {
    Value gap = arith::MaxSIOp::create(
        b, loc, arith::SubIOp::create(b, loc, fullLo, lo).getResult(), zero);
    Value tiles = arith::CeilDivSIOp::create(b, loc, gap, cBkv);
    a = arith::AddIOp::create(
        b, loc, lo, arith::MulIOp::create(b, loc, tiles, cBkv).getResult());
    a = arith::MinSIOp::create(b, loc, a, hi);
    state = emitKvLoop(lo, a, state, /*masked=*/true);
  }
  Value room = arith::MaxSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, fullHi, a).getResult(), zero);
  Value whole = arith::DivSIOp::create(b, loc, room, cBkv);
  Value bEnd = arith::AddIOp::create(
      b, loc, a, arith::MulIOp::create(b, loc, whole, cBkv).getResult());
  bEnd = arith::MinSIOp::create(b, loc, bEnd, hi);
  state = emitKvLoop(a, bEnd, state, /*masked=*/false);
  state = emitKvLoop(bEnd, hi, state, /*masked=*/true);

  // Epilogue on the valid rows only: out = acc / l, lse = m + log l; a row
  // that saw no finite score (l == 0, m == -inf) gives 0 and -inf.
  OpFoldResult qlenF = qlen, one = b.getIndexAttr(1), zeroF = b.getIndexAttr(0);
  SmallVector<OpFoldResult> outOffsets(qBatch.begin(), qBatch.end());
  outOffsets.push_back(i0);
  SmallVector<OpFoldResult> rowSizes(nb, one);
  rowSizes.push_back(qlenF);
  SmallVector<OpFoldResult> outSizes(rowSizes);
  outSizes.push_back(dvF);
  outOffsets.push_back(zeroF);

  auto sliceRows = [&](Value t, ArrayRef<OpFoldResult> tail) {
    SmallVector<OpFoldResult> offs(1 + tail.size(), zeroF);
    SmallVector<OpFoldResult> szs{qlenF};
    szs.append(tail.begin(), tail.end());
    SmallVector<OpFoldResult> strides(szs.size(), one);
    return tensor::ExtractSliceOp::create(b, loc, t, offs, szs, strides)
        .getResult();
  };
  Value accRows = sliceRows(state.acc, {dvF});
  Value lRows = sliceRows(state.l, {});
  Value mRows = sliceRows(state.m, {});

  auto outType = cast<RankedTensorType>(sharedOuts[0].getType());
  SmallVector<OpFoldResult> strides(outSizes.size(), one);
  auto outSliceType = tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
      2, outType, outSizes);
  Value outSlice = tensor::ExtractSliceOp::create(
      b, loc, outSliceType, sharedOuts[0], outOffsets, outSizes, strides);
  Type outElem = outType.getElementType();
  Value out = generic(
      {accRows, lRows}, {outSlice},
      {map(2, {0, 1}), map(2, {0}), map(2, {0, 1})},
      {IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        linalg::YieldOp::create(
            ob, l, buildNormalize(ob, l, args[0], args[1], outElem));
      })[0];
  newOuts.push_back(out);
  offsets.push_back(outOffsets);
  sizes.push_back(outSizes);

  if (op.hasLse()) {
    auto lseType = cast<RankedTensorType>(sharedOuts[1].getType());
    SmallVector<OpFoldResult> lseOffsets(outOffsets.begin(),
                                         outOffsets.end() - 1);
    SmallVector<OpFoldResult> lseStrides(rowSizes.size(), one);
    auto lseSliceType =
        tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
            1, lseType, rowSizes);
    Value lseSlice = tensor::ExtractSliceOp::create(
        b, loc, lseSliceType, sharedOuts[1], lseOffsets, rowSizes, lseStrides);
    Value lse = generic(
        {mRows, lRows}, {lseSlice}, {map(1, {0}), map(1, {0}), map(1, {0})},
        {IteratorType::parallel},
        [&](OpBuilder &ob, Location l, ValueRange args) {
          linalg::YieldOp::create(ob, l,
                                  buildLogSumExp(ob, l, args[0], args[1]));
        })[0];
    newOuts.push_back(lse);
    offsets.push_back(lseOffsets);
    sizes.push_back(rowSizes);
  }
}

OnlineState Tiler::emitKvLoop(Value lo, Value hi, OnlineState state,
                              bool masked) {
  auto loop = scf::ForOp::create(
      b, loc, lo, hi, cIdx(bkv), ValueRange{state.m, state.l, state.acc},
      [&](OpBuilder &, Location, Value j0, ValueRange iter) {
        OnlineState next =
            emitClassifiedKvStep(j0, {iter[0], iter[1], iter[2]}, masked);
        scf::YieldOp::create(b, loc,
                             ValueRange{next.m, next.l, next.acc});
      });
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2)};
}

OnlineState Tiler::emitClassifiedKvStep(Value j0, OnlineState state,
                                        bool masked) {
  if (!indexMask)
    return emitKvStep(j0, state, masked);
  // The tile as the score_mod sees it: rows [i0, i0 + qlen) of the op
  // (shifted by a tile's row offset) and the keys of [j0, j0 + bkv) inside
  // Lk; padding rows and columns are clamped into these ranges.
  Value one = cIdx(1);
  Value iLo = i0;
  if (Value rowOffset = op.getRowOffset())
    iLo = arith::AddIOp::create(b, loc, iLo, rowOffset);
  Value iHi = arith::SubIOp::create(
      b, loc, arith::AddIOp::create(b, loc, iLo, qlen).getResult(), one);
  Value jEnd = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, j0, cIdx(bkv)).getResult(), lk);
  Value jHi = arith::SubIOp::create(b, loc, jEnd, one);
  TileClass cls = emitTileClass(b, loc, op.getScoreMod(), *indexMask,
                                absBatch, absBatch, iLo, iHi, j0, jHi);
  SmallVector<Value> carried{state.m, state.l, state.acc};
  TypeRange types = ValueRange(carried).getTypes();
  auto yieldState = [&](OnlineState st) {
    scf::YieldOp::create(b, loc, ValueRange{st.m, st.l, st.acc});
  };
  auto nonEmpty = scf::IfOp::create(
      b, loc, types,
      arith::XOrIOp::create(
          b, loc, cls.empty,
          arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1))
          .getResult(),
      /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(nonEmpty.elseBlock());
    yieldState(state); // a tile the mask hides entirely changes nothing
    b.setInsertionPointToStart(nonEmpty.thenBlock());
    auto isFull =
        scf::IfOp::create(b, loc, types, cls.full, /*withElseRegion=*/true);
    yieldState({isFull.getResult(0), isFull.getResult(1), isFull.getResult(2)});
    b.setInsertionPointToStart(isFull.thenBlock());
    yieldState(emitKvStep(j0, state, masked, /*full=*/true));
    b.setInsertionPointToStart(isFull.elseBlock());
    yieldState(emitKvStep(j0, state, masked));
  }
  return {nonEmpty.getResult(0), nonEmpty.getResult(1), nonEmpty.getResult(2)};
}

OnlineState Tiler::emitKvStep(Value j0, OnlineState state, bool masked,
                              bool full) {
  OpFoldResult bqF = b.getIndexAttr(bq), bkvF = b.getIndexAttr(bkv);
  const IteratorType par = IteratorType::parallel,
                     red = IteratorType::reduction;

  // Kᵀ is transposed here once per tile so that the score loop runs
  // contiguously along the key axis.
  Value kT = kvTile(op.getKey(), j0, dF, /*transposed=*/true);
  Value vTile = kvTile(op.getValue(), j0, dvF, /*transposed=*/false);

  // S[i, j] = sum_d Q[i, d] Kᵀ[d, j]; loops (i, d, j), key axis innermost.
  Value s = generic(
      {qTile, kT}, {filled({bqF, bkvF}, 0.0f)},
      {map(3, {0, 1}), map(3, {1, 2}), map(3, {0, 2})}, {par, red, par},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        Value p = arith::MulFOp::create(ob, l, args[0], args[1]);
        linalg::YieldOp::create(
            ob, l, arith::AddFOp::create(ob, l, args[2], p).getResult());
      })[0];

  // score_mod with the element's true indices (clamped on padding rows and
  // columns so captures are never read out of bounds), then the mask.
  bool scoreMod = op.hasScoreMod() &&
                  !(full && indexMask->liveIsScore(op.getScoreMod()));
  if (scoreMod || masked) {
    s = generic(
        {}, {s}, {map(2, {0, 1})}, {par, par},
        [&](OpBuilder &ob, Location l, ValueRange args) {
          Value x = args[0];
          Value i = arith::AddIOp::create(
              ob, l, i0, linalg::IndexOp::create(ob, l, 0).getResult());
          Value j = arith::AddIOp::create(
              ob, l, j0, linalg::IndexOp::create(ob, l, 1).getResult());
          // A tile's mask and score_mod see the rows of the op it was cut
          // from; padding rows are clamped to the tile's own last row first.
          Value rowOffset = op.getRowOffset();
          if (scoreMod) {
            Value one = arith::ConstantIndexOp::create(ob, l, 1);
            Value ic = arith::MinSIOp::create(
                ob, l, i, arith::SubIOp::create(ob, l, lq, one).getResult());
            Value jc = arith::MinSIOp::create(
                ob, l, j, arith::SubIOp::create(ob, l, lk, one).getResult());
            if (rowOffset)
              ic = arith::AddIOp::create(ob, l, ic, rowOffset);
            x = full ? buildScoreModLive(ob, op.getScoreMod(), *indexMask, x,
                                         absBatch, ic, jc, op.getCaptures())
                     : buildScoreMod(ob, op, x, absBatch, ic, jc);
          }
          if (masked) {
            Value allowed = arith::CmpIOp::create(
                ob, l, arith::CmpIPredicate::slt, j, lk);
            Value iAbs =
                rowOffset
                    ? arith::AddIOp::create(ob, l, i, rowOffset).getResult()
                    : i;
            if (Value m = buildMaskPredicate(ob, l, mask, iAbs, j, alignLq, lk))
              allowed = arith::AndIOp::create(ob, l, allowed, m);
            x = arith::SelectOp::create(ob, l, allowed, x,
                                        cF32(ob, l, ninf()));
          }
          linalg::YieldOp::create(ob, l, x);
        })[0];
  }

  // m' = max(m, rowmax s); alpha = exp(m - m') rescales the old state. A row
  // with m' = -inf has seen nothing finite: alpha = 1 and p = 0 keep it at
  // l = 0, acc = 0 instead of exp(-inf - -inf) = NaN.
  Value blockMax = generic(
      {s}, {filled({bqF}, ninf())}, {map(2, {0, 1}), map(2, {0})}, {par, red},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        linalg::YieldOp::create(
            ob, l,
            arith::MaximumFOp::create(ob, l, args[0], args[1]).getResult());
      })[0];
  // m is updated in place (it is an init here) so that the loop-carried
  // buffer stays the same across iterations.
  ValueRange mAlpha = generic(
      {blockMax}, {state.m, empty({bqF})},
      {map(1, {0}), map(1, {0}), map(1, {0})}, {par},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        Value mOld = args[1];
        Value mNew = arith::MaximumFOp::create(ob, l, mOld, args[0]);
        Value dead = arith::CmpFOp::create(ob, l, arith::CmpFPredicate::OEQ,
                                           mNew, cF32(ob, l, ninf()));
        Value e = math::ExpOp::create(
            ob, l, arith::SubFOp::create(ob, l, mOld, mNew).getResult());
        Value alpha = arith::SelectOp::create(ob, l, dead, cF32(ob, l, 1.0f), e);
        linalg::YieldOp::create(ob, l, ValueRange{mNew, alpha});
      });
  Value mNew = mAlpha[0], alpha = mAlpha[1];

  // p = exp(s - m'), in place of s.
  Value p = generic(
      {mNew}, {s}, {map(2, {0}), map(2, {0, 1})}, {par, par},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        linalg::YieldOp::create(ob, l, buildRowExp(ob, l, args[1], args[0]));
      })[0];

  // l' = alpha l + rowsum p.
  Value lNew = generic(
      {alpha}, {state.l}, {map(1, {0}), map(1, {0})}, {par},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        linalg::YieldOp::create(
            ob, l, arith::MulFOp::create(ob, l, args[0], args[1]).getResult());
      })[0];
  lNew = generic(
      {p}, {lNew}, {map(2, {0, 1}), map(2, {0})}, {par, red},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        linalg::YieldOp::create(
            ob, l, arith::AddFOp::create(ob, l, args[0], args[1]).getResult());
      })[0];

  // acc' = alpha acc + p V; loops (i, j, e), value axis innermost.
  Value accNew = generic(
      {alpha}, {state.acc}, {map(2, {0}), map(2, {0, 1})}, {par, par},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        linalg::YieldOp::create(
            ob, l, arith::MulFOp::create(ob, l, args[0], args[1]).getResult());
      })[0];
  accNew = generic(
      {p, vTile}, {accNew}, {map(3, {0, 1}), map(3, {1, 2}), map(3, {0, 2})},
      {par, red, par},
      [&](OpBuilder &ob, Location l, ValueRange args) {
        Value prod = arith::MulFOp::create(ob, l, args[0], args[1]);
        linalg::YieldOp::create(
            ob, l, arith::AddFOp::create(ob, l, args[2], prod).getResult());
      })[0];

  return {mNew, lNew, accNew};
}

FailureOr<SmallVector<Value>>
mlir::flash::tileAttention(RewriterBase &rewriter, AttentionOp op,
                           int64_t blockQ, int64_t blockKv) {
  if (blockQ <= 0 || blockKv <= 0)
    return rewriter.notifyMatchFailure(op, "block sizes must be positive");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  return Tiler(rewriter, op, blockQ, blockKv).run();
}

namespace {
struct FlashTileAttentionPass
    : flash::impl::FlashTileAttentionPassBase<FlashTileAttentionPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation()->walk([&](AttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (AttentionOp op : ops) {
      if (blockQ <= 0 || blockKv <= 0) {
        op.emitOpError("cannot be tiled: block-q and block-kv must be "
                       "positive, got ")
            << static_cast<int64_t>(blockQ) << " and "
            << static_cast<int64_t>(blockKv);
        return signalPassFailure();
      }
      FailureOr<SmallVector<Value>> results =
          tileAttention(rewriter, op, blockQ, blockKv);
      if (failed(results))
        return signalPassFailure();
      rewriter.replaceOp(op, *results);
    }
    SmallVector<AttentionGradOp> grads;
    getOperation()->walk([&](AttentionGradOp op) {
      if (canTileAttentionGrad(op))
        grads.push_back(op);
    });
    for (AttentionGradOp op : grads) {
      FailureOr<SmallVector<Value>> results =
          tileAttentionGrad(rewriter, op, blockQ, blockKv);
      if (failed(results))
        return signalPassFailure();
      rewriter.replaceOp(op, *results);
    }
  }
};
} // namespace
