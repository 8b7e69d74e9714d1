//===- TileProgram.cpp - what every flash.attention GPU kernel shares -----===//
//
// The block -> head mapping, the tile classification of a mask, score_mod
// inlining, the online-softmax recurrence and the row epilogue of the
// attention tile program (TileProgram.h), defined once for all strategies.
//
//===----------------------------------------------------------------------===//
#include "TileProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

Value gpu_lowering::constI32(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}
Value gpu_lowering::constI64(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, v, 64);
}
Value gpu_lowering::constIdx(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}
Value gpu_lowering::constF32(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                        APFloat(static_cast<float>(v)));
}
Value gpu_lowering::toF32(ImplicitLocOpBuilder &b, Value x) {
  if (x.getType().isF32())
    return x;
  if (x.getType().getIntOrFloatBitWidth() < 32)
    return arith::ExtFOp::create(b, b.getF32Type(), x);
  return arith::TruncFOp::create(b, b.getF32Type(), x);
}
Value gpu_lowering::fromF32(ImplicitLocOpBuilder &b, Value x, Type t) {
  if (t.isF32())
    return x;
  if (t.getIntOrFloatBitWidth() < 32)
    return arith::TruncFOp::create(b, t, x);
  return arith::ExtFOp::create(b, t, x);
}
Value gpu_lowering::toI32(ImplicitLocOpBuilder &b, Value index) {
  return arith::IndexCastOp::create(b, b.getI32Type(), index);
}
Value gpu_lowering::toI64(ImplicitLocOpBuilder &b, Value index) {
  return arith::IndexCastOp::create(b, b.getI64Type(), index);
}

static Value nvvmUnary(ImplicitLocOpBuilder &b, StringRef intrinsic, Value x) {
  return LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                       b.getStringAttr(intrinsic), ValueRange{x})
      .getResult(0);
}
Value gpu_lowering::exp2Approx(ImplicitLocOpBuilder &b, Value x) {
  return nvvmUnary(b, "llvm.nvvm.ex2.approx.ftz.f32", x);
}
Value gpu_lowering::fmaF32(ImplicitLocOpBuilder &b, Value a, Value x, Value c) {
  return LLVM::FMAOp::create(b, a, x, c);
}
Value gpu_lowering::exp2Poly(ImplicitLocOpBuilder &b, Value x) {
  // Minimax for the relative error of 2^f on [-0.5, 0.5], constant first.
  constexpr double kCoeff[] = {0.999928117, 0.693260968, 0.242610753,
                               0.0551714078};
  Type i32 = b.getI32Type();
  x = arith::MaximumFOp::create(b, x, constF32(b, -127.0));
  // x + (1.5·2^23 + 127) holds round(x) + 127 in its low mantissa bits; shifted
  // into the exponent field (the rest shifts out) that is 2^round(x), and
  // +0 at -127.
  Value shift = constF32(b, 12582912.0 + 127.0);
  Value t = arith::AddFOp::create(b, x, shift);
  Value f = arith::SubFOp::create(b, x, arith::SubFOp::create(b, t, shift));
  Value tBits = arith::BitcastOp::create(b, i32, t);
  Value by23 = arith::ConstantIntOp::create(b, i32, 23);
  Value scale = arith::BitcastOp::create(b, b.getF32Type(),
                                         arith::ShLIOp::create(b, tBits, by23));
  Value p = constF32(b, kCoeff[3]);
  for (int k = 2; k >= 0; --k)
    p = fmaF32(b, p, f, constF32(b, kCoeff[k]));
  return arith::MulFOp::create(b, p, scale);
}
Value gpu_lowering::log2Approx(ImplicitLocOpBuilder &b, Value x) {
  return nvvmUnary(b, "llvm.nvvm.lg2.approx.f", x);
}

HeadIndices gpu_lowering::headIndices(ImplicitLocOpBuilder &b, Value bh,
                                      ArrayRef<Value> batchSizes, Value hkv,
                                      bool withBatchIndices) {
  HeadIndices r;
  int64_t nb = batchSizes.size();
  if (nb == 0) {
    r.kvbh = bh;
    return r;
  }
  // Grouped-query attention: query head h of the last batch dim reads KV
  // head h / (Hq / Hkv); the outer batch dims are shared.
  Value hq = batchSizes[nb - 1];
  Value group = arith::DivUIOp::create(b, hq, hkv);
  Value outer = arith::DivUIOp::create(b, bh, hq);
  Value h = arith::RemUIOp::create(b, bh, hq);
  r.kvbh = arith::AddIOp::create(b, arith::MulIOp::create(b, outer, hkv),
                                 arith::DivUIOp::create(b, h, group));
  if (withBatchIndices)
    r.batchIdx = batchIndices(b, bh, batchSizes);
  return r;
}

SmallVector<Value> gpu_lowering::batchIndices(ImplicitLocOpBuilder &b,
                                              Value bh,
                                              ArrayRef<Value> batchSizes) {
  int64_t nb = batchSizes.size();
  SmallVector<Value> idx(nb);
  Value rest = bh;
  for (int64_t d = nb - 1; d >= 0; --d) {
    if (d == 0) {
      idx[d] = rest;
      break;
    }
    idx[d] = arith::RemUIOp::create(b, rest, batchSizes[d]);
    rest = arith::DivUIOp::create(b, rest, batchSizes[d]);
  }
  return idx;
}

Value gpu_lowering::product(ImplicitLocOpBuilder &b, ArrayRef<Value> sizes) {
  Value p = constIdx(b, 1);
  for (Value s : sizes)
    p = arith::MulIOp::create(b, p, s);
  return p;
}

Value gpu_lowering::batchHeadBlock(ImplicitLocOpBuilder &b, Value count) {
  Value idx = arith::AddIOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::y),
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::z),
                            gpu::GridDimOp::create(b, gpu::Dimension::y)));
  continueOnlyIf(b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, idx,
                                          count));
  return idx;
}

void gpu_lowering::continueOnlyIf(ImplicitLocOpBuilder &b, Value cond) {
  Block *entry = b.getInsertionBlock();
  assert(b.getInsertionPoint() == entry->end() && "not at the end of a block");
  Region *region = entry->getParent();
  Block *body = new Block(), *exit = new Block();
  region->getBlocks().insertAfter(Region::iterator(entry), body);
  region->getBlocks().insertAfter(Region::iterator(body), exit);
  cf::CondBranchOp::create(b, cond, body, ValueRange{}, exit, ValueRange{});
  b.setInsertionPointToStart(exit);
  gpu::ReturnOp::create(b);
  b.setInsertionPointToStart(body);
}

/// [lo, hi) of sequence `s` in `total` packed tokens: the offsets clamped
/// as flash.varlen_attention defines.
static std::pair<Value, Value> packedRange(ImplicitLocOpBuilder &b, Value cu,
                                           Value s, Value total) {
  auto read = [&](Value i) -> Value {
    return arith::IndexCastOp::create(b, b.getIndexType(),
                                      memref::LoadOp::create(b, cu, i));
  };
  auto clamp = [&](Value x, Value lo) -> Value {
    return arith::MinSIOp::create(b, arith::MaxSIOp::create(b, x, lo), total);
  };
  Value lo = clamp(read(s), constIdx(b, 0));
  Value hi = clamp(read(arith::AddIOp::create(b, s, constIdx(b, 1))), lo);
  return {lo, hi};
}

SequenceBlock gpu_lowering::varlenSequenceBlock(ImplicitLocOpBuilder &b,
                                                Value cuq, Value cuk, Value tq,
                                                Value tk, Value x,
                                                int64_t blockRows) {
  // Sequence s owns blocks [start_s, start_s + ceil(Lq_s / blockRows)); a
  // linear scan finds x's (every thread the same: the offsets are read
  // through the cache once per CTA).
  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  Value minus1 = constIdx(b, -1);
  Value numSeq = arith::SubIOp::create(b, memref::DimOp::create(b, cuq, 0), one);
  auto scan = scf::ForOp::create(
      b, zero, numSeq, one, ValueRange{zero, minus1, zero},
      [&](OpBuilder &nb, Location l, Value s, ValueRange it) {
        ImplicitLocOpBuilder ib(l, nb);
        auto [q0, q1] = packedRange(ib, cuq, s, tq);
        Value blocks = arith::CeilDivSIOp::create(
            ib, arith::SubIOp::create(ib, q1, q0), constIdx(ib, blockRows));
        Value end = arith::AddIOp::create(ib, it[0], blocks);
        Value here = arith::AndIOp::create(
            ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, x, it[0]),
            arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, x, end));
        scf::YieldOp::create(
            ib, ValueRange{end, arith::SelectOp::create(ib, here, s, it[1]),
                           arith::SelectOp::create(
                               ib, here, arith::SubIOp::create(ib, x, it[0]),
                               it[2])});
      });
  Value seq = scan.getResult(1);
  continueOnlyIf(b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, seq,
                                          zero));
  SequenceBlock r;
  r.block = scan.getResult(2);
  auto [q0, q1] = packedRange(b, cuq, seq, tq);
  auto [k0, k1] = packedRange(b, cuk, seq, tk);
  r.q0 = q0;
  r.lq = arith::SubIOp::create(b, q1, q0);
  r.k0 = k0;
  r.lk = arith::SubIOp::create(b, k1, k0);
  return r;
}

SmallVector<Value, 2> RowPlace::rows(ImplicitLocOpBuilder &b, Value bh,
                                     Value row) const {
  if (!offset)
    return {bh, row};
  return {arith::AddIOp::create(b, offset, row), bh};
}

SmallVector<Value, 2> RowPlace::lse(ImplicitLocOpBuilder &b, Value bh,
                                    Value row) const {
  if (!offset)
    return {bh, row};
  return {bh, arith::AddIOp::create(b, offset, row)};
}

Value gpu_lowering::maskDiagonalOffset(ImplicitLocOpBuilder &b, MaskAttr mask,
                                       Value lq, Value lk) {
  if (Value off = buildDiagonalOffset(b, b.getLoc(), mask, lq, lk))
    return off;
  return constIdx(b, 0);
}

std::pair<Value, Value>
gpu_lowering::visibleTileRange(ImplicitLocOpBuilder &b, MaskAttr mask,
                               Value q0, int64_t blockRows, Value lq, Value lk,
                               int64_t tileRows) {
  Value tile = constIdx(b, tileRows);
  Value zero = constIdx(b, 0);
  Value nT = arith::CeilDivSIOp::create(b, lk, tile);
  if (!mask || mask.isNone())
    return {zero, nT};
  Value off = buildDiagonalOffset(b, b.getLoc(), mask, lq, lk);
  // The block's last row that exists bounds the last tile, its first row
  // the first.
  Value last = arith::AddIOp::create(b, q0, constIdx(b, blockRows));
  last = arith::MinSIOp::create(b, last, lq);
  last = arith::SubIOp::create(b, last, constIdx(b, 1));
  Value hi = buildVisibleKeys(b, b.getLoc(), mask, last, off).hi;
  Value end = arith::AddIOp::create(b, arith::FloorDivSIOp::create(b, hi, tile),
                                    constIdx(b, 1));
  end = arith::MinSIOp::create(b, end, nT);
  end = arith::MaxSIOp::create(b, end, zero);
  Value begin = zero;
  if (mask.keysBehindDiagonal()) {
    Value lo = buildVisibleKeys(b, b.getLoc(), mask, q0, off).lo;
    begin = arith::FloorDivSIOp::create(b, lo, tile);
    begin = arith::MaxSIOp::create(b, begin, zero);
    begin = arith::MinSIOp::create(b, begin, end);
  }
  return {begin, end};
}

std::pair<Value, Value>
gpu_lowering::visibleQueryBlockRange(ImplicitLocOpBuilder &b, MaskAttr mask,
                                     Value k0, int64_t keys, Value lq,
                                     Value lk, int64_t blockRows) {
  Value block = constIdx(b, blockRows);
  Value zero = constIdx(b, 0);
  Value nB = arith::CeilDivSIOp::create(b, lq, block);
  if (!mask || mask.isNone())
    return {zero, nB};
  Value off = buildDiagonalOffset(b, b.getLoc(), mask, lq, lk);
  // The block's first key bounds the first query block, its last key that
  // exists the last.
  Value lo = buildVisibleQueries(b, b.getLoc(), mask, k0, off).lo;
  Value begin = arith::FloorDivSIOp::create(b, lo, block);
  begin = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, begin, zero), nB);
  Value end = nB;
  if (mask.keysBehindDiagonal()) {
    Value lastKey = arith::SubIOp::create(
        b,
        arith::MinSIOp::create(
            b, arith::AddIOp::create(b, k0, constIdx(b, keys)), lk),
        constIdx(b, 1));
    Value hi = buildVisibleQueries(b, b.getLoc(), mask, lastKey, off).hi;
    Value rows = arith::AddIOp::create(b, hi, constIdx(b, 1));
    end = arith::CeilDivSIOp::create(b, arith::MaxSIOp::create(b, rows, zero),
                                     block);
    end = arith::MaxSIOp::create(b, arith::MinSIOp::create(b, end, nB), begin);
  }
  return {begin, end};
}

Value gpu_lowering::tileNeedsElementMask(ImplicitLocOpBuilder &b, MaskAttr mask,
                                         Value colLo, int64_t tileRows,
                                         Value rowLo, Value rowHi, Value lk,
                                         Value diagOff) {
  Value colHi = arith::AddIOp::create(b, colLo, constIdx(b, tileRows - 1));
  Value need = arith::CmpIOp::create(b, arith::CmpIPredicate::sge, colHi, lk);
  if (!mask || mask.isNone())
    return need;
  // The first row's last key bounds the tile's last column, the last row's
  // first key its first.
  Value hi = buildVisibleKeys(b, b.getLoc(), mask, rowLo, diagOff).hi;
  need = arith::OrIOp::create(
      b, need, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, colHi, hi));
  if (mask.keysBehindDiagonal()) {
    Value lo = buildVisibleKeys(b, b.getLoc(), mask, rowHi, diagOff).lo;
    need = arith::OrIOp::create(
        b, need,
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, colLo, lo));
  }
  return need;
}

Value gpu_lowering::scoreAllowed(ImplicitLocOpBuilder &b, MaskAttr mask,
                                 Value row, Value col, Value lq, Value lk) {
  Value ok = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, col, lk);
  if (Value m = buildMaskPredicate(b, b.getLoc(), mask, row, col, lq, lk))
    ok = arith::AndIOp::create(b, ok, m);
  return ok;
}

/// `idx - base` clamped to [floor, 2^30], as i32: the clamp keeps it in
/// range and still decides every k of a tile.
static Value spanBound(ImplicitLocOpBuilder &b, Value idx, Value base,
                       int64_t floor) {
  Value r = arith::SubIOp::create(b, idx, base);
  r = arith::MaxSIOp::create(b, r, constIdx(b, floor));
  r = arith::MinSIOp::create(b, r, constIdx(b, int64_t(1) << 30));
  return toI32(b, r);
}

VisibleSpan gpu_lowering::rowKeys(ImplicitLocOpBuilder &b, MaskAttr mask,
                                  Value row, Value base, Value lq, Value lk) {
  // The mask's keys of the row, below Lk.
  IndexInterval keys =
      buildVisibleKeys(b, b.getLoc(), mask, row,
                       buildDiagonalOffset(b, b.getLoc(), mask, lq, lk));
  Value hi = arith::SubIOp::create(b, lk, constIdx(b, 1));
  if (keys.hi)
    hi = arith::MinSIOp::create(b, hi, keys.hi);
  VisibleSpan span;
  if (keys.lo)
    span.lo = spanBound(b, keys.lo, base, 0);
  span.hi = spanBound(b, hi, base, -1);
  return span;
}

VisibleSpan gpu_lowering::keyQueries(ImplicitLocOpBuilder &b, MaskAttr mask,
                                     Value key, Value base, Value lq,
                                     Value lk) {
  // The mask's queries of the key; a key past Lk is seen by none.
  IndexInterval rows =
      buildVisibleQueries(b, b.getLoc(), mask, key,
                          buildDiagonalOffset(b, b.getLoc(), mask, lq, lk));
  VisibleSpan span;
  if (rows.hi)
    span.hi = spanBound(b, rows.hi, base, -1);
  Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, key, lk);
  Value lo = spanBound(b, rows.lo ? rows.lo : constIdx(b, 0), base, 0);
  Value none = constI32(b, int32_t(1) << 30);
  span.lo = arith::SelectOp::create(b, inside, lo, none);
  return span;
}

Value VisibleSpan::admits(ImplicitLocOpBuilder &b, int64_t k) const {
  Value kc = constI32(b, k);
  Value ok;
  if (hi)
    ok = arith::CmpIOp::create(b, arith::CmpIPredicate::sle, kc, hi);
  if (lo) {
    Value above = arith::CmpIOp::create(b, arith::CmpIPredicate::sge, kc, lo);
    ok = ok ? arith::AndIOp::create(b, ok, above).getResult() : above;
  }
  return ok ? ok : arith::ConstantIntOp::create(b, 1, 1).getResult();
}

namespace {
/// An f32 value equal to an integer expression, and a bound on the
/// magnitude of the expression and of every partial result in it.
struct FloatOfIndex {
  Value value;
  int64_t bound;
};
} // namespace

/// `v` (an integer or index value of the inlined score_mod) evaluated in f32
/// from the row and column copies, or nothing where an operation or a
/// partial result's magnitude (2^24 or more) would make that inexact.
static std::optional<FloatOfIndex> floatOfIndex(ImplicitLocOpBuilder &b,
                                                Value v, Value row, Value col,
                                                const IndexFloats &f) {
  constexpr int64_t kExact = int64_t(1) << 24;
  if (v == row)
    return FloatOfIndex{f.row, f.bound};
  if (v == col)
    return FloatOfIndex{f.col, f.bound};
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c))) {
    if (c.getSignificantBits() > 25 || std::abs(c.getSExtValue()) >= kExact)
      return std::nullopt;
    return FloatOfIndex{constF32(b, double(c.getSExtValue())),
                        std::abs(c.getSExtValue())};
  }
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto operand = [&](unsigned i) {
    return floatOfIndex(b, op->getOperand(i), row, col, f);
  };
  if (isa<arith::IndexCastOp>(op))
    return operand(0);
  if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::MinSIOp,
           arith::MaxSIOp>(op))
    return std::nullopt;
  std::optional<FloatOfIndex> x = operand(0), y = operand(1);
  if (!x || !y)
    return std::nullopt;
  FloatOfIndex r;
  if (isa<arith::AddIOp, arith::SubIOp>(op)) {
    r.bound = x->bound + y->bound;
    r.value = isa<arith::AddIOp>(op)
                  ? arith::AddFOp::create(b, x->value, y->value).getResult()
                  : arith::SubFOp::create(b, x->value, y->value).getResult();
  } else if (isa<arith::MulIOp>(op)) {
    // Products of two indices would overflow the bound; a small multiple
    // (a constant factor) does not.
    r.bound = x->bound * y->bound;
    r.value = arith::MulFOp::create(b, x->value, y->value);
  } else {
    r.bound = std::max(x->bound, y->bound);
    r.value = isa<arith::MinSIOp>(op)
                  ? arith::MinNumFOp::create(b, x->value, y->value).getResult()
                  : arith::MaxNumFOp::create(b, x->value, y->value).getResult();
  }
  if (r.bound >= kExact)
    return std::nullopt;
  return r;
}

std::optional<int64_t> gpu_lowering::exactIndexBound(int64_t indexBound) {
  // Rows and columns are built from block bases below the lengths plus at
  // most a block's width.
  constexpr int64_t kPadding = 1024;
  if (indexBound <= 0 || indexBound + kPadding >= (int64_t(1) << 24))
    return std::nullopt;
  return indexBound + kPadding;
}

Value gpu_lowering::indexToF32(ImplicitLocOpBuilder &b, Value i) {
  Value narrow = arith::IndexCastOp::create(b, b.getI32Type(), i);
  return arith::SIToFPOp::create(b, b.getF32Type(), narrow);
}

void gpu_lowering::foldIndexConversions(ImplicitLocOpBuilder &b,
                                        Region &scoreMod, IRMapping &map,
                                        Value row, Value col,
                                        const IndexFloats &floats,
                                        function_ref<bool(Value)> skip) {
  for (Operation &op : scoreMod.front().without_terminator()) {
    auto conv = dyn_cast<arith::SIToFPOp>(&op);
    if (!conv || !conv.getType().isF32() || (skip && skip(conv.getResult())))
      continue;
    auto clone = map.lookupOrNull(conv.getResult())
                     .getDefiningOp<arith::SIToFPOp>();
    if (!clone)
      continue;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(clone);
    if (std::optional<FloatOfIndex> x =
            floatOfIndex(b, clone.getIn(), row, col, floats)) {
      clone.replaceAllUsesWith(x->value);
      clone.erase();
      map.map(conv.getResult(), x->value);
    }
  }
}

Value gpu_lowering::inlineScoreMod(ImplicitLocOpBuilder &b, Region &scoreMod,
                                   Value score, ArrayRef<Value> batchIdx,
                                   Value row, Value col,
                                   ArrayRef<Value> captures, Value yielded,
                                   const IndexFloats *floats,
                                   const IRMapping *seed,
                                   const KeyColumn *key) {
  // A capture's `tensor.extract` becomes a load from its memref (the host
  // side checked that is the only use).
  IRMapping map;
  if (seed)
    map = *seed;
  auto prefetched = [&](Value r) { return seed && seed->contains(r); };
  cloneScoreMod(
      b, b.getLoc(), scoreMod, map, score, batchIdx, row, col, ValueRange(),
      [&](OpBuilder &ob, Location, tensor::ExtractOp ex, ValueRange idx) {
        return loadCapture(ob, captures, ex, idx, key);
      });
  Block &body = scoreMod.front();
  if (floats)
    foldIndexConversions(b, scoreMod, map, row, col, *floats, prefetched);
  if (!yielded)
    return map.lookup(body.getTerminator()->getOperand(0));
  // Part of the region: what only the rest needed (a mask's predicate) is
  // dropped again, last op first.
  Value result = map.lookup(yielded);
  // A prefetched clone may serve another inlining of the same score.
  for (Operation &op : llvm::reverse(body.without_terminator()))
    for (Value r : op.getResults())
      if (Operation *clone = map.lookupOrNull(r).getDefiningOp();
          clone && !prefetched(r))
        if (clone->getResult(0) != result && isOpTriviallyDead(clone))
          clone->erase();
  return result;
}

std::optional<IndexMask> gpu_lowering::kernelIndexMask(Region *scoreMod,
                                                       int64_t numBatchDims,
                                                       bool classifiable) {
  if (!scoreMod || !classifiable)
    return std::nullopt;
  return findIndexMask(*scoreMod, numBatchDims + 2);
}

/// The classification of rows [rowLo, rowHi] x keys [colLo, colHi], both
/// clamped into [0, lq) x [0, lk) as the score_mod sees them.
static TileClass classifyRange(ImplicitLocOpBuilder &b, Region &scoreMod,
                               const IndexMask &mask, ArrayRef<Value> batchLo,
                               ArrayRef<Value> batchHi, Value rowLo,
                               Value rowHi, Value colLo, Value colHi, Value lq,
                               Value lk) {
  Value one = constIdx(b, 1);
  Value lastRow = arith::SubIOp::create(b, lq, one);
  Value lastCol = arith::SubIOp::create(b, lk, one);
  Value iLo = arith::MinSIOp::create(b, rowLo, lastRow);
  Value iHi = arith::MinSIOp::create(b, rowHi, lastRow);
  Value jLo = arith::MinSIOp::create(b, colLo, lastCol);
  Value jHi = arith::MinSIOp::create(b, colHi, lastCol);
  return emitTileClass(b, b.getLoc(), scoreMod, mask, batchLo, batchHi, iLo,
                       iHi, jLo, jHi);
}

TileClass gpu_lowering::classifyScoreTile(
    ImplicitLocOpBuilder &b, Region &scoreMod, const IndexMask &mask,
    ArrayRef<Value> batchLo, ArrayRef<Value> batchHi, Value rowLo, Value rowHi,
    Value colLo, int64_t cols, Value lq, Value lk) {
  Value colHi = arith::AddIOp::create(b, colLo, constIdx(b, cols - 1));
  return classifyRange(b, scoreMod, mask, batchLo, batchHi, rowLo, rowHi, colLo,
                       colHi, lq, lk);
}

/// `while (lo < hi) (lo, hi) = step(lo, hi)` as an scf.while; the final
/// (lo, hi).
static std::pair<Value, Value>
bisect(ImplicitLocOpBuilder &b, Value lo, Value hi,
       function_ref<std::pair<Value, Value>(ImplicitLocOpBuilder &, Value,
                                            Value)>
           step) {
  Type idx = b.getIndexType();
  auto loop = scf::WhileOp::create(
      b, TypeRange{idx, idx}, ValueRange{lo, hi},
      [&](OpBuilder &ob, Location loc, ValueRange args) {
        Value more = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::slt,
                                           args[0], args[1]);
        scf::ConditionOp::create(ob, loc, more, args);
      },
      [&](OpBuilder &ob, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, ob);
        auto [nextLo, nextHi] = step(ib, args[0], args[1]);
        scf::YieldOp::create(ib, ValueRange{nextLo, nextHi});
      });
  return {loop.getResult(0), loop.getResult(1)};
}

/// `range` without the tiles at either end that `mask` hides from rows
/// [q0, q0 + blockRows) of batch indices in [batchLo, batchHi].
static std::pair<Value, Value>
trimEnds(ImplicitLocOpBuilder &b, Region &scoreMod, const IndexMask &mask,
         ArrayRef<Value> batchLo, ArrayRef<Value> batchHi,
         std::pair<Value, Value> range, Value q0, int64_t blockRows, Value lq,
         Value lk, int64_t tileRows) {
  // Bisection over runs of tiles, not a walk over tiles: a run of keys
  // is one interval to the analysis, so each step asks whether a whole run
  // is hidden, and a block's range is trimmed in 2·log2(tiles) steps of a
  // few dozen scalar ops. A bound only ever moves past a run proven
  // hidden, so an imprecise answer trims less, never too much.
  Value rowHi = arith::AddIOp::create(b, q0, constIdx(b, blockRows - 1));
  Value end = range.second;
  // Whether tiles [a, c) (a < c) are hidden from the block's rows.
  auto hidden = [&](OpBuilder &ob, Location loc, Value a, Value c) {
    ImplicitLocOpBuilder ib(loc, ob);
    Value t = constIdx(ib, tileRows);
    Value colLo = arith::MulIOp::create(ib, a, t);
    Value colHi = arith::SubIOp::create(ib, arith::MulIOp::create(ib, c, t),
                                        constIdx(ib, 1));
    return classifyRange(ib, scoreMod, mask, batchLo, batchHi, q0, rowHi, colLo,
                         colHi, lq, lk)
        .empty;
  };
  // First: the largest lo with [range.first, lo) proven hidden, searched in
  // [lo, hi]: mid = (lo + hi + 1) / 2; hidden [lo, mid) -> lo = mid, else
  // hi = mid - 1.
  Value begin =
      bisect(b, range.first, end,
             [&](ImplicitLocOpBuilder &ib, Value lo, Value hi) {
               Value mid = arith::DivUIOp::create(
                   ib,
                   arith::AddIOp::create(ib, arith::AddIOp::create(ib, lo, hi),
                                         constIdx(ib, 1)),
                   constIdx(ib, 2));
               Value gone = hidden(ib, ib.getLoc(), lo, mid);
               return std::pair<Value, Value>{
                   arith::SelectOp::create(ib, gone, mid, lo),
                   arith::SelectOp::create(
                       ib, gone, hi,
                       arith::SubIOp::create(ib, mid, constIdx(ib, 1)))};
             })
          .first;
  // Last: the smallest hi with [hi, end) proven hidden, in [lo, hi]:
  // mid = (lo + hi) / 2; hidden [mid, hi) -> hi = mid, else lo = mid + 1.
  Value stop =
      bisect(b, begin, end,
             [&](ImplicitLocOpBuilder &ib, Value lo, Value hi) {
               Value mid = arith::DivUIOp::create(
                   ib, arith::AddIOp::create(ib, lo, hi), constIdx(ib, 2));
               Value gone = hidden(ib, ib.getLoc(), mid, hi);
               return std::pair<Value, Value>{
                   arith::SelectOp::create(
                       ib, gone, lo,
                       arith::AddIOp::create(ib, mid, constIdx(ib, 1))),
                   arith::SelectOp::create(ib, gone, mid, hi)};
             })
          .second;
  return {begin, stop};
}

Value TileWalk::tile(ImplicitLocOpBuilder &b, Value t) const {
  if (!gapAt)
    return t;
  Value past = arith::CmpIOp::create(b, arith::CmpIPredicate::sge, t, gapAt);
  return arith::AddIOp::create(
      b, t, arith::SelectOp::create(b, past, gapLen, constIdx(b, 0)));
}

TileWalk gpu_lowering::trimHiddenTiles(ImplicitLocOpBuilder &b,
                                       Region &scoreMod, const IndexMask &mask,
                                       ArrayRef<Value> batchLo,
                                       ArrayRef<Value> batchHi,
                                       std::pair<Value, Value> range, Value q0,
                                       int64_t blockRows, Value lq, Value lk,
                                       int64_t tileRows) {
  auto trim = [&](const IndexMask &m) {
    return trimEnds(b, scoreMod, m, batchLo, batchHi, range, q0, blockRows, lq,
                    lk, tileRows);
  };
  std::optional<std::pair<IndexMask, IndexMask>> sides = splitDisjunction(mask);
  if (!sides) {
    auto [begin, end] = trim(mask);
    return {begin, end, Value(), Value()};
  }
  // Every tile the mask shows, one side shows, and lies in that side's
  // trimmed run: the walk covers both runs, and the tiles between them when
  // they are apart (the second side's bisections are on the whole range,
  // not after the first's, since either run may come first).
  auto [aBegin, aEnd] = trim(sides->first);
  auto [cBegin, cEnd] = trim(sides->second);
  using P = arith::CmpIPredicate;
  Value aNone = arith::CmpIOp::create(b, P::sge, aBegin, aEnd);
  Value cNone = arith::CmpIOp::create(b, P::sge, cBegin, cEnd);
  // An empty run takes the other's place, so the two runs are (lo, hi)
  // in order of their first tile.
  aBegin = arith::SelectOp::create(b, aNone, cBegin, aBegin);
  aEnd = arith::SelectOp::create(b, aNone, cEnd, aEnd);
  cBegin = arith::SelectOp::create(b, cNone, aBegin, cBegin);
  cEnd = arith::SelectOp::create(b, cNone, aEnd, cEnd);
  Value aFirst = arith::CmpIOp::create(b, P::sle, aBegin, cBegin);
  Value loBegin = arith::SelectOp::create(b, aFirst, aBegin, cBegin);
  Value loEnd = arith::SelectOp::create(b, aFirst, aEnd, cEnd);
  Value hiBegin = arith::SelectOp::create(b, aFirst, cBegin, aBegin);
  Value hiEnd = arith::SelectOp::create(b, aFirst, cEnd, aEnd);
  // The gap [loEnd, hiBegin) when the runs are apart; when they overlap,
  // one run from the first's start to the later end.
  Value end = arith::MaxSIOp::create(b, loEnd, hiEnd);
  Value gapLen = arith::MaxSIOp::create(
      b, arith::SubIOp::create(b, hiBegin, loEnd), constIdx(b, 0));
  // Both empty: loBegin >= loEnd, and the walk is empty.
  Value stepEnd =
      arith::MaxSIOp::create(b, arith::SubIOp::create(b, end, gapLen), loBegin);
  return {loBegin, stepEnd, loEnd, gapLen};
}

std::pair<Value, Value> gpu_lowering::splitShare(ImplicitLocOpBuilder &b,
                                                 Value stepBegin, Value stepEnd,
                                                 Value splits, Value split,
                                                 Value tilesPerSplit,
                                                 bool divideVisible) {
  Value sBegin, sEnd;
  if (divideVisible) {
    Value zero = constIdx(b, 0), one = constIdx(b, 1);
    Value steps = arith::MaxSIOp::create(
        b, arith::SubIOp::create(b, stepEnd, stepBegin), zero);
    Value per = arith::MaxSIOp::create(
        b, arith::CeilDivSIOp::create(b, steps, splits), one);
    sBegin = arith::AddIOp::create(b, stepBegin,
                                   arith::MulIOp::create(b, split, per));
    sEnd = arith::AddIOp::create(b, sBegin, per);
  } else {
    sBegin = arith::MulIOp::create(b, split, tilesPerSplit);
    sEnd = arith::AddIOp::create(b, sBegin, tilesPerSplit);
  }
  // An empty share is an empty range, whose rows still write their partial
  // (0, lse = -inf) for the combine.
  Value begin = arith::MaxSIOp::create(b, stepBegin, sBegin);
  Value end = arith::MaxSIOp::create(
      b, arith::MinSIOp::create(b, stepEnd, sEnd), begin);
  return {begin, end};
}

Value gpu_lowering::dataPointer(ImplicitLocOpBuilder &b, Value m) {
  Value p = memref::ExtractAlignedPointerAsIndexOp::create(b, m);
  return LLVM::IntToPtrOp::create(b, LLVM::LLVMPointerType::get(b.getContext()),
                                  toI64(b, p));
}

int64_t gpu_lowering::storedBytes(Type elt) {
  return std::max<int64_t>(1, elt.getIntOrFloatBitWidth() / 8);
}

std::pair<Value, int64_t> gpu_lowering::splitConstantOffset(Value v) {
  APInt c;
  if (auto add = v.getDefiningOp<arith::AddIOp>();
      add && matchPattern(add.getRhs(), m_ConstantInt(&c)))
    return {add.getLhs(), c.getSExtValue()};
  return {v, 0};
}

/// `mem` at (indices[0..n-1], key.col), or 0 where key.col >= key.lk: a
/// predicated ld.global.nc at an immediate offset from the row's address
/// (null where the element type has no such load). The column is taken as
/// the fragment builds it, a per-tile base plus a constant, so that the row
/// address and the predicate's bound are per tile and each score pays the
/// load alone.
static Value loadAlongKeys(ImplicitLocOpBuilder &b, Value mem,
                           ValueRange indices, const KeyColumn &key) {
  auto type = cast<MemRefType>(mem.getType());
  Type elt = type.getElementType();
  if (!elt.isIntOrFloat())
    return Value();
  unsigned bits = elt.getIntOrFloatBitWidth();
  // (PTX load type, register constraint, register width); i1 is a byte.
  const char *ptxType, *constraint;
  unsigned regBits;
  switch (bits) {
  case 1:
  case 8:
    ptxType = "u8", constraint = "=h", regBits = 16;
    break;
  case 16:
    ptxType = "b16", constraint = "=h", regBits = 16;
    break;
  case 32:
    ptxType = "b32", constraint = "=r", regBits = 32;
    break;
  case 64:
    ptxType = "b64", constraint = "=l", regBits = 64;
    break;
  default:
    return Value();
  }
  int64_t bytes = storedBytes(elt);
  SmallVector<int64_t> staticStrides;
  int64_t staticOffset;
  if (failed(type.getStridesAndOffset(staticStrides, staticOffset)))
    return Value();
  int64_t rank = type.getRank();
  auto meta = memref::ExtractStridedMetadataOp::create(b, mem);
  Value row = meta.getOffset();
  for (int64_t d = 0; d + 1 < rank; ++d)
    row = arith::AddIOp::create(
        b, row, arith::MulIOp::create(b, indices[d], meta.getStrides()[d]));
  // The column as base + k; k goes into the instruction where the stride
  // along the keys is static.
  auto [colBase, k] = splitConstantOffset(key.col);
  int64_t keyStride = staticStrides[rank - 1];
  int64_t immediate = 0;
  if (ShapedType::isDynamic(keyStride)) {
    colBase = key.col;
    k = 0;
    row = arith::AddIOp::create(
        b, row, arith::MulIOp::create(b, colBase, meta.getStrides()[rank - 1]));
  } else {
    row = arith::AddIOp::create(
        b, row, arith::MulIOp::create(b, colBase, constIdx(b, keyStride)));
    immediate = k * keyStride * bytes;
  }
  auto global = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Value base = LLVM::AddrSpaceCastOp::create(b, global, dataPointer(b, mem));
  Value rowPtr = LLVM::GEPOp::create(
      b, global, b.getI8Type(), base,
      ValueRange{toI64(b, arith::MulIOp::create(b, row, constIdx(b, bytes)))});
  // column < lk  <=>  k < lk - base, in 32 bits (clamped: a tile's base
  // is never far past lk, lk itself may be).
  Value room = arith::SubIOp::create(b, key.lk, colBase);
  room = arith::MinSIOp::create(b, room, constIdx(b, int64_t(1) << 30));
  Value inKeys = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt,
                                       toI32(b, room), constI32(b, k));
  std::string asmText =
      (Twine("mov.b") + Twine(regBits) + " $0, 0;\n@$1 ld.global.nc." +
       ptxType + " $0, [$2+" + Twine(immediate) + "];")
          .str();
  Type regType = b.getIntegerType(regBits);
  Value x =
      LLVM::InlineAsmOp::create(
          b, regType, ValueRange{inKeys, rowPtr}, asmText,
          (Twine(constraint) + ",b,l").str(), /*has_side_effects=*/false,
          /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
          LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
          ArrayAttr())
          .getResult(0);
  if (bits < regBits)
    x = arith::TruncIOp::create(b, b.getIntegerType(bits), x);
  if (x.getType() != elt)
    x = arith::BitcastOp::create(b, elt, x);
  return x;
}

unsigned gpu_lowering::captureNumber(tensor::ExtractOp read,
                                     unsigned numCaptures) {
  // The captures are the region's last arguments.
  auto arg = cast<BlockArgument>(read.getTensor());
  return arg.getArgNumber() - (arg.getOwner()->getNumArguments() - numCaptures);
}

Value gpu_lowering::loadCapture(OpBuilder &b, ArrayRef<Value> captures,
                                tensor::ExtractOp read, ValueRange indices,
                                const KeyColumn *key) {
  Block *body = cast<BlockArgument>(read.getTensor()).getOwner();
  // The key index is the region's argument before the captures.
  unsigned first = body->getNumArguments() - captures.size();
  unsigned capture = captureNumber(read, captures.size());
  Value mem = captures[capture];
  if (key && !read.getIndices().empty() &&
      read.getIndices().back() == body->getArgument(first - 1)) {
    ImplicitLocOpBuilder ib(read.getLoc(), b);
    if (key->staged && key->staged->stages(capture))
      return loadStagedCapture(ib, *key->staged, capture, read.getType(),
                               key->col, key->half);
    if (Value x = loadAlongKeys(ib, mem, indices, *key))
      return x;
  }
  return memref::LoadOp::create(b, read.getLoc(), mem, indices);
}

Value gpu_lowering::collapseBatchDims(ImplicitLocOpBuilder &b, Value m,
                                      int64_t nb) {
  auto t = cast<MemRefType>(m.getType());
  int64_t rank = t.getRank();
  if (nb == 1)
    return m;
  SmallVector<ReassociationIndices> groups;
  if (nb == 0) {
    // No batch dims: a unit one in front.
    SmallVector<int64_t> shape = {1};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
    for (int64_t d = 0; d < rank; ++d) {
      shape.push_back(t.getDimSize(d));
      sizes.push_back(memref::getMixedSize(b, b.getLoc(), m, d));
      groups.push_back(d == 0 ? ReassociationIndices{0, 1}
                              : ReassociationIndices{d + 1});
    }
    return memref::ExpandShapeOp::create(
        b, MemRefType::get(shape, t.getElementType()), m, groups, sizes);
  }
  ReassociationIndices outer;
  for (int64_t d = 0; d < nb; ++d)
    outer.push_back(d);
  groups.push_back(outer);
  for (int64_t d = nb; d < rank; ++d)
    groups.push_back({d});
  return memref::CollapseShapeOp::create(b, m, groups);
}

MaxUpdate gpu_lowering::updateRunningMax(ImplicitLocOpBuilder &b, Value m,
                                         Value rowMax) {
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  MaxUpdate u;
  u.m = arith::MaxNumFOp::create(b, m, rowMax);
  Value isInf = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, u.m, negInf);
  u.mUse = arith::SelectOp::create(b, isInf, constF32(b, 0.0), u.m);
  u.alpha = exp2Approx(b, arith::SubFOp::create(b, m, u.mUse));
  return u;
}

Value gpu_lowering::updateRunningSum(ImplicitLocOpBuilder &b, Value l,
                                     Value alpha, Value rowSum) {
  Value scaled = arith::MulFOp::create(b, l, alpha);
  return arith::AddFOp::create(b, scaled, rowSum);
}

PartialMerge gpu_lowering::mergePartial(ImplicitLocOpBuilder &b, Value m,
                                        Value l, Value pm, Value pl) {
  MaxUpdate u = updateRunningMax(b, m, pm);
  PartialMerge r;
  r.m = u.m;
  r.alpha = u.alpha;
  r.beta = exp2Approx(b, arith::SubFOp::create(b, pm, u.mUse));
  r.l = updateRunningSum(b, l, u.alpha, arith::MulFOp::create(b, r.beta, pl));
  return r;
}

RowResult gpu_lowering::finishRow(ImplicitLocOpBuilder &b, Value m, Value l,
                                  bool withLse, Value sinkLog2) {
  Value zero = constF32(b, 0.0), one = constF32(b, 1.0);
  Value rescale;
  if (sinkLog2) {
    PartialMerge s = mergePartial(b, m, l, sinkLog2, one);
    m = s.m;
    l = s.l;
    rescale = s.alpha;
  }
  RowResult r;
  // A row is dead when its sum is 0 (it saw no finite score); a NaN sum (a
  // NaN or +inf among its inputs) stays live, so NaN reaches the output and
  // the lse as IEEE arithmetic has it.
  r.live = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, l, zero);
  r.inv = arith::SelectOp::create(
      b, r.live, arith::DivFOp::create(b, rescale ? rescale : one, l), zero);
  if (withLse) {
    // lse = ln(sum exp s) = ln 2 · (m + log2 l), m being the running max of
    // the log2-domain scores.
    Value log2L = log2Approx(b, arith::SelectOp::create(b, r.live, l, one));
    Value lse = arith::MulFOp::create(b, arith::AddFOp::create(b, m, log2L),
                                      constF32(b, std::log(2.0)));
    r.lse = arith::SelectOp::create(
        b, r.live, lse,
        constF32(b, -std::numeric_limits<double>::infinity()));
  }
  return r;
}

Value gpu_lowering::sinkLog2(ImplicitLocOpBuilder &b, Value sinks,
                             Value flatHead) {
  Value head = arith::RemUIOp::create(b, flatHead,
                                      memref::DimOp::create(b, sinks, 0));
  Value x = memref::LoadOp::create(b, sinks, ValueRange{head});
  if (!x.getType().isF32())
    x = arith::ExtFOp::create(b, b.getF32Type(), x);
  return arith::MulFOp::create(b, x, constF32(b, 1.4426950408889634));
}

/// The ops of `scoreMod` a prefetch clones: each capture read
/// (`tensor.extract` of a capture argument) whose indices do not depend on
/// the score, and the ops those indices are computed by.
static DenseSet<Operation *> prefetchableReads(Region &scoreMod,
                                               unsigned numIndices) {
  Block &body = scoreMod.front();
  DenseSet<Value> fromScore = scoreModSlice(scoreMod, 0);
  DenseSet<Operation *> slice;
  SmallVector<Operation *> work;
  for (Operation &op : body.without_terminator()) {
    tensor::ExtractOp ex = captureRead(&op, numIndices);
    if (!ex || llvm::any_of(ex.getIndices(),
                            [&](Value v) { return fromScore.contains(v); }))
      continue;
    work.push_back(ex);
  }
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!slice.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body)
        work.push_back(def);
  }
  return slice;
}

namespace {
/// What IndexFloats of a tile's scores are made from: the f32 copies of a
/// thread's two (clamped) rows and of the last column, where the lengths
/// are static and small enough for every index to be an f32.
struct IndexFloatsAt {
  Value rows[2];
  Value lastCol;
  int64_t bound;

  /// The copies for row half `half` and the unclamped column `c`. A column
  /// built as base + constant (the fragment's column of a tile) is converted
  /// as its base, once per tile, plus the constant in f32.
  IndexFloats at(ImplicitLocOpBuilder &b, int half, Value c) const {
    auto [base, offset] = splitConstantOffset(c);
    Value col = toF32(b, base);
    if (offset != 0)
      col = arith::AddFOp::create(b, col, constF32(b, double(offset)));
    col = arith::MinNumFOp::create(b, col, lastCol);
    return IndexFloats{rows[half], col, bound};
  }

  static Value toF32(ImplicitLocOpBuilder &b, Value i) {
    return indexToF32(b, i);
  }
};
} // namespace

/// The IndexFloatsAt of lengths statically at most `indexBound` (nothing
/// when that is unknown, 0, or an index past it, a tile's padding included,
/// could reach 2^24).
static std::optional<IndexFloatsAt> indexFloatsAt(ImplicitLocOpBuilder &b,
                                                  int64_t indexBound,
                                                  std::array<Value, 2> rows,
                                                  Value lastCol) {
  std::optional<int64_t> bound = exactIndexBound(indexBound);
  if (!bound)
    return std::nullopt;
  IndexFloatsAt f;
  f.rows[0] = IndexFloatsAt::toF32(b, rows[0]);
  f.rows[1] = IndexFloatsAt::toF32(b, rows[1]);
  f.lastCol = IndexFloatsAt::toF32(b, lastCol);
  f.bound = *bound;
  return f;
}

ScoreContext gpu_lowering::makeScoreContext(
    ImplicitLocOpBuilder &b, MaskAttr mask, Region *scoreMod,
    const Value rows[2], Value colBase, Value laneCol, Value lq, Value lk,
    ArrayRef<Value> batchIdx, ArrayRef<Value> captures, bool needsMask,
    int64_t indexBound, const StagedTiles *staged) {
  return makeScoreContext(b, mask, scoreMod, rows, colBase, laneCol, lq, lk,
                          {batchIdx, batchIdx}, captures, needsMask, indexBound,
                          staged);
}

ScoreContext gpu_lowering::makeScoreContext(
    ImplicitLocOpBuilder &b, MaskAttr mask, Region *scoreMod,
    const Value rows[2], Value colBase, Value laneCol, Value lq, Value lk,
    std::array<ArrayRef<Value>, 2> batchIdx, ArrayRef<Value> captures,
    bool needsMask, int64_t indexBound, const StagedTiles *staged) {
  ScoreContext sc;
  sc.rowIdx[0] = rows[0];
  sc.rowIdx[1] = rows[1];
  sc.colBase = colBase;
  sc.laneCol = laneCol;
  sc.needsMask = needsMask;
  sc.keysOf = [mask, lq, lk, colBase, laneCol](ImplicitLocOpBuilder &bb,
                                               Value r) {
    Value base = arith::AddIOp::create(bb, colBase, laneCol);
    return rowKeys(bb, mask, r, base, lq, lk);
  };
  if (scoreMod) {
    Value lastRow = arith::SubIOp::create(b, lq, constIdx(b, 1));
    Value lastCol = arith::SubIOp::create(b, lk, constIdx(b, 1));
    Value r0 = rows[0];
    Value cr0 = arith::MinSIOp::create(b, rows[0], lastRow);
    Value cr1 = arith::MinSIOp::create(b, rows[1], lastRow);
    SmallVector<Value> bIdx0(batchIdx[0]), bIdx1(batchIdx[1]), caps(captures);
    // The closures below keep their own copy of the tile's staged captures.
    StagedTiles tiles = staged ? *staged : StagedTiles();
    // Static lengths bound the indices, so a conversion of them to f32
    // (ALiBi's distance, a relative position) can be exact f32 arithmetic
    // on per-tile copies: an I2F per score would take the same unit as
    // the softmax's ex2, which bounds the kernel.
    // (Only where the region converts an integer to f32 at all.)
    std::optional<IndexFloatsAt> fl;
    if (llvm::any_of(scoreMod->front().without_terminator(),
                     [](Operation &op) { return isa<arith::SIToFPOp>(op); }))
      fl = indexFloatsAt(b, indexBound, {cr0, cr1}, lastCol);
    // The region at one score, yielding `yielded` (null: what it yields).
    auto inlineAt = [scoreMod, bIdx0, bIdx1, caps, lastCol, lk, r0, cr0, cr1,
                     fl, tiles](Value yielded) {
      return [=](ImplicitLocOpBuilder &bb, Value x, Value r, Value c,
                 const IRMapping *seed) {
        bool first = r == r0;
        Value cc = arith::MinSIOp::create(bb, c, lastCol);
        std::optional<IndexFloats> f;
        if (fl)
          f = fl->at(bb, first ? 0 : 1, c);
        KeyColumn key{c, lk, &tiles, first ? 0 : 1};
        return inlineScoreMod(bb, *scoreMod, x, first ? bIdx0 : bIdx1,
                              first ? cr0 : cr1, cc, caps, yielded,
                              f ? &*f : nullptr, seed, &key);
      };
    };
    sc.scoreMod = inlineAt(Value());
    std::optional<IndexMask> im =
        findIndexMask(*scoreMod, batchIdx[0].size() + 2);
    if (im && !im->liveIsScore(*scoreMod))
      sc.liveScoreMod = inlineAt(im->live);
    DenseSet<Operation *> reads =
        prefetchableReads(*scoreMod, batchIdx[0].size() + 2);
    if (!reads.empty())
      sc.prefetch = [scoreMod, bIdx0, bIdx1, caps, lastCol, lk, r0, cr0, cr1,
                     reads, tiles](ImplicitLocOpBuilder &bb, Value r, Value c) {
        bool first = r == r0;
        Value cc = arith::MinSIOp::create(bb, c, lastCol);
        KeyColumn key{c, lk, &tiles, first ? 0 : 1};
        IRMapping map;
        // The reads do not depend on the score: any f32 stands in for it.
        cloneScoreMod(
            bb, bb.getLoc(), *scoreMod, map, constF32(bb, 0.0),
            first ? bIdx0 : bIdx1, first ? cr0 : cr1, cc, ValueRange(),
            [&](OpBuilder &ob, Location, tensor::ExtractOp ex, ValueRange idx) {
              return loadCapture(ob, caps, ex, idx, &key);
            },
            [&](Operation *op) { return reads.contains(op); });
        return map;
      };
  }
  return sc;
}
