//===- UnpackVarlenAttention.cpp - varlen attention as a loop of attentions ===//
//
// The CPU path (and the reference every GPU result is checked against)
// needs no varlen kernel: a flash.varlen_attention is, sequence by
// sequence, the flash.attention of that sequence's rows of the packed
// tensors. This pass writes exactly that, as an scf.for over the sequences
// carrying the output (and LSE) tensors:
//
//   q0, q1 = clamp(cu_seqlens_q[b], 0, Tq), clamp(cu_seqlens_q[b+1], q0, Tq)
//   k0, k1 = the same over Tk
//   o, lse = flash.attention(query[q0:q1] as [Hq, Lq, D],
//                            key[k0:k1], value[k0:k1] as [Hkv, Lk, D / Dv])
//   out[q0:q1] = o as [Lq, Hq, Dv];  lse[:, q0:q1] = lse
//
// Each attention has dynamic Lq and Lk and is tiled by the pipeline like any
// other, so the sequences never see each other's keys and nothing is
// padded. Rows no sequence covers keep the init's values.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHUNPACKVARLENATTENTIONPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;

/// `t` [T, H, W] transposed to [H, T, W] (or back: the permutation is its
/// own inverse).
static Value swapTokensAndHeads(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, t);
  std::swap(sizes[0], sizes[1]);
  Value empty = tensor::EmptyOp::create(b, loc, sizes, type.getElementType());
  return linalg::TransposeOp::create(b, loc, t, empty,
                                     ArrayRef<int64_t>{1, 0, 2})
      .getResult()[0];
}

/// [lo, hi) of sequence `bi` in a packed tensor of `total` tokens, the
/// offsets clamped so that any values read inside it.
static std::pair<Value, Value> sequenceRange(OpBuilder &b, Location loc,
                                             Value cu, Value bi, Value total) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto read = [&](Value i) -> Value {
    Value x = tensor::ExtractOp::create(b, loc, cu, ValueRange{i});
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
  };
  auto clamp = [&](Value x, Value lo) -> Value {
    return arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, x, lo),
                                  total);
  };
  Value lo = clamp(read(bi), zero);
  Value hi = clamp(read(arith::AddIOp::create(b, loc, bi, one)), lo);
  return {lo, hi};
}

FailureOr<SmallVector<Value>>
flash::unpackVarlenAttention(OpBuilder &b, VarlenAttentionOp op) {
  Location loc = op.getLoc();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  Value cuq = op.getCuSeqlensQ(), cuk = op.getCuSeqlensK();
  auto dim = [&](Value t, int64_t d) {
    return getValueOrCreateConstantIndexOp(b, loc,
                                           tensor::getMixedSize(b, loc, t, d));
  };
  Value tq = dim(q, 0), tk = dim(k, 0);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value numSeq = arith::MaxSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, dim(cuq, 0), one), zero);
  bool withLse = op.hasLse();
  Type outElem = op.getOutputType().getElementType();

  auto loop = scf::ForOp::create(
      b, loc, zero, numSeq, one, op.getInits(),
      [&](OpBuilder &nb, Location l, Value bi, ValueRange acc) {
        auto [q0, q1] = sequenceRange(nb, l, cuq, bi, tq);
        auto [k0, k1] = sequenceRange(nb, l, cuk, bi, tk);
        Value lq = arith::SubIOp::create(nb, l, q1, q0);
        Value lk = arith::SubIOp::create(nb, l, k1, k0);
        auto rows = [&](Value t, Value start, Value len) {
          SmallVector<OpFoldResult> offsets = {start, nb.getIndexAttr(0),
                                               nb.getIndexAttr(0)};
          SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(nb, l, t);
          sizes[0] = len;
          SmallVector<OpFoldResult> strides(3, nb.getIndexAttr(1));
          Value slice = tensor::ExtractSliceOp::create(nb, l, t, offsets,
                                                       sizes, strides);
          return swapTokensAndHeads(nb, l, slice);
        };
        Value qh = rows(q, q0, lq), kh = rows(k, k0, lk), vh = rows(v, k0, lk);
        SmallVector<OpFoldResult> oSizes = {
            tensor::getMixedSize(nb, l, q, 1), lq,
            tensor::getMixedSize(nb, l, v, 2)};
        SmallVector<Value> inits = {
            tensor::EmptyOp::create(nb, l, oSizes, outElem)};
        if (withLse)
          inits.push_back(tensor::EmptyOp::create(
              nb, l, ArrayRef<OpFoldResult>(oSizes).take_front(2),
              nb.getF32Type()));
        auto attn = AttentionOp::create(
            nb, l, TypeRange(ValueRange(inits)), qh, kh, vh, inits,
            /*captures=*/ValueRange(), op.getSinks(), /*offsets=*/ValueRange(),
            /*query_len=*/Value(), op.getScaleAttr(), op.getMaskAttr());
        Value o = swapTokensAndHeads(nb, l, attn.getResult(0));
        SmallVector<OpFoldResult> strides(3, nb.getIndexAttr(1));
        SmallVector<OpFoldResult> at = {q0, nb.getIndexAttr(0),
                                        nb.getIndexAttr(0)};
        SmallVector<Value> next = {tensor::InsertSliceOp::create(
            nb, l, o, acc[0], at, tensor::getMixedSizes(nb, l, o), strides)};
        if (withLse) {
          Value lse = attn.getResult(1);
          next.push_back(tensor::InsertSliceOp::create(
              nb, l, lse, acc[1],
              ArrayRef<OpFoldResult>{nb.getIndexAttr(0), q0},
              tensor::getMixedSizes(nb, l, lse),
              ArrayRef<OpFoldResult>(strides).take_front(2)));
        }
        scf::YieldOp::create(nb, l, next);
      });
  return SmallVector<Value>(loop.getResults());
}

namespace {
struct FlashUnpackVarlenAttentionPass
    : flash::impl::FlashUnpackVarlenAttentionPassBase<
          FlashUnpackVarlenAttentionPass> {
  void runOnOperation() override {
    SmallVector<VarlenAttentionOp> ops;
    getOperation()->walk([&](VarlenAttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (VarlenAttentionOp op : ops) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> results =
          unpackVarlenAttention(rewriter, op);
      if (failed(results))
        return signalPassFailure();
      rewriter.replaceOp(op, *results);
    }
  }
};
} // namespace
