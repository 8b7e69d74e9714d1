//===- SplitKVCombine.cpp - merge the split-KV partials by their LSE ------===//
//
// The second kernel of a split decode: each split wrote its row's output
// normalised over its own keys and that range's log-sum-exp; the exact
// result is their LSE-weighted sum (mergePartial, the softmax recurrence
// applied to whole partials). One warp per row, each lane a strided set of
// columns, the splits walked once: the traffic is splits × rows × Dv f32,
// small beside the K/V the first kernel read.
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
  Value zf = constF32(b, 0.0), onef = constF32(b, 1.0);
  Value log2e = constF32(b, 1.4426950408889634);
  SmallVector<Value> init = {negInf, zf};
  init.append(perLane, zf);
  auto loop = scf::ForOp::create(
      b, zero, splits, one, init,
      [&](OpBuilder &nb, Location l, Value s, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        Value x = memref::LoadOp::create(ib, lsePart, ValueRange{s, row});
        PartialMerge pm = mergePartial(ib, st[0], st[1],
                                       arith::MulFOp::create(ib, x, log2e),
                                       onef);
        SmallVector<Value> next = {pm.m, pm.l};
        for (int64_t i = 0; i < perLane; ++i) {
          Value o = memref::LoadOp::create(ib, oPart,
                                           ValueRange{s, row, colsC[i]});
          next.push_back(math::FmaOp::create(
              ib, o, pm.beta, arith::MulFOp::create(ib, st[2 + i], pm.alpha)));
        }
        scf::YieldOp::create(ib, next);
      });
  ValueRange fin = loop.getResults();
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
