//===- DecomposeAttention.cpp - flash.attention as unfused linalg ---------===//
//
// The reference meaning of flash.attention: materialise the Lq x Lk score
// matrix and run the textbook softmax on it. Fused lowerings are tested
// against this, so it favours obviousness over speed.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "AttentionMath.h"
#include "LinalgBuilder.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHDECOMPOSEATTENTIONPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;

namespace {
/// Shapes and index values shared by the stages of the decomposition.
struct Decomposer : LinalgBuilder {
  AttentionOp op;
  int64_t nb; // number of batch dims
  SmallVector<OpFoldResult> qShape, kShape, vShape;

  Decomposer(OpBuilder &b, AttentionOp op)
      : LinalgBuilder(b, op.getLoc()), op(op), nb(op.getNumBatchDims()) {
    qShape = tensor::getMixedSizes(b, loc, op.getQuery());
    kShape = tensor::getMixedSizes(b, loc, op.getKey());
    vShape = tensor::getMixedSizes(b, loc, op.getValue());
  }

  Value broadcastHeads(Value kv, ArrayRef<OpFoldResult> kvShape) {
    return LinalgBuilder::broadcastHeads(kv, kvShape, nb,
                                         nb ? qShape[nb - 1] : OpFoldResult());
  }

  FailureOr<SmallVector<Value>> run() {
    Value key = broadcastHeads(op.getKey(), kShape);
    Value value = broadcastHeads(op.getValue(), vShape);
    OpFoldResult lqF = qShape[nb], lkF = kShape[nb];
    SmallVector<OpFoldResult> sShape(qShape.begin(), qShape.begin() + nb);
    sShape.push_back(lqF);
    sShape.push_back(lkF);
    SmallVector<OpFoldResult> rowShape(qShape.begin(), qShape.begin() + nb + 1);

    // S[b, i, j] = sum_d Q[b, i, d] * K[b, j, d]   loops (b.., i, j, d)
    int64_t n = nb + 3;
    SmallVector<int64_t> bd = range(0, nb);
    auto withBatch = [&](std::initializer_list<int64_t> tail) {
      SmallVector<int64_t> dims(bd);
      dims.append(tail.begin(), tail.end());
      return dims;
    };
    int64_t i = nb, j = nb + 1, d = nb + 2;
    Value scores = filled(sShape, 0.0);
    scores = linalg::GenericOp::create(
                 b, loc, scores.getType(), ValueRange{op.getQuery(), key},
                 ValueRange{scores},
                 ArrayRef<AffineMap>{map(n, withBatch({i, d})),
                                     map(n, withBatch({j, d})),
                                     map(n, withBatch({i, j}))},
                 iterators(nb + 2, 1),
                 [&](OpBuilder &nb_, Location l, ValueRange args) {
                   Value prod = arith::MulFOp::create(
                       nb_, l, toF32(nb_, l, args[0]), toF32(nb_, l, args[1]));
                   Value acc = arith::AddFOp::create(nb_, l, args[2], prod);
                   linalg::YieldOp::create(nb_, l, acc);
                 })
                 .getResult(0);

    // s = mask(score_mod(scale * s, indices))
    int64_t sRank = nb + 2;
    Value lq = getAlignmentQueryLength(
        op, getValueOrCreateConstantIndexOp(b, loc, lqF));
    Value lk = getValueOrCreateConstantIndexOp(b, loc, lkF);
    MaskAttr mask = op.getMaskOrNone();
    float scaleValue = op.getScale().convertToFloat();
    scores =
        linalg::GenericOp::create(
            b, loc, scores.getType(), ValueRange{}, ValueRange{scores},
            ArrayRef<AffineMap>{map(sRank, range(0, sRank))}, iterators(sRank),
            [&](OpBuilder &nested, Location l, ValueRange args) {
              Value scale = arith::ConstantOp::create(
                  nested, l, nested.getF32FloatAttr(scaleValue));
              Value s = arith::MulFOp::create(nested, l, args[0], scale);
              SmallVector<Value> local;
              for (int64_t dim = 0; dim <= nb; ++dim)
                local.push_back(linalg::IndexOp::create(nested, l, dim));
              // (batch..., i) of a tile are shifted to the op it was cut
              // from; the key column is never tiled.
              SmallVector<Value> idx =
                  buildAbsoluteIndices(nested, l, op, local);
              idx.push_back(linalg::IndexOp::create(nested, l, nb + 1));
              if (op.hasScoreMod())
                s = buildScoreMod(nested, op, s,
                                  ArrayRef<Value>(idx).take_front(nb),
                                  idx[nb], idx[nb + 1]);
              if (Value allowed = buildMaskPredicate(nested, l, mask, idx[nb],
                                                     idx[nb + 1], lq, lk)) {
                Value ninf = arith::ConstantOp::create(
                    nested, l,
                    nested.getF32FloatAttr(
                        -std::numeric_limits<float>::infinity()));
                s = arith::SelectOp::create(nested, l, allowed, s, ninf);
              }
              linalg::YieldOp::create(nested, l, s);
            })
            .getResult(0);

    // Row max and row sum over j: loops (b.., i, j).
    SmallVector<int64_t> rowDims = range(0, nb + 1);
    AffineMap sMap = map(sRank, range(0, sRank));
    AffineMap rowMap = map(sRank, rowDims);
    // A sink is one more score per row, of a key whose value is zero: it
    // starts the max, and its exp starts the sum.
    Value sinkRows;
    if (Value sinks = op.getSinks())
      sinkRows =
          linalg::GenericOp::create(
              b, loc, filled(rowShape, 0.0).getType(), ValueRange{},
              ValueRange{filled(rowShape, 0.0)},
              ArrayRef<AffineMap>{map(nb + 1, range(0, nb + 1))},
              iterators(nb + 1),
              [&](OpBuilder &nested, Location l, ValueRange) {
                SmallVector<Value> local;
                for (int64_t dim = 0; dim <= nb; ++dim)
                  local.push_back(linalg::IndexOp::create(nested, l, dim));
                SmallVector<Value> idx =
                    buildAbsoluteIndices(nested, l, op, local);
                linalg::YieldOp::create(
                    nested, l,
                    buildSinkLogit(nested, l, sinks,
                                   ArrayRef<Value>(idx).take_front(nb)));
              })
              .getResult(0);
    Value rowMax = sinkRows ? sinkRows
                            : filled(rowShape,
                                     -std::numeric_limits<double>::infinity());
    rowMax = linalg::GenericOp::create(
                 b, loc, rowMax.getType(), ValueRange{scores},
                 ValueRange{rowMax}, ArrayRef<AffineMap>{sMap, rowMap},
                 iterators(nb + 1, 1),
                 [&](OpBuilder &nested, Location l, ValueRange args) {
                   Value m =
                       arith::MaximumFOp::create(nested, l, args[0], args[1]);
                   linalg::YieldOp::create(nested, l, m);
                 })
                 .getResult(0);

    // p = exp(s - max); a row whose max is -inf is fully masked: p = 0.
    Value probs =
        linalg::GenericOp::create(
            b, loc, scores.getType(), ValueRange{rowMax}, ValueRange{scores},
            ArrayRef<AffineMap>{rowMap, sMap}, iterators(sRank),
            [&](OpBuilder &nested, Location l, ValueRange args) {
              linalg::YieldOp::create(
                  nested, l, buildRowExp(nested, l, args[1], args[0]));
            })
            .getResult(0);

    Value rowSum = filled(rowShape, 0.0);
    if (sinkRows) {
      AffineMap id = map(nb + 1, range(0, nb + 1));
      rowSum = linalg::GenericOp::create(
                   b, loc, rowSum.getType(), ValueRange{sinkRows, rowMax},
                   ValueRange{rowSum}, ArrayRef<AffineMap>{id, id, id},
                   iterators(nb + 1),
                   [&](OpBuilder &nested, Location l, ValueRange args) {
                     linalg::YieldOp::create(
                         nested, l, buildRowExp(nested, l, args[0], args[1]));
                   })
                   .getResult(0);
    }
    rowSum = linalg::GenericOp::create(
                 b, loc, rowSum.getType(), ValueRange{probs},
                 ValueRange{rowSum}, ArrayRef<AffineMap>{sMap, rowMap},
                 iterators(nb + 1, 1),
                 [&](OpBuilder &nested, Location l, ValueRange args) {
                   Value s = arith::AddFOp::create(nested, l, args[0], args[1]);
                   linalg::YieldOp::create(nested, l, s);
                 })
                 .getResult(0);

    // O[b, i, e] = sum_j P[b, i, j] * V[b, j, e]   loops (b.., i, e, j)
    int64_t e = nb + 1, jj = nb + 2;
    SmallVector<OpFoldResult> oShape(rowShape);
    oShape.push_back(vShape[nb + 1]);
    Value acc = filled(oShape, 0.0);
    acc = linalg::GenericOp::create(
              b, loc, acc.getType(), ValueRange{probs, value}, ValueRange{acc},
              ArrayRef<AffineMap>{map(n, withBatch({i, jj})),
                                  map(n, withBatch({jj, e})),
                                  map(n, withBatch({i, e}))},
              iterators(nb + 2, 1),
              [&](OpBuilder &nested, Location l, ValueRange args) {
                Value prod = arith::MulFOp::create(nested, l, args[0],
                                                   toF32(nested, l, args[1]));
                Value sum = arith::AddFOp::create(nested, l, args[2], prod);
                linalg::YieldOp::create(nested, l, sum);
              })
              .getResult(0);

    // out = acc / l (0 for a fully masked row), in the init's element type.
    Value outInit = op.getOutputInit();
    Type outElem = op.getOutputType().getElementType();
    AffineMap oMap = map(sRank, range(0, sRank));
    AffineMap oRowMap = map(sRank, rowDims);
    Value out =
        linalg::GenericOp::create(
            b, loc, outInit.getType(), ValueRange{acc, rowSum},
            ValueRange{outInit}, ArrayRef<AffineMap>{oMap, oRowMap, oMap},
            iterators(sRank),
            [&](OpBuilder &nested, Location l, ValueRange args) {
              linalg::YieldOp::create(
                  nested, l,
                  buildNormalize(nested, l, args[0], args[1], outElem));
            })
            .getResult(0);
    SmallVector<Value> results{out};

    if (op.hasLse()) {
      int64_t rRank = nb + 1;
      AffineMap id = map(rRank, range(0, rRank));
      Value lse =
          linalg::GenericOp::create(
              b, loc, op.getLseInit().getType(), ValueRange{rowMax, rowSum},
              ValueRange{op.getLseInit()}, ArrayRef<AffineMap>{id, id, id},
              iterators(rRank),
              [&](OpBuilder &nested, Location l, ValueRange args) {
                linalg::YieldOp::create(
                    nested, l, buildLogSumExp(nested, l, args[0], args[1]));
              })
              .getResult(0);
      results.push_back(lse);
    }
    return results;
  }
};

struct DecomposeAttentionPattern : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> results = decomposeAttention(rewriter, op);
    if (failed(results))
      return failure();
    rewriter.replaceOp(op, *results);
    return success();
  }
};

struct FlashDecomposeAttentionPass
    : flash::impl::FlashDecomposeAttentionPassBase<FlashDecomposeAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeAttentionPatterns(patterns);
    populateDecomposeAttentionGradPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace

FailureOr<SmallVector<Value>>
mlir::flash::decomposeAttention(OpBuilder &builder, AttentionOp op) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(op);
  return Decomposer(builder, op).run();
}

void mlir::flash::populateDecomposeAttentionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeAttentionPattern>(patterns.getContext());
}
