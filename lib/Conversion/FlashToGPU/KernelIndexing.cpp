//===- KernelIndexing.cpp - index math every flash.attention kernel shares -===//
//
// Both GPU kernels (the sm_90a one and the portable one) map a block to a
// (batch·head, query block), find the KV head of a query head, skip the key
// tiles a structured mask hides from a whole query block, and inline the
// score_mod region per element. One definition each, so the kernels cannot
// disagree on what the op means.
//
//===----------------------------------------------------------------------===//
#include "FlashToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

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
  if (!withBatchIndices)
    return r;
  r.batchIdx.resize(nb);
  Value rest = bh;
  for (int64_t d = nb - 1; d >= 0; --d) {
    if (d == 0) {
      r.batchIdx[d] = rest;
      break;
    }
    r.batchIdx[d] = arith::RemUIOp::create(b, rest, batchSizes[d]);
    rest = arith::DivUIOp::create(b, rest, batchSizes[d]);
  }
  return r;
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
  Value off = mask.isBottomRight()
                  ? arith::SubIOp::create(b, lk, lq).getResult()
                  : zero;
  // Last query row of the block that exists.
  Value last = arith::AddIOp::create(b, q0, constIdx(b, blockRows));
  last = arith::MinSIOp::create(b, last, lq);
  last = arith::SubIOp::create(b, last, constIdx(b, 1));
  Value hi = arith::AddIOp::create(b, last, off);
  Value end = arith::AddIOp::create(b, arith::FloorDivSIOp::create(b, hi, tile),
                                    constIdx(b, 1));
  end = arith::MinSIOp::create(b, end, nT);
  end = arith::MaxSIOp::create(b, end, zero);
  Value begin = zero;
  if (mask.getKind() == MaskKind::SlidingWindow) {
    Value lo = arith::AddIOp::create(b, q0, off);
    lo = arith::AddIOp::create(b, lo, constIdx(b, 1 - mask.getWindow()));
    begin = arith::FloorDivSIOp::create(b, lo, tile);
    begin = arith::MaxSIOp::create(b, begin, zero);
    begin = arith::MinSIOp::create(b, begin, end);
  }
  return {begin, end};
}

Value gpu_lowering::inlineScoreMod(ImplicitLocOpBuilder &b, Region &scoreMod,
                                   Value score, ArrayRef<Value> batchIdx,
                                   Value row, Value col,
                                   ArrayRef<Value> captures) {
  // Block arguments: the score, the batch indices, the query row, the key
  // column and the captures; `tensor.extract` from a capture becomes a load
  // from its memref (the host side checked that is the only use).
  Block &body = scoreMod.front();
  int64_t nb = batchIdx.size();
  IRMapping map;
  map.map(body.getArgument(0), score);
  for (int64_t d = 0; d < nb; ++d)
    map.map(body.getArgument(1 + d), batchIdx[d]);
  map.map(body.getArgument(1 + nb), row);
  map.map(body.getArgument(2 + nb), col);
  unsigned firstCapture = 3 + nb;
  for (Operation &op : body.without_terminator()) {
    if (auto ex = dyn_cast<tensor::ExtractOp>(&op)) {
      auto arg = dyn_cast<BlockArgument>(ex.getTensor());
      if (arg && arg.getOwner() == &body &&
          arg.getArgNumber() >= firstCapture) {
        SmallVector<Value> idx;
        for (Value v : ex.getIndices())
          idx.push_back(map.lookup(v));
        Value mem = captures[arg.getArgNumber() - firstCapture];
        map.map(ex.getResult(), memref::LoadOp::create(b, mem, idx));
        continue;
      }
    }
    b.clone(op, map);
  }
  return map.lookup(body.getTerminator()->getOperand(0));
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
