//===- SplitKVCombine.cpp - merge the split-KV partials by their LSE ------===//
//
// The second kernel of a split decode: each split wrote its row's output
// normalised over its own keys and that range's log-sum-exp; the exact
// result is their LSE-weighted sum. One warp per row: the lanes first take
// the splits (the max of their lse and the sum of their weights, two
// butterfly reductions), then the columns, with the splits unrolled so
// that a long split list costs loads in flight, not one latency per split.
// The traffic is splits × rows × Dv f32, small beside the K/V the first
// kernel read.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

// Splits whose loads the weighted sum issues together.
static constexpr int64_t kUnroll = 8;

gpu::GPUFuncOp gpu_lowering::buildSplitKVCombineKernel(
    OpBuilder &ob, Location loc, gpu::GPUModuleOp module,
    const MemrefKernelSpec &spec, ArrayRef<Type> argTypes) {
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type f32 = b.getF32Type();
  const int64_t Dv = spec.dv;
  const int64_t perLane = llvm::divideCeil(Dv, 32);
  gpu::GPUFuncOp fn = createMemrefKernelFunc(b, argTypes, {}, {},
                                             32 * kSplitKVCombineWarps);
  fn.setName("combine");
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value oPart = entry.getArgument(0);   // [splits, bh·Lq, Dv] f32
  Value lsePart = entry.getArgument(1); // [splits, bh·Lq]
  Value out = entry.getArgument(2);     // [bh, Lq, Dv]
  Value lse = spec.hasLse ? entry.getArgument(3) : Value(); // [bh, Lq]

  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, constIdx(b, 32));
  Value row = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
                            constIdx(b, kSplitKVCombineWarps)),
      arith::DivUIOp::create(b, tid, constIdx(b, 32)));
  Value rowsTotal = memref::DimOp::create(b, lsePart, 1);
  Value splits = memref::DimOp::create(b, lsePart, 0);
  auto ifRow = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, row, rowsTotal),
      /*withElse=*/false);
  b.setInsertionPointToStart(ifRow.thenBlock());

  // Columns lane + 32 i; the last ones of a Dv that is not a multiple of 32
  // are read clamped and never stored.
  SmallVector<Value> cols, colsC;
  for (int64_t i = 0; i < perLane; ++i) {
    cols.push_back(arith::AddIOp::create(b, lane, constIdx(b, 32 * i)));
    colsC.push_back(arith::MinSIOp::create(b, cols.back(), constIdx(b, Dv - 1)));
  }
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value zf = constF32(b, 0.0);
  Value log2e = constF32(b, 1.4426950408889634);
  Value c32 = constIdx(b, 32);
  Value lastSplit = arith::SubIOp::create(b, splits, one);
  // lse of split s in the log2 domain, -inf past the last split.
  auto splitLse = [&](ImplicitLocOpBuilder &ib, Value s) {
    Value in = arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, s, splits);
    Value sc = arith::MinSIOp::create(ib, s, lastSplit);
    Value x = memref::LoadOp::create(ib, lsePart, ValueRange{sc, row});
    return arith::SelectOp::create(ib, in, arith::MulFOp::create(ib, x, log2e),
                                   negInf)
        .getResult();
  };

  // The row's statistics with the lanes over the splits: the max of the
  // partials' lse, then the sum of their weights 2^(lse - max). A split that
  // saw no key has lse = -inf and weight 0 (updateRunningMax's convention:
  // a row that saw nothing subtracts 0, never -inf).
  Value laneSteps = arith::CeilDivSIOp::create(b, splits, c32);
  auto maxLoop = scf::ForOp::create(
      b, zero, laneSteps, one, ValueRange{negInf},
      [&](OpBuilder &nb, Location l, Value i, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        Value s = arith::AddIOp::create(ib, lane, arith::MulIOp::create(ib, i, c32));
        scf::YieldOp::create(
            ib, ValueRange{arith::MaxNumFOp::create(ib, st[0], splitLse(ib, s))
                               .getResult()});
      });
  MaxUpdate top = updateRunningMax(
      b, negInf, butterflyReduce(b, maxLoop.getResult(0), /*isMax=*/true, 32));
  auto weight = [&](ImplicitLocOpBuilder &ib, Value s) {
    return exp2Approx(ib, arith::SubFOp::create(ib, splitLse(ib, s), top.mUse));
  };
  auto sumLoop = scf::ForOp::create(
      b, zero, laneSteps, one, ValueRange{zf},
      [&](OpBuilder &nb, Location l, Value i, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        Value s = arith::AddIOp::create(ib, lane, arith::MulIOp::create(ib, i, c32));
        scf::YieldOp::create(
            ib, ValueRange{arith::AddFOp::create(ib, st[0], weight(ib, s))
                               .getResult()});
      });
  Value total = butterflyReduce(b, sumLoop.getResult(0), /*isMax=*/false, 32);

  // The weighted sum with the lanes over the columns. The weights are known
  // up front, so nothing is carried from one split to the next but the sums:
  // the splits are unrolled so that their loads are in flight together.
  SmallVector<Value> init(perLane, zf);
  Value steps = arith::CeilDivSIOp::create(b, splits, constIdx(b, kUnroll));
  auto loop = scf::ForOp::create(
      b, zero, steps, one, init,
      [&](OpBuilder &nb, Location l, Value i, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        Value s0 = arith::MulIOp::create(ib, i, constIdx(ib, kUnroll));
        SmallVector<Value> w, o;
        for (int64_t u = 0; u < kUnroll; ++u) {
          Value s = arith::AddIOp::create(ib, s0, constIdx(ib, u));
          w.push_back(weight(ib, s));
          Value sc = arith::MinSIOp::create(ib, s, lastSplit);
          for (int64_t c = 0; c < perLane; ++c)
            o.push_back(memref::LoadOp::create(ib, oPart,
                                               ValueRange{sc, row, colsC[c]}));
        }
        SmallVector<Value> acc(st);
        for (int64_t u = 0; u < kUnroll; ++u)
          for (int64_t c = 0; c < perLane; ++c)
            acc[c] = math::FmaOp::create(ib, o[u * perLane + c], w[u], acc[c]);
        scf::YieldOp::create(ib, acc);
      });
  SmallVector<Value> fin = {top.m, total};
  fin.append(loop.getResults().begin(), loop.getResults().end());
  RowResult res = finishRow(b, fin[0], fin[1], spec.hasLse);
  Value lq = memref::DimOp::create(b, out, 1);
  Value bh = arith::DivUIOp::create(b, row, lq);
  Value q = arith::RemUIOp::create(b, row, lq);
  for (int64_t i = 0; i < perLane; ++i) {
    OpBuilder::InsertionGuard g(b);
    if (Dv % 32 && i == perLane - 1) {
      auto in = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, cols[i],
                                   constIdx(b, Dv)),
          /*withElse=*/false);
      b.setInsertionPointToStart(in.thenBlock());
    }
    Value x = arith::MulFOp::create(b, fin[2 + i], res.inv);
    if (spec.oElem != f32)
      x = arith::TruncFOp::create(b, spec.oElem, x);
    memref::StoreOp::create(b, x, out, ValueRange{bh, q, cols[i]});
  }
  if (lse) {
    auto first = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, zero),
        /*withElse=*/false);
    b.setInsertionPointToStart(first.thenBlock());
    memref::StoreOp::create(b, res.lse, lse, ValueRange{bh, q});
  }
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b);
  return fn;
}
