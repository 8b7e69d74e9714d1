//===- SplitKVCombine.cpp - merge the split-KV partials by their LSE ------===//
//
// The second kernel of a split decode: each split wrote its row's output
// normalised over its own keys and that range's log-sum-exp; the exact
// result is their LSE-weighted sum. One to four warps per row (more when
// there are many splits and few rows, so that the splits of a row are
// read in parallel): the lanes first take the splits (the max of their lse
// and the sum of their weights, butterfly then shared-memory reductions),
// then the columns, with the splits unrolled so that a long split list
// costs loads in flight, not one latency per split.
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

SplitRowMerge gpu_lowering::mergeSplitRow(ImplicitLocOpBuilder &b,
                                          const SplitRowSource &src) {
  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  const int64_t Dv = src.dv, perLane = llvm::divideCeil(Dv, 32);
  SmallVector<Value> colsC;
  for (int64_t i = 0; i < perLane; ++i)
    colsC.push_back(arith::MinSIOp::create(
        b, arith::AddIOp::create(b, src.lane, constIdx(b, 32 * i)),
        constIdx(b, Dv - 1)));
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value zf = constF32(b, 0.0);
  Value log2e = constF32(b, 1.4426950408889634);
  Value lastSplit = arith::SubIOp::create(b, src.splits, one);
  // lse of split s in the log2 domain, -inf past the last split.
  auto splitLse = [&](ImplicitLocOpBuilder &ib, Value s) {
    Value in =
        arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, s, src.splits);
    Value x = src.loadLse(ib, arith::MinSIOp::create(ib, s, lastSplit));
    return arith::SelectOp::create(ib, in, arith::MulFOp::create(ib, x, log2e),
                                   negInf)
        .getResult();
  };
  // This warp's k-th split: sub + wpr·k.
  auto warpSplit = [&](ImplicitLocOpBuilder &ib, Value k) {
    return arith::AddIOp::create(ib, src.sub,
                                 arith::MulIOp::create(ib, k, src.wpr))
        .getResult();
  };

  // The row's statistics with the lanes over the splits: the max of the
  // partials' lse, then the sum of their weights 2^(lse - max). A split that
  // saw no key has lse = -inf and weight 0 (updateRunningMax's convention:
  // a row that saw nothing subtracts 0, never -inf).
  Value laneSteps = arith::CeilDivSIOp::create(
      b, src.splits, arith::MulIOp::create(b, src.wpr, constIdx(b, 32)));
  auto laneSplit = [&](ImplicitLocOpBuilder &ib, Value i) {
    return warpSplit(
        ib, arith::AddIOp::create(
                ib, src.lane, arith::MulIOp::create(ib, i, constIdx(ib, 32))));
  };
  auto maxLoop = scf::ForOp::create(
      b, zero, laneSteps, one, ValueRange{negInf},
      [&](OpBuilder &nb, Location l, Value i, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        scf::YieldOp::create(
            ib, ValueRange{arith::MaxNumFOp::create(
                               ib, st[0], splitLse(ib, laneSplit(ib, i)))
                               .getResult()});
      });
  SplitRowMerge r;
  r.top = updateRunningMax(
      b, negInf,
      src.rowReduce(
          butterflyReduce(b, maxLoop.getResult(0), /*isMax=*/true, 32),
          /*isMax=*/true));
  // 2^(lse·log2e - max), the exponent one FMA: as a multiply and a subtract
  // with splitLse's select between them, they contracted into an FMA only
  // where the select folded, i.e. where the split index was a constant (a
  // kernel specialised on its split count), so two merges of the same
  // partials rounded differently (bench/NOTES run 74).
  Value negTop = arith::NegFOp::create(b, r.top.mUse);
  auto weight = [&](ImplicitLocOpBuilder &ib, Value s) {
    Value in =
        arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, s, src.splits);
    Value x = src.loadLse(ib, arith::MinSIOp::create(ib, s, lastSplit));
    return exp2Approx(ib, arith::SelectOp::create(
                              ib, in, fmaF32(ib, x, log2e, negTop), negInf));
  };
  auto sumLoop = scf::ForOp::create(
      b, zero, laneSteps, one, ValueRange{zf},
      [&](OpBuilder &nb, Location l, Value i, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        scf::YieldOp::create(
            ib, ValueRange{arith::AddFOp::create(ib, st[0],
                                                 weight(ib, laneSplit(ib, i)))
                               .getResult()});
      });
  r.total = src.rowReduce(
      butterflyReduce(b, sumLoop.getResult(0), /*isMax=*/false, 32),
      /*isMax=*/false);

  // The weighted sum with the lanes over the columns. The weights are known
  // up front, so nothing is carried from one split to the next but the sums:
  // the splits are unrolled so that their loads are in flight together.
  SmallVector<Value> init(perLane, zf);
  Value steps = arith::CeilDivSIOp::create(
      b, src.splits, arith::MulIOp::create(b, src.wpr, constIdx(b, kUnroll)));
  auto loop = scf::ForOp::create(
      b, zero, steps, one, init,
      [&](OpBuilder &nb, Location l, Value i, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        Value k0 = arith::MulIOp::create(ib, i, constIdx(ib, kUnroll));
        SmallVector<Value> w, o;
        for (int64_t u = 0; u < kUnroll; ++u) {
          Value s = warpSplit(ib, arith::AddIOp::create(ib, k0, constIdx(ib, u)));
          w.push_back(weight(ib, s));
          Value sc = arith::MinSIOp::create(ib, s, lastSplit);
          for (int64_t c = 0; c < perLane; ++c)
            o.push_back(src.loadOut(ib, sc, colsC[c]));
        }
        SmallVector<Value> acc(st);
        for (int64_t u = 0; u < kUnroll; ++u)
          for (int64_t c = 0; c < perLane; ++c)
            acc[c] = fmaF32(ib, o[u * perLane + c], w[u], acc[c]);
        scf::YieldOp::create(ib, acc);
      });
  r.acc.assign(loop.getResults().begin(), loop.getResults().end());
  return r;
}

gpu::GPUFuncOp gpu_lowering::buildSplitKVCombineKernel(
    OpBuilder &ob, Location loc, gpu::GPUModuleOp module,
    const MemrefKernelSpec &spec, ArrayRef<Type> argTypes) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type f32 = b.getF32Type();
  const int64_t Dv = spec.dv, W = kSplitKVCombineWarps;
  const int64_t perLane = llvm::divideCeil(Dv, 32);
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  // Per warp: its statistic, and its share of the weighted sum.
  SmallVector<Type> workgroup = {
      MemRefType::get({W}, f32, MemRefLayoutAttrInterface(), wg),
      MemRefType::get({W, perLane * 32}, f32, MemRefLayoutAttrInterface(), wg)};
  gpu::GPUFuncOp fn =
      createMemrefKernelFunc(b, argTypes, workgroup, {}, 32 * W);
  fn.setName("combine");
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value stat = fn.getWorkgroupAttributions()[0];
  Value part = fn.getWorkgroupAttributions()[1];
  Value oPart = entry.getArgument(0);   // [splits, bh·Lq, Dv] f32
  Value lsePart = entry.getArgument(1); // [splits, bh·Lq]
  Value out = entry.getArgument(2);     // [bh, Lq, Dv]
  unsigned a = 3;
  Value lse = spec.hasLse ? entry.getArgument(a++) : Value();    // [bh, Lq]
  Value sinks = spec.hasSinks ? entry.getArgument(a++) : Value(); // [Hq]
  Value wpr = entry.getArgument(a);                               // warps per row

  // Warp w of the block serves row block·(W / wpr) + w / wpr and, of its
  // splits, those ≡ w mod wpr. Every thread reaches the barriers; only
  // rows that exist store.
  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = arith::DivUIOp::create(b, tid, constIdx(b, 32));
  Value lane = arith::RemUIOp::create(b, tid, constIdx(b, 32));
  Value rowsPerBlock = arith::DivUIOp::create(b, constIdx(b, W), wpr);
  Value sub = arith::RemUIOp::create(b, warp, wpr);
  Value firstWarp = arith::SubIOp::create(b, warp, sub);
  Value rowsTotal = memref::DimOp::create(b, lsePart, 1);
  Value splits = memref::DimOp::create(b, lsePart, 0);
  Value row = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
                            rowsPerBlock),
      arith::DivUIOp::create(b, warp, wpr));
  Value inRow = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, row, rowsTotal);
  Value rowC = arith::MinSIOp::create(
      b, row, arith::SubIOp::create(b, rowsTotal, one));
  SmallVector<Value> cols;
  for (int64_t i = 0; i < perLane; ++i)
    cols.push_back(arith::AddIOp::create(b, lane, constIdx(b, 32 * i)));
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value zf = constF32(b, 0.0);

  // A statistic of the row's warps: each warp's value through shared memory,
  // reduced over the row's wpr warps.
  auto rowReduce = [&](Value v, bool isMax) {
    memref::StoreOp::create(b, v, stat, ValueRange{warp});
    gpu::BarrierOp::create(b);
    Value r = v;
    for (int64_t w = 0; w < W; ++w) {
      Value wIdx = arith::AddIOp::create(b, firstWarp, constIdx(b, w));
      Value mine = arith::CmpIOp::create(
          b, arith::CmpIPredicate::slt, constIdx(b, w), wpr);
      Value x = memref::LoadOp::create(
          b, stat, ValueRange{arith::MinSIOp::create(b, wIdx, constIdx(b, W - 1))});
      x = arith::SelectOp::create(b, mine, x, isMax ? negInf : zf);
      if (w == 0)
        r = x;
      else
        r = isMax ? arith::MaxNumFOp::create(b, r, x).getResult()
                  : arith::AddFOp::create(b, r, x).getResult();
    }
    gpu::BarrierOp::create(b);
    return r;
  };
  SplitRowSource src;
  src.splits = splits;
  src.sub = sub;
  src.wpr = wpr;
  src.lane = lane;
  src.dv = Dv;
  auto loadLse = [&](ImplicitLocOpBuilder &ib, Value s) -> Value {
    return memref::LoadOp::create(ib, lsePart, ValueRange{s, rowC});
  };
  auto loadOut = [&](ImplicitLocOpBuilder &ib, Value s, Value col) -> Value {
    return memref::LoadOp::create(ib, oPart, ValueRange{s, rowC, col});
  };
  src.loadLse = loadLse;
  src.loadOut = loadOut;
  src.rowReduce = rowReduce;
  SplitRowMerge merged = mergeSplitRow(b, src);

  // The row's first warp adds the other warps' shares.
  for (int64_t c = 0; c < perLane; ++c)
    memref::StoreOp::create(b, merged.acc[c], part,
                            ValueRange{warp, cols[c]});
  gpu::BarrierOp::create(b);
  Value writer = arith::AndIOp::create(
      b, inRow, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, sub, zero));
  auto ifWriter = scf::IfOp::create(b, writer, /*withElse=*/false);
  b.setInsertionPointToStart(ifWriter.thenBlock());
  SmallVector<Value> acc;
  for (int64_t c = 0; c < perLane; ++c) {
    Value col = cols[c];
    Value a = memref::LoadOp::create(b, part, ValueRange{warp, col});
    for (int64_t w = 1; w < W; ++w) {
      Value mine = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                         constIdx(b, w), wpr);
      Value src = arith::MinSIOp::create(
          b, arith::AddIOp::create(b, warp, constIdx(b, w)), constIdx(b, W - 1));
      Value x = memref::LoadOp::create(b, part, ValueRange{src, col});
      a = arith::AddFOp::create(b, a, arith::SelectOp::create(b, mine, x, zf));
    }
    acc.push_back(a);
  }
  Value lq = memref::DimOp::create(b, out, 1);
  Value bh = arith::DivUIOp::create(b, row, lq);
  // The partials saw keys only; the sink is counted here, once per row.
  RowResult res = finishRow(b, merged.top.m, merged.total, spec.hasLse,
                            sinks ? sinkLog2(b, sinks, bh) : Value());
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
    Value x = fromF32(b, arith::MulFOp::create(b, acc[i], res.inv), spec.oElem);
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
