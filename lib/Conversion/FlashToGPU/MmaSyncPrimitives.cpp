//===- MmaSyncPrimitives.cpp - mma.sync, ldmatrix and the Q fragments -----===//
#include "MmaSyncPrimitives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

LogicalResult gpu_lowering::mmaSyncShapeSupported(Type q, Type k, Type v,
                                                  int64_t d, int64_t dv,
                                                  std::string &why) {
  if ((!q.isBF16() && !q.isF16()) || k != q || v != q) {
    why = "query, key and value must all be bf16 or all f16";
    return failure();
  }
  // D is the k of the QKᵀ mma (steps of 16), Dv the n of the PV mma (8).
  if (ShapedType::isDynamic(d) || ShapedType::isDynamic(dv) || d % 16 ||
      dv % 8 || d > 256 || dv > 256) {
    llvm::raw_string_ostream(why)
        << "head dims must be D a multiple of 16 and Dv of 8, both up to "
           "256, got D = "
        << d << ", Dv = " << dv;
    return failure();
  }
  return success();
}

bool gpu_lowering::mmaSyncSupports(AttentionOp op, std::string &why) {
  int64_t nb = op.getNumBatchDims();
  return succeeded(mmaSyncShapeSupported(
      op.getQueryType().getElementType(), op.getKeyType().getElementType(),
      op.getValueType().getElementType(), op.getQueryType().getDimSize(nb + 1),
      op.getValueType().getDimSize(nb + 1), why));
}

MmaLane gpu_lowering::mmaLane(ImplicitLocOpBuilder &b) {
  MmaLane l;
  l.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  l.warp = arith::DivUIOp::create(b, l.tid, constIdx(b, 32));
  l.lane = arith::RemUIOp::create(b, l.tid, constIdx(b, 32));
  l.g = arith::DivUIOp::create(b, l.lane, constIdx(b, 4));
  l.t2 = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, l.lane, constIdx(b, 4)), constIdx(b, 2));
  l.lane8 = arith::RemUIOp::create(b, l.lane, constIdx(b, 8));
  l.laneHalf8 = arith::MulIOp::create(
      b,
      arith::RemUIOp::create(
          b, arith::DivUIOp::create(b, l.lane, constIdx(b, 8)), constIdx(b, 2)),
      constIdx(b, 8));
  l.lane16 = arith::RemUIOp::create(b, l.lane, constIdx(b, 16));
  return l;
}

Value gpu_lowering::packPair(ImplicitLocOpBuilder &b, Value lo, Value hi) {
  auto pair = VectorType::get({2}, lo.getType());
  Value v = vector::FromElementsOp::create(b, pair, ValueRange{lo, hi});
  Value c = vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                      v);
  return vector::ExtractOp::create(b, c, ArrayRef<int64_t>{0});
}

/// `tiles` 8×8 matrices of 16-bit elements with one ldmatrix, as one 32-bit
/// register per matrix.
static SmallVector<Value, 4> ldmatrix(ImplicitLocOpBuilder &b, Value tile,
                                      ValueRange indices, bool transpose,
                                      int64_t tiles) {
  Type elem = cast<MemRefType>(tile.getType()).getElementType();
  Value m = nvgpu::LdMatrixOp::create(
      b, VectorType::get({tiles, 2}, elem), tile, indices,
      b.getBoolAttr(transpose), b.getI32IntegerAttr(tiles));
  SmallVector<Value, 4> regs;
  for (int64_t i = 0; i < tiles; ++i) {
    Value v = vector::ExtractOp::create(b, m, ArrayRef<int64_t>{i});
    Value c = vector::BitCastOp::create(
        b, VectorType::get({1}, b.getI32Type()), v);
    regs.push_back(vector::ExtractOp::create(b, c, ArrayRef<int64_t>{0}));
  }
  return regs;
}

SmallVector<Value, 2> gpu_lowering::ldmatrixB(ImplicitLocOpBuilder &b,
                                              Value tile, ValueRange indices,
                                              bool transpose) {
  SmallVector<Value, 4> regs = ldmatrix(b, tile, indices, transpose, 2);
  return SmallVector<Value, 2>(regs.begin(), regs.end());
}

SmallVector<Value, 4> gpu_lowering::ldmatrixX4(ImplicitLocOpBuilder &b,
                                               Value tile, ValueRange indices,
                                               bool transpose) {
  return ldmatrix(b, tile, indices, transpose, 4);
}

SmallVector<Value, 4> gpu_lowering::mmaSync(ImplicitLocOpBuilder &b, Type elem,
                                            ArrayRef<Value> a,
                                            ArrayRef<Value> bRegs,
                                            ArrayRef<Value> acc) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  NVVM::MMATypes t = elem.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  // NVVM wants f16 operands as vector<2xf16> and bf16 ones as i32.
  auto operand = [&](Value r) -> Value {
    if (elem.isBF16())
      return r;
    return LLVM::BitcastOp::create(b, VectorType::get({2}, elem), r);
  };
  SmallVector<Value> av, bv;
  for (Value r : a)
    av.push_back(operand(r));
  for (Value r : bRegs)
    bv.push_back(operand(r));
  auto resTy = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  Value r = NVVM::MmaOp::create(
      b, resTy, av, bv, acc, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{t, t},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value, 4> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, r, ArrayRef<int64_t>{i}));
  return out;
}

void gpu_lowering::mmaSyncPair(ImplicitLocOpBuilder &b, Type elem,
                               ArrayRef<Value> a, ArrayRef<Value> bPair,
                               SmallVectorImpl<Value> &acc, int64_t n16) {
  for (int64_t h = 0; h < 2; ++h) {
    int64_t n8 = 2 * n16 + h;
    SmallVector<Value, 4> c =
        mmaSync(b, elem, a, bPair.slice(2 * h, 2),
                ArrayRef<Value>(acc).slice(4 * n8, 4));
    std::copy(c.begin(), c.end(), acc.begin() + 4 * n8);
  }
}

SmallVector<Value> gpu_lowering::loadQueryFragments(ImplicitLocOpBuilder &b,
                                                    Value q, const Value bh[2],
                                                    const Value rows[2],
                                                    Value t2, int64_t d,
                                                    const RowPlace &place) {
  Value one = constIdx(b, 1);
  SmallVector<Value> frag;
  SmallVector<Value, 2> at[2] = {place.rows(b, bh[0], rows[0]),
                                 place.rows(b, bh[1], rows[1])};
  for (int64_t ks = 0; ks < d / 16; ++ks)
    for (int64_t r = 0; r < 4; ++r) {
      int64_t h = r % 2;
      Value c = arith::AddIOp::create(b, t2, constIdx(b, 16 * ks + 8 * (r / 2)));
      Value lo = memref::LoadOp::create(b, q, ValueRange{at[h][0], at[h][1], c});
      Value hi = memref::LoadOp::create(
          b, q, ValueRange{at[h][0], at[h][1], arith::AddIOp::create(b, c, one)});
      frag.push_back(packPair(b, lo, hi));
    }
  return frag;
}
