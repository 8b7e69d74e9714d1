//===- GradRowKernels.cpp - the per-row kernels around the backward -------===//
//
// Before the key-block kernel (GradKernel.cpp), `prep` turns the forward's
// row statistics into what it reads per query column: delta =
// rowsum(dO ∘ O), the softmax's term of dS, and lse·log2 e, with +inf for a
// row that saw no key (lse = -inf) and for the padding up to whole blocks so
// that P = 2^(s - lse·log2 e) is 0 there without a test; it also zeroes the
// f32 dQ accumulator the key blocks add to. After it, `dq` scales the
// accumulator by the op's scale and rounds it to dq's element type. Both
// are bandwidth kernels over Lq × (Dv or D), small beside the key-block
// kernel's Lq × Lk work.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
constexpr int64_t kPrepWarps = 4; // one row per warp
} // namespace

gpu::GPUFuncOp gpu_lowering::buildGradPrepKernel(OpBuilder &ob, Location loc,
                                                 gpu::GPUModuleOp module,
                                                 ArrayRef<Type> argTypes) {
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type f32 = b.getF32Type();
  gpu::GPUFuncOp fn =
      createMemrefKernelFunc(b, argTypes, {}, {}, 32 * kPrepWarps, "prep");
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value o = entry.getArgument(0), dO = entry.getArgument(1),
        lse = entry.getArgument(2), lse2 = entry.getArgument(3),
        delta = entry.getArgument(4), dqAcc = entry.getArgument(5),
        bhCount = entry.getArgument(6);
  Value locks = entry.getNumArguments() > 7 ? entry.getArgument(7) : Value();
  Value zero = constIdx(b, 0), c32 = constIdx(b, 32);
  Value bh = batchHeadBlock(b, bhCount);
  Block *body = b.getInsertionBlock();
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = arith::DivUIOp::create(b, tid, c32);
  Value lane = arith::RemUIOp::create(b, tid, c32);
  Value row = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
                            constIdx(b, kPrepWarps)),
      warp);
  Value lq = memref::DimOp::create(b, o, 1);
  Value dv = memref::DimOp::create(b, o, 2);
  Value d = memref::DimOp::create(b, dqAcc, 2);
  Value padded = memref::DimOp::create(b, lse2, 1);
  Value zf = constF32(b, 0.0);
  Value inf = constF32(b, std::numeric_limits<double>::infinity());

  auto ifPadded = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, row, padded),
      /*withElse=*/false);
  b.setInsertionPointToStart(ifPadded.thenBlock());
  {
    auto zeroRow = scf::ForOp::create(b, lane, d, c32);
    OpBuilder::InsertionGuard gd(b);
    b.setInsertionPointToStart(zeroRow.getBody());
    memref::StoreOp::create(b, zf, dqAcc,
                            ValueRange{bh, row, zeroRow.getInductionVar()});
  }
  Value real = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, row, lq);
  auto ifReal = scf::IfOp::create(b, TypeRange{f32, f32}, real,
                                  /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard gd(b);
    b.setInsertionPointToStart(ifReal.thenBlock());
    auto dot = scf::ForOp::create(
        b, lane, dv, c32, ValueRange{zf},
        [&](OpBuilder &nb, Location l, Value e, ValueRange acc) {
          ImplicitLocOpBuilder ib(l, nb);
          auto load = [&](Value m) -> Value {
            Value x = memref::LoadOp::create(ib, m, ValueRange{bh, row, e});
            return x.getType() == f32 ? x : arith::ExtFOp::create(ib, f32, x);
          };
          scf::YieldOp::create(
              ib, ValueRange{fmaF32(ib, load(dO), load(o), acc[0])});
        });
    Value sum = butterflyReduce(b, dot.getResult(0), /*isMax=*/false, 32);
    Value l = memref::LoadOp::create(b, lse, ValueRange{bh, row});
    Value none = arith::CmpFOp::create(
        b, arith::CmpFPredicate::OEQ, l,
        constF32(b, -std::numeric_limits<double>::infinity()));
    Value l2 = arith::SelectOp::create(
        b, none, inf, arith::MulFOp::create(b, l, constF32(b, M_LOG2E)));
    scf::YieldOp::create(b, ValueRange{sum, l2});
    b.setInsertionPointToStart(ifReal.elseBlock());
    scf::YieldOp::create(b, ValueRange{zf, inf});
  }
  auto ifFirst = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, zero),
      /*withElse=*/false);
  b.setInsertionPointToStart(ifFirst.thenBlock());
  memref::StoreOp::create(b, ifReal.getResult(0), delta, ValueRange{bh, row});
  memref::StoreOp::create(b, ifReal.getResult(1), lse2, ValueRange{bh, row});
  if (locks)
    memref::StoreOp::create(b, constI32(b, 0), locks, ValueRange{bh, row});
  b.setInsertionPointToEnd(body);
  gpu::ReturnOp::create(b);
  return fn;
}

gpu::GPUFuncOp gpu_lowering::buildGradDqKernel(OpBuilder &ob, Location loc,
                                               gpu::GPUModuleOp module,
                                               double scale,
                                               ArrayRef<Type> argTypes) {
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type f32 = b.getF32Type();
  constexpr int64_t kVec = 4, kThreads = kGradDqPerBlock / kVec;
  gpu::GPUFuncOp fn =
      createMemrefKernelFunc(b, argTypes, {}, {}, kThreads, "dq");
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value acc = entry.getArgument(0), dq = entry.getArgument(1),
        bhCount = entry.getArgument(2);
  Type elem = cast<MemRefType>(dq.getType()).getElementType();
  Value bh = batchHeadBlock(b, bhCount);
  Block *body = b.getInsertionBlock();
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lq = memref::DimOp::create(b, dq, 1);
  Value d = memref::DimOp::create(b, dq, 2);
  // Four consecutive elements of a row per thread (D is a multiple of 16).
  Value e = arith::MulIOp::create(
      b,
      arith::AddIOp::create(
          b,
          arith::MulIOp::create(
              b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
              constIdx(b, kThreads)),
          tid),
      constIdx(b, kVec));
  auto ifIn = scf::IfOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, e,
                            arith::MulIOp::create(b, lq, d)),
      /*withElse=*/false);
  b.setInsertionPointToStart(ifIn.thenBlock());
  Value row = arith::DivUIOp::create(b, e, d);
  Value col = arith::RemUIOp::create(b, e, d);
  Value x = vector::LoadOp::create(b, VectorType::get({kVec}, f32), acc,
                                   ValueRange{bh, row, col});
  Value s = vector::BroadcastOp::create(b, VectorType::get({kVec}, f32),
                                        constF32(b, scale));
  x = arith::MulFOp::create(b, x, s);
  if (elem != f32)
    x = arith::TruncFOp::create(b, VectorType::get({kVec}, elem), x);
  vector::StoreOp::create(b, x, dq, ValueRange{bh, row, col});
  b.setInsertionPointToEnd(body);
  gpu::ReturnOp::create(b);
  return fn;
}

gpu::GPUFuncOp gpu_lowering::buildRoundKernel(OpBuilder &ob, Location loc,
                                              gpu::GPUModuleOp module,
                                              ArrayRef<Type> argTypes) {
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  gpu::GPUFuncOp fn =
      createMemrefKernelFunc(b, argTypes, {}, {}, kRoundThreads, "round");
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value src = entry.getArgument(0), dst = entry.getArgument(1);
  Type elem = cast<MemRefType>(dst.getType()).getElementType();
  Value e = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
                            constIdx(b, kRoundThreads)),
      gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  auto ifIn = scf::IfOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, e,
                            memref::DimOp::create(b, dst, 0)),
      /*withElse=*/false);
  b.setInsertionPointToStart(ifIn.thenBlock());
  Value x = memref::LoadOp::create(b, src, ValueRange{e});
  memref::StoreOp::create(b, arith::TruncFOp::create(b, elem, x), dst,
                          ValueRange{e});
  b.setInsertionPointAfter(ifIn);
  gpu::ReturnOp::create(b);
  return fn;
}
