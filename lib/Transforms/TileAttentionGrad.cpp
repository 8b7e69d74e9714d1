//===- TileAttentionGrad.cpp - flash.attention_grad as tiled loops, O(L) ----===//
//
// The backward pass with rematerialization: no Lq x Lk buffer, only
// block-q x block-kv tiles whose probabilities are recomputed from the saved
// log-sum-exp, P = exp(s - lse). Three stages, all on tensors:
//
//   delta[b, i] = sum_e dO[b, i, e] O[b, i, e]                   (O(L))
//   dK, dV: scf.forall over (K/V batch..., key block); inside, for each
//     query head of the group and each query block the mask leaves visible:
//       S, P = exp(score_mod(scale S) - lse), dP = dO Vᵀ,
//       dT = P (dP - delta) · d score_mod / dt,
//       dV += Pᵀ dO,  dK += scale dTᵀ Q
//   dQ: scf.forall over (batch..., query block); for each visible key block
//       the same tile recomputed, dQ += scale dT K
//
// dQ is a pass of its own rather than a reduction across the key-block
// loop, so both foralls are race-free and the result is deterministic,
// at the price of recomputing each visible tile twice. Tails are exact
// dynamic-size tiles. The gradients of float captures the score_mod reads
// (an additive bias's dbias) come from a third, sequential walk over the
// visible tiles, each read's contributions reduced into the capture slice
// it indexes.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "AttentionMath.h"
#include "LinalgBuilder.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <array>
#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::flash;

namespace {
struct GradTiler : LinalgBuilder {
  AttentionGradOp op;
  int64_t nb, bq, bk, group = 1;
  SmallVector<OpFoldResult> qShape, kShape, vShape;
  Value lq, lk, diagOff;
  float scale;

  GradTiler(OpBuilder &b, AttentionGradOp op, int64_t bq, int64_t bk)
      : LinalgBuilder(b, op.getLoc()), op(op), nb(op.getNumBatchDims()),
        bq(bq), bk(bk), scale(op.getScale().convertToFloat()) {}

  Value cIdx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mulC(Value x, int64_t c) {
    return arith::MulIOp::create(b, loc, x, cIdx(c));
  }
  Value minS(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value maxS(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }

  /// rows [row0, row0 + rows) of `t` ([batch..., L, X]) at `batch`, as a
  /// rank-reduced [rows, X] tile (or [rows] for an [batch..., L] tensor).
  Value slice(Value t, ValueRange batch, Value row0, Value rows) {
    auto type = cast<RankedTensorType>(t.getType());
    int64_t rank = type.getRank();
    SmallVector<OpFoldResult> offsets(batch.begin(), batch.end()), sizes,
        strides(rank, b.getIndexAttr(1));
    sizes.assign(nb, b.getIndexAttr(1));
    offsets.push_back(row0);
    sizes.push_back(rows);
    SmallVector<int64_t> shape = {ShapedType::kDynamic};
    if (rank == nb + 2) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(tensor::getMixedSize(b, loc, t, nb + 1));
      shape.push_back(type.getDimSize(nb + 1));
    }
    auto resultType = RankedTensorType::get(shape, type.getElementType());
    return tensor::ExtractSliceOp::create(b, loc, resultType, t, offsets, sizes,
                                          strides);
  }

  struct TileGrads {
    Value p, dT;             // [rows, cols] f32
    SmallVector<Value> dRead; // per float-capture read: dS · d score_mod / d c
  };
  /// The float-capture reads of the score_mod, in the order
  /// buildScoreModGradient gives their partials.
  SmallVector<ScoreModRead> reads;
  /// The recomputed probabilities of one tile and the score gradient before
  /// score_mod, dT = P (dP - delta) · d score_mod/dt. `batch` holds the
  /// query's batch indices (score_mod sees them); i0, j0 the tile's origin.
  bool failedGrad = false;

  TileGrads tile(Value qT, Value kT, Value vT, Value doT, Value lseT,
                 Value deltaT, ValueRange batch, Value i0, Value j0,
                 Value rows, Value cols, bool withReads = false) {
    size_t nReads = withReads ? reads.size() : 0;
    SmallVector<OpFoldResult> sShape = {rows, cols};
    // loops (i, j, d)
    Value s = contract(qT, map(3, {0, 2}), kT, map(3, {1, 2}),
                       filled(sShape, 0.0), map(3, {0, 1}), 3, 1);
    AffineMap id = map(2, {0, 1}), row = map(2, {0});
    MaskAttr mask = op.getMaskOrNone();
    Region *scoreMod = op.hasScoreMod() ? &op.getScoreMod() : nullptr;
    Value scaleCst = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(scale));
    SmallVector<Type> probTypes(2 + nReads, s.getType());
    SmallVector<Value> probInits;
    for (size_t n = 0; n < 2 + nReads; ++n)
      probInits.push_back(filled(sShape, 0.0));
    SmallVector<AffineMap> probMaps = {id, row};
    probMaps.append(2 + nReads, id);
    auto probs = linalg::GenericOp::create(
        b, loc, probTypes, ValueRange{s, lseT}, probInits, probMaps,
        iterators(2),
        [&](OpBuilder &nested, Location l, ValueRange args) {
          Value t = arith::MulFOp::create(nested, l, args[0], scaleCst);
          Value i = arith::AddIOp::create(
              nested, l, i0, linalg::IndexOp::create(nested, l, 0));
          Value j = arith::AddIOp::create(
              nested, l, j0, linalg::IndexOp::create(nested, l, 1));
          Value sc = t;
          Value der = arith::ConstantOp::create(nested, l,
                                                nested.getF32FloatAttr(1.0));
          SmallVector<Value> partials;
          if (scoreMod) {
            // The verifier admitted only differentiable regions.
            FailureOr<ScoreModGradient> g = buildScoreModGradient(
                nested, l, *scoreMod, op.getCaptures(), t, batch, i, j);
            if (succeeded(g)) {
              sc = g->score;
              der = g->dScore;
              for (size_t n = 0; n < nReads; ++n)
                partials.push_back(g->reads[n].partial);
            } else {
              failedGrad = true;
            }
          }
          Value zero =
              arith::ConstantOp::create(nested, l, nested.getF32FloatAttr(0.0));
          partials.resize(nReads, zero);
          if (Value allowed =
                  buildMaskPredicate(nested, l, mask, i, j, lq, lk)) {
            Value ninf = arith::ConstantOp::create(
                nested, l,
                nested.getF32FloatAttr(
                    -std::numeric_limits<float>::infinity()));
            sc = arith::SelectOp::create(nested, l, allowed, sc, ninf);
          }
          SmallVector<Value> yields = {buildRowExp(nested, l, sc, args[1]), der};
          yields.append(partials.begin(), partials.end());
          linalg::YieldOp::create(nested, l, yields);
        });
    Value p = probs.getResult(0);
    // dP = dO Vᵀ   loops (i, j, e)
    Value dP = contract(doT, map(3, {0, 2}), vT, map(3, {1, 2}),
                        filled(sShape, 0.0), map(3, {0, 1}), 3, 1);
    SmallVector<Value> gradIns = {p, dP, deltaT, probs.getResult(1)};
    for (size_t n = 0; n < nReads; ++n)
      gradIns.push_back(probs.getResult(2 + n));
    SmallVector<Value> gradInits;
    for (size_t n = 0; n < 1 + nReads; ++n)
      gradInits.push_back(filled(sShape, 0.0));
    SmallVector<AffineMap> gradMaps = {id, id, row, id};
    gradMaps.append(nReads, id);
    gradMaps.append(1 + nReads, id);
    auto grads = linalg::GenericOp::create(
        b, loc, SmallVector<Type>(1 + nReads, s.getType()), gradIns, gradInits,
        gradMaps, iterators(2),
        [&](OpBuilder &nested, Location l, ValueRange args) {
          Value diff = arith::SubFOp::create(nested, l, args[1], args[2]);
          Value ds = arith::MulFOp::create(nested, l, args[0], diff);
          SmallVector<Value> yields = {
              arith::MulFOp::create(nested, l, ds, args[3])};
          for (size_t n = 0; n < nReads; ++n)
            yields.push_back(arith::MulFOp::create(nested, l, ds, args[4 + n]));
          linalg::YieldOp::create(nested, l, yields);
        });
    TileGrads out{p, grads.getResult(0), {}};
    for (size_t n = 0; n < nReads; ++n)
      out.dRead.push_back(grads.getResult(1 + n));
    return out;
  }

  /// `x` (f32, times the scale if `scaled`) written into `dest`'s tile at
  /// (batch..., row0, 0) in its element type: the tile is an extract_slice
  /// of the forall's shared output, so bufferization writes the output in
  /// place instead of copying a temporary into it.
  Value finish(Value x, Value dest, ValueRange batch, Value row0, Value rows,
               bool scaled) {
    return castInto(x, slice(dest, batch, row0, rows),
                    scaled ? std::optional<float>(scale) : std::nullopt);
  }

  /// Inserts tile `x` ([rows, X]) into `dest` at (batch..., row0, 0).
  void insert(Value x, Value dest, ValueRange batch, Value row0, Value rows) {
    int64_t rank = cast<RankedTensorType>(dest.getType()).getRank();
    SmallVector<OpFoldResult> offsets(batch.begin(), batch.end()),
        sizes(nb, b.getIndexAttr(1)), strides(rank, b.getIndexAttr(1));
    offsets.append({row0, b.getIndexAttr(0)});
    sizes.append({rows, tensor::getMixedSize(b, loc, dest, nb + 1)});
    tensor::ParallelInsertSliceOp::create(b, loc, x, dest, offsets, sizes,
                                          strides);
  }

  /// Rows [i0, i0 + rows) of Q, dO, the LSE and delta at `qBatch`.
  std::array<Value, 4> queryTiles(Value delta, ValueRange qBatch, Value i0,
                                  Value rows) {
    return {slice(op.getQuery(), qBatch, i0, rows),
            slice(op.getGradOut(), qBatch, i0, rows),
            slice(op.getLse(), qBatch, i0, rows),
            slice(delta, qBatch, i0, rows)};
  }

  /// [begin, end) key blocks that query rows [i0, i0 + rows) see:
  /// j <= i + off (causal), j > i + off - W (window).
  std::pair<Value, Value> visibleKeyBlocks(Value i0, Value rows) {
    MaskAttr mask = op.getMaskOrNone();
    Value nK = arith::CeilDivUIOp::create(b, loc, lk, cIdx(bk));
    Value kbBegin = cIdx(0), kbEnd = nK;
    if (!mask.isNone()) {
      // The block's last row bounds the keys' end, its first row the start.
      Value lastRow = sub(add(i0, rows), cIdx(1));
      Value hi =
          add(buildVisibleKeys(b, loc, mask, lastRow, diagOff).hi, cIdx(1));
      hi = maxS(cIdx(0), minS(hi, lk));
      kbEnd = arith::CeilDivUIOp::create(b, loc, hi, cIdx(bk));
      if (mask.keysBehindDiagonal()) {
        Value lo =
            maxS(cIdx(0), buildVisibleKeys(b, loc, mask, i0, diagOff).lo);
        kbBegin = minS(arith::DivUIOp::create(b, loc, lo, cIdx(bk)), kbEnd);
      }
    }
    return {kbBegin, kbEnd};
  }

  /// The gradients of the float captures: each tile (the visible ones, in
  /// one sequential walk over batch..., query blocks, key blocks, so the
  /// sums need no atomics and come out the same every run) recomputed once
  /// more, and every read's dS · d score_mod / d c reduced over the tile
  /// dims it does not index into the capture's slice at the tile. f32
  /// accumulators the size of the captures, nothing of Lq x Lk.
  void captureGradients(Value delta, SmallVectorImpl<Value> &results) {
    SmallVector<unsigned> diff = op.getDifferentiableCaptures();
    DenseMap<unsigned, unsigned> slot;
    SmallVector<Value> accs;
    for (auto [n, c] : llvm::enumerate(diff)) {
      slot[c] = n;
      accs.push_back(
          filled(tensor::getMixedSizes(b, loc, op.getCaptures()[c]), 0.0));
    }
    SmallVector<Value> qBatch;
    std::function<SmallVector<Value>(int64_t, ValueRange)> walk =
        [&](int64_t d, ValueRange iter) -> SmallVector<Value> {
      if (d < nb) {
        Value ub = getValueOrCreateConstantIndexOp(b, loc, qShape[d]);
        auto loop = scf::ForOp::create(
            b, loc, cIdx(0), ub, cIdx(1), iter,
            [&](OpBuilder &lb, Location ll, Value iv, ValueRange acc) {
              OpBuilder::InsertionGuard g(b);
              b.setInsertionPoint(lb.getInsertionBlock(), lb.getInsertionPoint());
              qBatch.push_back(iv);
              SmallVector<Value> next = walk(d + 1, acc);
              qBatch.pop_back();
              scf::YieldOp::create(b, loc, next);
            });
        return SmallVector<Value>(loop.getResults());
      }
      SmallVector<Value> kvBatch(qBatch);
      if (nb > 0)
        kvBatch[nb - 1] =
            arith::DivUIOp::create(b, loc, qBatch[nb - 1], cIdx(group));
      Value nQ = arith::CeilDivUIOp::create(b, loc, lq, cIdx(bq));
      auto qLoop = scf::ForOp::create(
          b, loc, cIdx(0), nQ, cIdx(1), iter,
          [&](OpBuilder &qb, Location ql, Value iq, ValueRange accQ) {
            OpBuilder::InsertionGuard g(b);
            b.setInsertionPoint(qb.getInsertionBlock(), qb.getInsertionPoint());
            Value i0 = mulC(iq, bq);
            Value rows = minS(cIdx(bq), sub(lq, i0));
            std::array<Value, 4> tiles = queryTiles(delta, qBatch, i0, rows);
            Value qT = tiles[0], doT = tiles[1], lseT = tiles[2],
                  deltaT = tiles[3];
            std::pair<Value, Value> kbs = visibleKeyBlocks(i0, rows);
            Value kbBegin = kbs.first, kbEnd = kbs.second;
            auto kLoop = scf::ForOp::create(
                b, loc, kbBegin, kbEnd, cIdx(1), accQ,
                [&](OpBuilder &kb, Location kl, Value ik, ValueRange acc) {
                  OpBuilder::InsertionGuard g2(b);
                  b.setInsertionPoint(kb.getInsertionBlock(),
                                      kb.getInsertionPoint());
                  Value j0 = mulC(ik, bk);
                  Value cols = minS(cIdx(bk), sub(lk, j0));
                  Value kT = slice(op.getKey(), kvBatch, j0, cols);
                  Value vT = slice(op.getValue(), kvBatch, j0, cols);
                  TileGrads t = tile(qT, kT, vT, doT, lseT, deltaT, qBatch, i0,
                                     j0, rows, cols, /*withReads=*/true);
                  SmallVector<Value> next(acc);
                  for (auto [r, read] : llvm::enumerate(reads))
                    next[slot[read.capture]] =
                        addRead(next[slot[read.capture]], t.dRead[r], read,
                                qBatch, i0, rows, j0, cols);
                  scf::YieldOp::create(b, loc, next);
                });
            scf::YieldOp::create(b, loc, kLoop.getResults());
          });
      return SmallVector<Value>(qLoop.getResults());
    };
    SmallVector<Value> sums = walk(0, accs);
    for (auto [n, c] : llvm::enumerate(diff))
      results.push_back(castInto(sums[n], op.getInits()[3 + n]));
  }

  /// acc += the tile's contributions `g` ([rows, cols]) to the capture
  /// elements `read` indexes: the slice at the batch indices and the tile's
  /// rows / columns, `g` reduced over the tile dims the read leaves out.
  Value addRead(Value acc, Value g, const ScoreModRead &read,
                ValueRange batch, Value i0, Value rows, Value j0, Value cols) {
    int64_t rank = read.dims.size();
    SmallVector<OpFoldResult> offsets, sizes;
    SmallVector<int64_t> kept;  // loop dim (0: row, 1: column) per kept dim
    SmallVector<int64_t> shape;
    for (int64_t d : read.dims) {
      if (d < nb) {
        offsets.push_back(batch[d]);
        sizes.push_back(b.getIndexAttr(1));
        continue;
      }
      offsets.push_back(d == nb ? i0 : j0);
      sizes.push_back(d == nb ? rows : cols);
      kept.push_back(d - nb);
      shape.push_back(ShapedType::kDynamic);
    }
    SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
    auto tileType = RankedTensorType::get(shape, f32);
    Value part = tensor::ExtractSliceOp::create(b, loc, tileType, acc, offsets,
                                                sizes, strides);
    SmallVector<utils::IteratorType> its;
    for (int64_t l = 0; l < 2; ++l)
      its.push_back(llvm::is_contained(kept, l) ? utils::IteratorType::parallel
                                                : utils::IteratorType::reduction);
    Value summed =
        linalg::GenericOp::create(
            b, loc, tileType, ValueRange{g}, ValueRange{part},
            ArrayRef<AffineMap>{map(2, {0, 1}), map(2, kept)}, its,
            [&](OpBuilder &nested, Location l, ValueRange args) {
              linalg::YieldOp::create(
                  nested, l,
                  arith::AddFOp::create(nested, l, args[1], args[0])
                      .getResult());
            })
            .getResult(0);
    return tensor::InsertSliceOp::create(b, loc, summed, acc, offsets, sizes,
                                         strides);
  }

  FailureOr<SmallVector<Value>> run() {
    if (op.hasScoreMod())
      reads = scoreModReads(op.getScoreMod(), nb + 2);
    qShape = tensor::getMixedSizes(b, loc, op.getQuery());
    kShape = tensor::getMixedSizes(b, loc, op.getKey());
    vShape = tensor::getMixedSizes(b, loc, op.getValue());
    lq = getValueOrCreateConstantIndexOp(b, loc, qShape[nb]);
    lk = getValueOrCreateConstantIndexOp(b, loc, kShape[nb]);
    MaskAttr mask = op.getMaskOrNone();
    diagOff = buildDiagonalOffset(b, loc, mask, lq, lk);
    if (nb > 0) {
      std::optional<int64_t> hq = getConstantIntValue(qShape[nb - 1]);
      std::optional<int64_t> hkv = getConstantIntValue(kShape[nb - 1]);
      if (!hq || !hkv)
        return failure();
      group = *hq / *hkv;
    }

    // delta = rowsum(dO ∘ O)   loops (b.., i, e)
    int64_t r = nb + 2;
    SmallVector<OpFoldResult> rowShape(qShape.begin(), qShape.begin() + nb + 1);
    Value delta = contract(op.getGradOut(), map(r, range(0, r)), op.getOut(),
                           map(r, range(0, r)), filled(rowShape, 0.0),
                           map(r, range(0, nb + 1)), r, 1);

    SmallVector<Value> results(3);
    // dK, dV over (K/V batch..., key block).
    {
      SmallVector<OpFoldResult> ubs(kShape.begin(), kShape.begin() + nb);
      ubs.push_back(arith::CeilDivUIOp::create(b, loc, lk, cIdx(bk)).getResult());
      auto forall = scf::ForallOp::create(
          b, loc, ubs, ValueRange{op.getGradKeyInit(), op.getGradValueInit()},
          std::nullopt);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(forall.getTerminator());
      ValueRange ivs = forall.getInductionVars();
      SmallVector<Value> kvBatch(ivs.begin(), ivs.begin() + nb);
      Value j0 = mulC(ivs[nb], bk);
      Value cols = minS(cIdx(bk), sub(lk, j0));
      Value kT = slice(op.getKey(), kvBatch, j0, cols);
      Value vT = slice(op.getValue(), kvBatch, j0, cols);
      // Query rows that see a key of this block: i + off >= j0 (causal) and
      // i + off - W < j0 + cols - 1 (window).
      Value nQ = arith::CeilDivUIOp::create(b, loc, lq, cIdx(bq));
      Value qbBegin = cIdx(0), qbEnd = nQ;
      if (!mask.isNone()) {
        // The block's first key bounds the first query block, its last key
        // the last.
        Value first =
            maxS(cIdx(0), buildVisibleQueries(b, loc, mask, j0, diagOff).lo);
        qbBegin = minS(arith::DivUIOp::create(b, loc, first, cIdx(bq)), nQ);
        if (mask.keysBehindDiagonal()) {
          Value lastKey = sub(add(j0, cols), cIdx(1));
          Value last = add(
              buildVisibleQueries(b, loc, mask, lastKey, diagOff).hi, cIdx(1));
          last = maxS(cIdx(0), minS(last, lq));
          qbEnd = maxS(qbBegin,
                       arith::CeilDivUIOp::create(b, loc, last, cIdx(bq)));
        }
      }
      SmallVector<OpFoldResult> dkShape = {cols, kShape[nb + 1]};
      SmallVector<OpFoldResult> dvShape = {cols, vShape[nb + 1]};
      auto groups = scf::ForOp::create(
          b, loc, cIdx(0), cIdx(group), cIdx(1),
          ValueRange{filled(dkShape, 0.0), filled(dvShape, 0.0)},
          [&](OpBuilder &gb, Location gl, Value g, ValueRange accG) {
            SmallVector<Value> qBatch(kvBatch);
            if (nb > 0)
              qBatch[nb - 1] = arith::AddIOp::create(
                  gb, gl, arith::MulIOp::create(gb, gl, kvBatch[nb - 1],
                                                arith::ConstantIndexOp::create(
                                                    gb, gl, group)),
                  g);
            auto blocks = scf::ForOp::create(
                gb, gl, qbBegin, qbEnd, arith::ConstantIndexOp::create(gb, gl, 1),
                accG, [&](OpBuilder &qb, Location ql, Value iq, ValueRange acc) {
                  OpBuilder::InsertionGuard g2(b);
                  b.setInsertionPoint(qb.getInsertionBlock(),
                                      qb.getInsertionPoint());
                  Value i0 = mulC(iq, bq);
                  Value rows = minS(cIdx(bq), sub(lq, i0));
                  Value qT = slice(op.getQuery(), qBatch, i0, rows);
                  Value doT = slice(op.getGradOut(), qBatch, i0, rows);
                  Value lseT = slice(op.getLse(), qBatch, i0, rows);
                  Value deltaT = slice(delta, qBatch, i0, rows);
                  TileGrads t = tile(qT, kT, vT, doT, lseT, deltaT, qBatch, i0,
                                     j0, rows, cols);
                  // loops (j, x, i)
                  Value dK = contract(t.dT, map(3, {2, 0}), qT, map(3, {2, 1}),
                                      acc[0], map(3, {0, 1}), 3, 1);
                  Value dV = contract(t.p, map(3, {2, 0}), doT, map(3, {2, 1}),
                                      acc[1], map(3, {0, 1}), 3, 1);
                  scf::YieldOp::create(b, loc, ValueRange{dK, dV});
                });
            scf::YieldOp::create(gb, gl, blocks.getResults());
          });
      Value dK = finish(groups.getResult(0), forall.getRegionIterArgs()[0],
                        kvBatch, j0, cols, /*scaled=*/true);
      Value dV = finish(groups.getResult(1), forall.getRegionIterArgs()[1],
                        kvBatch, j0, cols, /*scaled=*/false);
      b.setInsertionPointToEnd(forall.getTerminator().getBody());
      insert(dK, forall.getRegionIterArgs()[0], kvBatch, j0, cols);
      insert(dV, forall.getRegionIterArgs()[1], kvBatch, j0, cols);
      results[1] = forall.getResult(0);
      results[2] = forall.getResult(1);
    }
    // dQ over (batch..., query block).
    {
      SmallVector<OpFoldResult> ubs(qShape.begin(), qShape.begin() + nb);
      ubs.push_back(arith::CeilDivUIOp::create(b, loc, lq, cIdx(bq)).getResult());
      auto forall = scf::ForallOp::create(
          b, loc, ubs, ValueRange{op.getGradQueryInit()}, std::nullopt);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(forall.getTerminator());
      ValueRange ivs = forall.getInductionVars();
      SmallVector<Value> qBatch(ivs.begin(), ivs.begin() + nb);
      SmallVector<Value> kvBatch(qBatch);
      if (nb > 0)
        kvBatch[nb - 1] =
            arith::DivUIOp::create(b, loc, qBatch[nb - 1], cIdx(group));
      Value i0 = mulC(ivs[nb], bq);
      Value rows = minS(cIdx(bq), sub(lq, i0));
      std::array<Value, 4> tiles = queryTiles(delta, qBatch, i0, rows);
      Value qT = tiles[0], doT = tiles[1], lseT = tiles[2], deltaT = tiles[3];
      std::pair<Value, Value> kbs = visibleKeyBlocks(i0, rows);
      Value kbBegin = kbs.first, kbEnd = kbs.second;
      SmallVector<OpFoldResult> dqShape = {rows, qShape[nb + 1]};
      auto blocks = scf::ForOp::create(
          b, loc, kbBegin, kbEnd, cIdx(1), ValueRange{filled(dqShape, 0.0)},
          [&](OpBuilder &kb, Location kl, Value ik, ValueRange acc) {
            OpBuilder::InsertionGuard g2(b);
            b.setInsertionPoint(kb.getInsertionBlock(), kb.getInsertionPoint());
            Value j0 = mulC(ik, bk);
            Value cols = minS(cIdx(bk), sub(lk, j0));
            Value kT = slice(op.getKey(), kvBatch, j0, cols);
            Value vT = slice(op.getValue(), kvBatch, j0, cols);
            TileGrads t =
                tile(qT, kT, vT, doT, lseT, deltaT, qBatch, i0, j0, rows, cols);
            // loops (i, d, j)
            Value dQ = contract(t.dT, map(3, {0, 2}), kT, map(3, {2, 1}),
                                acc[0], map(3, {0, 1}), 3, 1);
            scf::YieldOp::create(b, loc, ValueRange{dQ});
          });
      Value dQ = finish(blocks.getResult(0), forall.getRegionIterArgs()[0],
                        qBatch, i0, rows, /*scaled=*/true);
      b.setInsertionPointToEnd(forall.getTerminator().getBody());
      insert(dQ, forall.getRegionIterArgs()[0], qBatch, i0, rows);
      results[0] = forall.getResult(0);
    }
    if (!op.getDifferentiableCaptures().empty())
      captureGradients(delta, results);
    if (failedGrad)
      return op.emitOpError("could not differentiate its score_mod region");
    return results;
  }
};
} // namespace

bool mlir::flash::canTileAttentionGrad(AttentionGradOp op) {
  // Capture gradients need each read to index distinct loop dims (the
  // slice it is reduced into), which the verifier guarantees.
  int64_t nb = op.getNumBatchDims();
  if (nb == 0)
    return true;
  int64_t hq = op.getQueryType().getDimSize(nb - 1);
  int64_t hkv = op.getKeyType().getDimSize(nb - 1);
  return !ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv);
}

FailureOr<SmallVector<Value>>
mlir::flash::tileAttentionGrad(RewriterBase &rewriter, AttentionGradOp op,
                               int64_t blockQ, int64_t blockKv) {
  if (!canTileAttentionGrad(op))
    return failure();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  return GradTiler(rewriter, op, blockQ, blockKv).run();
}
