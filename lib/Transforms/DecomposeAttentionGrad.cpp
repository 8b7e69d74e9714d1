//===- DecomposeAttentionGrad.cpp - flash.attention_grad as unfused linalg -===//
//
// The reference meaning of the gradient op, written the textbook way on the
// full Lq x Lk score space: recompute the scores (score_mod, mask) and
// P = exp(s - lse) from the saved log-sum-exp, then
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P (dP - rowsum(dO ∘ O)),
//   dT = dS · d score_mod/dt,  dQ = scale dT K,  dK = scale dTᵀ Q,
//   dc = sum of dS · d score_mod/dc over the loops a capture read does not
//   index,
// with grouped-query dK, dV summed over each K/V head's query heads. Every
// tiled lowering of the gradient is tested against this.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "AttentionMath.h"
#include "LinalgBuilder.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"

#include <limits>

using namespace mlir;
using namespace mlir::flash;

namespace {
struct GradDecomposer : LinalgBuilder {
  AttentionGradOp op;
  int64_t nb;
  SmallVector<OpFoldResult> qShape, kShape, vShape;

  GradDecomposer(OpBuilder &b, AttentionGradOp op)
      : LinalgBuilder(b, op.getLoc()), op(op), nb(op.getNumBatchDims()) {
    qShape = tensor::getMixedSizes(b, loc, op.getQuery());
    kShape = tensor::getMixedSizes(b, loc, op.getKey());
    vShape = tensor::getMixedSizes(b, loc, op.getValue());
  }

  SmallVector<int64_t> withBatch(std::initializer_list<int64_t> tail) const {
    SmallVector<int64_t> dims = range(0, nb);
    dims.append(tail.begin(), tail.end());
    return dims;
  }

  /// `full` ([batch..., Hq, L, X], f32) summed over the query heads of each
  /// K/V head into the shape of `kvShape`: head h of the result is the sum
  /// of heads h·G .. h·G + G - 1.
  FailureOr<Value> sumGroups(Value full, ArrayRef<OpFoldResult> kvShape) {
    if (nb == 0)
      return full;
    auto type = cast<RankedTensorType>(full.getType());
    std::optional<int64_t> hq = getConstantIntValue(qShape[nb - 1]);
    std::optional<int64_t> hkv = getConstantIntValue(kvShape[nb - 1]);
    if (hq && hkv && *hq == *hkv)
      return full;
    if (!hq || !hkv) {
      op.emitOpError("grouped-query gradients need static head counts");
      return failure();
    }
    int64_t group = *hq / *hkv, rank = type.getRank();
    // loops (batch..., L, X, g): out[.., h, l, x] += full[.., h·G + g, l, x]
    int64_t n = rank + 1, g = rank;
    SmallVector<AffineExpr> in;
    for (int64_t d = 0; d < rank; ++d)
      in.push_back(b.getAffineDimExpr(d));
    in[nb - 1] = in[nb - 1] * group + b.getAffineDimExpr(g);
    Value groups = tensor::EmptyOp::create(
        b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(group)}, f32);
    return accumulate(ValueRange{full, groups},
                      {AffineMap::get(n, 0, in, b.getContext()), map(n, {g})},
                      filled(kvShape, 0.0), map(n, range(0, rank)), n, 1);
  }

  FailureOr<SmallVector<Value>> run() {
    Value key = broadcastHeads(op.getKey(), kShape, nb,
                               nb ? qShape[nb - 1] : OpFoldResult());
    Value value = broadcastHeads(op.getValue(), vShape, nb,
                                 nb ? qShape[nb - 1] : OpFoldResult());
    SmallVector<OpFoldResult> sShape(qShape.begin(), qShape.begin() + nb + 1);
    sShape.push_back(kShape[nb]);
    SmallVector<OpFoldResult> rowShape(qShape.begin(), qShape.begin() + nb + 1);
    int64_t sRank = nb + 2, n = nb + 3;
    int64_t i = nb, j = nb + 1, d = nb + 2;
    AffineMap sMap = map(sRank, range(0, sRank));
    AffineMap rowMap = map(sRank, range(0, nb + 1));

    // S = Q Kᵀ   loops (b.., i, j, d)
    Value scores = contract(op.getQuery(), map(n, withBatch({i, d})), key,
                            map(n, withBatch({j, d})), filled(sShape, 0.0),
                            map(n, withBatch({i, j})), n, 1);

    // P = exp(mask(score_mod(scale s)) - lse), d score_mod / dt, and the
    // partial derivative of each float capture read.
    Region *scoreMod = op.hasScoreMod() ? &op.getScoreMod() : nullptr;
    SmallVector<ScoreModRead> reads =
        scoreMod ? scoreModReads(*scoreMod, nb + 2) : SmallVector<ScoreModRead>();
    int64_t numOut = 2 + reads.size();
    SmallVector<Value> inits;
    for (int64_t k = 0; k < numOut; ++k)
      inits.push_back(filled(sShape, 0.0));
    SmallVector<AffineMap> maps = {sMap, rowMap};
    maps.append(numOut, sMap);
    Value lq = getValueOrCreateConstantIndexOp(b, loc, qShape[nb]);
    Value lk = getValueOrCreateConstantIndexOp(b, loc, kShape[nb]);
    MaskAttr mask = op.getMaskOrNone();
    float scaleValue = op.getScale().convertToFloat();
    bool failedGrad = false;
    auto probs = linalg::GenericOp::create(
        b, loc, TypeRange(ValueRange(inits)), ValueRange{scores, op.getLse()},
        inits, maps, iterators(sRank),
        [&](OpBuilder &nested, Location l, ValueRange args) {
          Value scale = arith::ConstantOp::create(
              nested, l, nested.getF32FloatAttr(scaleValue));
          Value t = arith::MulFOp::create(nested, l, args[0], scale);
          SmallVector<Value> idx;
          for (int64_t dim = 0; dim < sRank; ++dim)
            idx.push_back(linalg::IndexOp::create(nested, l, dim));
          Value s = t;
          Value der = arith::ConstantOp::create(nested, l,
                                                nested.getF32FloatAttr(1.0));
          SmallVector<Value> partials;
          if (scoreMod) {
            FailureOr<ScoreModGradient> g = buildScoreModGradient(
                nested, l, *scoreMod, op.getCaptures(), t,
                ArrayRef<Value>(idx).take_front(nb), idx[nb], idx[nb + 1]);
            if (failed(g)) {
              failedGrad = true;
            } else {
              s = g->score;
              der = g->dScore;
              for (ScoreModRead &r : g->reads)
                partials.push_back(r.partial);
            }
          }
          if (Value allowed = buildMaskPredicate(nested, l, mask, idx[nb],
                                                 idx[nb + 1], lq, lk)) {
            Value ninf = arith::ConstantOp::create(
                nested, l,
                nested.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
            s = arith::SelectOp::create(nested, l, allowed, s, ninf);
          }
          SmallVector<Value> yields = {buildRowExp(nested, l, s, args[1]), der};
          yields.append(partials.begin(), partials.end());
          while (yields.size() < static_cast<size_t>(numOut))
            yields.push_back(der);
          linalg::YieldOp::create(nested, l, yields);
        });
    if (failedGrad)
      return op.emitOpError("could not differentiate its score_mod region");
    Value p = probs.getResult(0), der = probs.getResult(1);

    // dP = dO Vᵀ   loops (b.., i, j, e);  delta = rowsum(dO ∘ O)
    int64_t e = nb + 2;
    Value dP = contract(op.getGradOut(), map(n, withBatch({i, e})), value,
                        map(n, withBatch({j, e})), filled(sShape, 0.0),
                        map(n, withBatch({i, j})), n, 1);
    Value delta =
        contract(op.getGradOut(), map(sRank, range(0, sRank)), op.getOut(),
                 map(sRank, range(0, sRank)), filled(rowShape, 0.0),
                 map(sRank, range(0, nb + 1)), sRank, 1);

    // dS = P (dP - delta); dT = dS · d score_mod/dt; per capture read
    // dS · d score_mod/dc.
    SmallVector<Value> dsInits;
    for (int64_t k = 0; k < 2 + static_cast<int64_t>(reads.size()); ++k)
      dsInits.push_back(filled(sShape, 0.0));
    SmallVector<Value> dsIns = {p, dP, delta, der};
    SmallVector<AffineMap> dsMaps = {sMap, sMap, rowMap, sMap};
    for (int64_t r = 0; r < static_cast<int64_t>(reads.size()); ++r) {
      dsIns.push_back(probs.getResult(2 + r));
      dsMaps.push_back(sMap);
    }
    dsMaps.append(dsInits.size(), sMap);
    auto grads = linalg::GenericOp::create(
        b, loc, TypeRange(ValueRange(dsInits)), dsIns, dsInits, dsMaps,
        iterators(sRank), [&](OpBuilder &nested, Location l, ValueRange args) {
          Value diff = arith::SubFOp::create(nested, l, args[1], args[2]);
          Value ds = arith::MulFOp::create(nested, l, args[0], diff);
          SmallVector<Value> yields = {
              ds, arith::MulFOp::create(nested, l, ds, args[3])};
          for (size_t r = 0; r < reads.size(); ++r)
            yields.push_back(
                arith::MulFOp::create(nested, l, ds, args[4 + r]));
          linalg::YieldOp::create(nested, l, yields);
        });
    Value dT = grads.getResult(1);

    // dQ = scale dT K   loops (b.., i, d, j)
    int64_t dd = nb + 1, jj = nb + 2;
    SmallVector<OpFoldResult> dqShape(qShape);
    Value dQ = contract(dT, map(n, withBatch({i, jj})), key,
                        map(n, withBatch({jj, dd})), filled(dqShape, 0.0),
                        map(n, withBatch({i, dd})), n, 1);

    // dK = scale dTᵀ Q, dV = Pᵀ dO (full query heads)   loops (b.., j, x, i)
    int64_t jr = nb, x = nb + 1, ir = nb + 2;
    SmallVector<OpFoldResult> kFull(qShape.begin(), qShape.begin() + nb);
    kFull.push_back(kShape[nb]);
    SmallVector<OpFoldResult> vFull(kFull);
    kFull.push_back(kShape[nb + 1]);
    vFull.push_back(vShape[nb + 1]);
    Value dKFull = contract(dT, map(n, withBatch({ir, jr})), op.getQuery(),
                            map(n, withBatch({ir, x})), filled(kFull, 0.0),
                            map(n, withBatch({jr, x})), n, 1);
    Value dVFull = contract(p, map(n, withBatch({ir, jr})), op.getGradOut(),
                            map(n, withBatch({ir, x})), filled(vFull, 0.0),
                            map(n, withBatch({jr, x})), n, 1);
    FailureOr<Value> dK = sumGroups(dKFull, kShape);
    FailureOr<Value> dV = sumGroups(dVFull, vShape);
    if (failed(dK) || failed(dV))
      return failure();

    SmallVector<Value> results = {castInto(dQ, op.getGradQueryInit(), scaleValue),
                                  castInto(*dK, op.getGradKeyInit(), scaleValue),
                                  castInto(*dV, op.getGradValueInit())};

    // Capture gradients: each read's contribution reduced over the loops it
    // does not index, summed over the reads of that capture.
    for (auto [slot, c] : llvm::enumerate(op.getDifferentiableCaptures())) {
      Value capture = op.getCaptures()[c];
      SmallVector<OpFoldResult> cShape =
          tensor::getMixedSizes(b, loc, capture);
      Value acc = filled(cShape, 0.0);
      for (auto [r, read] : llvm::enumerate(reads)) {
        if (read.capture != c)
          continue;
        // The reduced contribution has the extents of the loops it indexes;
        // it is added into the capture's shape at offset 0 (a larger bias
        // than the scores gets zero gradient where no score read it).
        SmallVector<OpFoldResult> part;
        for (int64_t dim : read.dims)
          part.push_back(sShape[dim]);
        SmallVector<int64_t> reduced;
        for (int64_t dim = 0; dim < sRank; ++dim)
          if (!llvm::is_contained(read.dims, dim))
            reduced.push_back(dim);
        // Loops ordered kept-dims first, then reduced ones.
        SmallVector<int64_t> order(read.dims.begin(), read.dims.end());
        order.append(reduced.begin(), reduced.end());
        SmallVector<AffineExpr> inExprs(sRank);
        for (auto [pos, dim] : llvm::enumerate(order))
          inExprs[dim] = b.getAffineDimExpr(pos);
        AffineMap inMap = AffineMap::get(sRank, 0, inExprs, b.getContext());
        AffineMap outMap = map(sRank, range(0, read.dims.size()));
        Value reducedV =
            accumulate(ValueRange{grads.getResult(2 + r)}, {inMap},
                       filled(part, 0.0), outMap, sRank, reduced.size());
        int64_t cRank = cShape.size();
        SmallVector<OpFoldResult> offsets(cRank, b.getIndexAttr(0)),
            strides(cRank, b.getIndexAttr(1));
        Value window = tensor::ExtractSliceOp::create(b, loc, acc, offsets,
                                                      part, strides);
        AffineMap id = map(cRank, range(0, cRank));
        Value sum = accumulate(ValueRange{reducedV}, {id}, window, id, cRank, 0);
        acc = tensor::InsertSliceOp::create(b, loc, sum, acc, offsets, part,
                                            strides);
      }
      results.push_back(castInto(acc, op.getInits()[3 + slot]));
    }
    return results;
  }
};

struct DecomposeAttentionGradPattern : OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> results = decomposeAttentionGrad(rewriter, op);
    if (failed(results))
      return failure();
    rewriter.replaceOp(op, *results);
    return success();
  }
};
} // namespace

FailureOr<SmallVector<Value>>
mlir::flash::decomposeAttentionGrad(OpBuilder &builder, AttentionGradOp op) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(op);
  return GradDecomposer(builder, op).run();
}

void mlir::flash::populateDecomposeAttentionGradPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeAttentionGradPattern>(patterns.getContext());
}
