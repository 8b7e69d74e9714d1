//===- UnpageAttention.cpp - paged attention as gather + flash.attention --===//
//
// The CPU path (and the reference every GPU result is checked against)
// does not need a paged kernel of its own: a flash.paged_attention is the
// flash.attention of the keys its block table names, with each sequence's
// length as a mask. This pass writes exactly that:
//
//   keys[b, h, j, :] = key_cache[page(b, j), j mod page_size, h, :]
//                      (one linalg.generic gather per cache, [B, Hkv,
//                      max_pages · page_size, D])
//   n[b]   = clamp(seq_lens[b], 0, capacity)     (0 for an empty pool)
//   off[b] = n[b] - Lq                           (where the diagonal sits)
//   flash.attention(q, keys, values) with a score_mod that sends a score to
//   -inf unless j < n[b] (and, for causal / window, the mask's bound at
//   offset off[b]), captures n and off after the op's own captures; the
//   op's own score_mod, if any, runs first on the same indices.
//
// The gather is O(cache) in memory, which is what a reference may cost; the
// attention after it is the fused one of the pipeline. A row that sees no
// key gives 0 and lse = -inf, as flash.attention defines.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHUNPAGEATTENTIONPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;

/// Size `d` of `t`: a constant when static.
static Value dim(OpBuilder &b, Location loc, Value t, int64_t d) {
  return getValueOrCreateConstantIndexOp(b, loc,
                                         tensor::getMixedSize(b, loc, t, d));
}

/// [B, Hkv, capacity, width] = cache[page(b, j), j mod S, h, :]; a pool of
/// no pages reads nothing (those keys are masked by n = 0 anyway).
static Value gatherPages(OpBuilder &b, Location loc, Value cache, Value table,
                         OpFoldResult batch, OpFoldResult capacity,
                         Value pageSize, Value numPages) {
  auto cacheType = cast<RankedTensorType>(cache.getType());
  SmallVector<OpFoldResult> shape = {batch,
                                     tensor::getMixedSize(b, loc, cache, 2),
                                     capacity,
                                     tensor::getMixedSize(b, loc, cache, 3)};
  Value empty =
      tensor::EmptyOp::create(b, loc, shape, cacheType.getElementType());
  auto id = AffineMap::getMultiDimIdentityMap(4, b.getContext());
  SmallVector<utils::IteratorType> par(4, utils::IteratorType::parallel);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value lastPage = arith::MaxSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, numPages, one), zero);
  Value anyPage = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                        numPages, zero);
  return linalg::GenericOp::create(
             b, loc, empty.getType(), ValueRange{}, ValueRange{empty},
             ArrayRef<AffineMap>{id}, par,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value bi = linalg::IndexOp::create(nb, l, 0);
               Value h = linalg::IndexOp::create(nb, l, 1);
               Value j = linalg::IndexOp::create(nb, l, 2);
               Value d = linalg::IndexOp::create(nb, l, 3);
               Value slot = arith::DivUIOp::create(nb, l, j, pageSize);
               Value row = arith::RemUIOp::create(nb, l, j, pageSize);
               Value entry = tensor::ExtractOp::create(nb, l, table,
                                                       ValueRange{bi, slot});
               Value page = arith::IndexCastOp::create(nb, l, nb.getIndexType(),
                                                       entry);
               page = arith::MinSIOp::create(
                   nb, l, arith::MaxSIOp::create(nb, l, page, zero), lastPage);
               auto read = scf::IfOp::create(
                   nb, l, anyPage,
                   [&](OpBuilder &tb, Location tl) {
                     Value x = tensor::ExtractOp::create(
                         tb, tl, cache, ValueRange{page, row, h, d});
                     scf::YieldOp::create(tb, tl, x);
                   },
                   [&](OpBuilder &eb, Location el) {
                     Value z = arith::ConstantOp::create(
                         eb, el, eb.getZeroAttr(cacheType.getElementType()));
                     scf::YieldOp::create(eb, el, z);
                   });
               linalg::YieldOp::create(nb, l, read.getResult(0));
             })
      .getResult(0);
}

/// An i64 [B] tensor whose element b is `fn(seq_lens[b])`.
static Value perSequence(OpBuilder &b, Location loc, Value lens,
                         OpFoldResult batch,
                         function_ref<Value(OpBuilder &, Location, Value)> fn) {
  Type i64 = b.getI64Type();
  Value empty =
      tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{batch}, i64);
  auto id = AffineMap::getMultiDimIdentityMap(1, b.getContext());
  return linalg::GenericOp::create(
             b, loc, empty.getType(), ValueRange{lens}, ValueRange{empty},
             ArrayRef<AffineMap>{id, id},
             SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value n = arith::ExtSIOp::create(nb, l, i64, args[0]);
               linalg::YieldOp::create(nb, l, fn(nb, l, n));
             })
      .getResult(0);
}

FailureOr<SmallVector<Value>> flash::unpageAttention(OpBuilder &b,
                                                     PagedAttentionOp op) {
  Location loc = op.getLoc();
  MaskAttr mask = op.getMaskOrNone();
  Value q = op.getQuery(), kc = op.getKeyCache(), vc = op.getValueCache();
  Value table = op.getBlockTable(), lens = op.getSeqLens();
  Type i64 = b.getI64Type();
  Type idx = b.getIndexType();

  OpFoldResult batch = tensor::getMixedSize(b, loc, q, 0);
  Value pageSize = dim(b, loc, kc, 1);
  Value numPages = dim(b, loc, kc, 0);
  int64_t maxPages = op.getBlockTableType().getDimSize(1);
  int64_t staticPage = op.getPageSize();
  OpFoldResult capacityOfr =
      !ShapedType::isDynamic(maxPages) && !ShapedType::isDynamic(staticPage)
          ? OpFoldResult(b.getIndexAttr(maxPages * staticPage))
          : OpFoldResult(arith::MulIOp::create(
                b, loc, dim(b, loc, table, 1), pageSize).getResult());
  Value capacity = getValueOrCreateConstantIndexOp(b, loc, capacityOfr);
  Value keys = gatherPages(b, loc, kc, table, batch, capacityOfr, pageSize,
                           numPages);
  Value values = gatherPages(b, loc, vc, table, batch, capacityOfr, pageSize,
                             numPages);

  // n = clamp(seq_lens, 0, capacity), 0 without pages; off = n - Lq.
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value limit = arith::SelectOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, numPages, zero),
      capacity, zero);
  Value limit64 = arith::IndexCastOp::create(b, loc, i64, limit);
  Value lq64 = arith::IndexCastOp::create(b, loc, i64, dim(b, loc, q, 2));
  auto clampLen = [&](OpBuilder &nb, Location l, Value n) -> Value {
    Value z = arith::ConstantIntOp::create(nb, l, i64, 0);
    return arith::MinSIOp::create(nb, l, arith::MaxSIOp::create(nb, l, n, z),
                                  limit64);
  };
  Value lengths = perSequence(b, loc, lens, batch, clampLen);
  Value offsets = perSequence(b, loc, lens, batch,
                              [&](OpBuilder &nb, Location l, Value n) -> Value {
                                return arith::SubIOp::create(
                                    nb, l, clampLen(nb, l, n), lq64);
                              });

  SmallVector<Value> captures(op.getCaptures());
  captures.append({lengths, offsets});
  auto attn = AttentionOp::create(
      b, loc, TypeRange(op.getInits()), q, keys, values, op.getInits(),
      captures, op.getSinks(), /*offsets=*/ValueRange(),
      /*query_len=*/Value(), op.getScaleAttr(), MaskAttr());
  // score_mod(s, b, h, i, j, caps..., n, off): the op's score_mod of s
  // where key j exists and the mask allows it at this sequence's diagonal,
  // else -inf.
  Type f32 = b.getF32Type();
  SmallVector<Type> argTypes = {f32, idx, idx, idx, idx};
  for (Value c : captures)
    argTypes.push_back(c.getType());
  Region &region = attn.getScoreMod();
  Block *body = b.createBlock(&region, region.end(), argTypes,
                              SmallVector<Location>(argTypes.size(), loc));
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(body);
    Value s = body->getArgument(0), bi = body->getArgument(1),
          i = body->getArgument(3), j = body->getArgument(4);
    unsigned numOwn = op.getCaptures().size();
    if (op.hasScoreMod()) {
      IRMapping mapping;
      s = cloneScoreMod(b, loc, op.getScoreMod(), mapping, s,
                        body->getArguments().slice(1, 2), i, j,
                        body->getArguments().slice(5, numOwn));
    }
    Value n = tensor::ExtractOp::create(b, loc, body->getArgument(5 + numOwn),
                                        ValueRange{bi});
    Value off = tensor::ExtractOp::create(b, loc, body->getArgument(6 + numOwn),
                                          ValueRange{bi});
    Value j64 = arith::IndexCastOp::create(b, loc, i64, j);
    IndexInterval keys = buildVisibleKeys(
        b, loc, mask, arith::IndexCastOp::create(b, loc, i64, i), off);
    Value ok =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, j64, n);
    if (keys.hi)
      ok = arith::AndIOp::create(
          b, loc, ok,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, j64,
                                keys.hi));
    if (keys.lo)
      ok = arith::AndIOp::create(
          b, loc, ok,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, j64,
                                keys.lo));
    Value negInf = arith::ConstantOp::create(
        b, loc,
        b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
    Value r = arith::SelectOp::create(b, loc, ok, s, negInf);
    YieldOp::create(b, loc, r);
  }
  return SmallVector<Value>(attn->getResults());
}

namespace {
struct FlashUnpageAttentionPass
    : flash::impl::FlashUnpageAttentionPassBase<FlashUnpageAttentionPass> {
  void runOnOperation() override {
    SmallVector<PagedAttentionOp> ops;
    getOperation()->walk([&](PagedAttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (PagedAttentionOp op : ops) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> results = unpageAttention(rewriter, op);
      if (failed(results))
        return signalPassFailure();
      rewriter.replaceOp(op, *results);
    }
  }
};
} // namespace
