//===- RegisterSoftmax.cpp - the online-softmax step on accumulator fragments //
//
// The tile program's softmax step for the tensor-core strategies: each
// thread holds two rows (r and r+8) of a 16-row slice of the accumulator
// (AccumulatorLayout), spread over the four lanes of a quad; row statistics
// are reduced with two butterfly shuffles. Work is in the log2 domain:
// s2 = s·scale·log2(e), p = 2^(s2 − m), so the softmax needs one ex2 per
// element and no exp.
//
//===----------------------------------------------------------------------===//
#include "TileProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

using Layout = AccumulatorLayout;

Value gpu_lowering::butterflyReduce(ImplicitLocOpBuilder &b, Value v,
                                    bool isMax, int64_t lanes) {
  Value width = constI32(b, 32);
  for (int64_t off = 1; off < lanes; off *= 2) {
    Value other = gpu::ShuffleOp::create(b, v, constI32(b, off), width,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    v = isMax ? arith::MaxNumFOp::create(b, v, other).getResult()
              : arith::AddFOp::create(b, v, other).getResult();
  }
  return v;
}

Value gpu_lowering::quadReduce(ImplicitLocOpBuilder &b, Value v, bool isMax) {
  return butterflyReduce(b, v, isMax, 4);
}

/// Element `i`'s exponential: ctx.softExp2 of every 8 on the FMA pipes.
static Value exp2Of(ImplicitLocOpBuilder &b, Value x, int64_t i,
                    const ScoreContext &ctx) {
  return i % 8 < ctx.softExp2 ? exp2Poly(b, x) : exp2Approx(b, x);
}

std::array<Value, 2>
gpu_lowering::onlineSoftmaxStep(ImplicitLocOpBuilder &b,
                                SmallVectorImpl<Value> &s, RowState &st,
                                double scale, const ScoreContext &ctx) {
  const double log2e = 1.4426950408889634;
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value scaleLog2 = constF32(b, scale * log2e);
  Value scaleNat = constF32(b, scale);
  Value log2eV = constF32(b, log2e);

  // Without score_mod (and scale > 0) the scaling commutes with the max:
  // keep raw scores, take the max on them and fold scale·log2(e) into one
  // FMA per element, p = 2^(s·c − m).
  bool raw = !ctx.scoreMod && scale > 0;
  VisibleSpan keys[2];
  if (ctx.needsMask)
    for (int64_t h = 0; h < 2; ++h)
      keys[h] = ctx.keysOf(b, ctx.rowIdx[h]);
  if (raw) {
    if (ctx.needsMask)
      for (int64_t i = 0, e = s.size(); i < e; ++i) {
        Value ok = keys[Layout::rowHalf(i)].admits(b, Layout::column(i));
        s[i] = arith::SelectOp::create(b, ok, s[i], negInf);
      }
    std::array<Value, 2> alpha;
    std::array<Value, 2> negM;
    for (int64_t h = 0; h < 2; ++h) {
      Value mx;
      for (int64_t i = 0, e = s.size(); i < e; ++i)
        if (Layout::rowHalf(i) == h)
          mx = mx ? arith::MaxNumFOp::create(b, mx, s[i]).getResult() : s[i];
      mx = quadReduce(b, mx, /*isMax=*/true);
      mx = arith::MulFOp::create(b, mx, scaleLog2);
      MaxUpdate u = updateRunningMax(b, st.m[h], mx);
      alpha[h] = u.alpha;
      negM[h] = arith::NegFOp::create(b, u.mUse);
      st.m[h] = u.m;
    }
    Value rowSum[2] = {Value(), Value()};
    for (int64_t i = 0, e = s.size(); i < e; ++i) {
      int64_t h = Layout::rowHalf(i);
      Value x = fmaF32(b, s[i], scaleLog2, negM[h]);
      s[i] = exp2Of(b, x, i, ctx);
      rowSum[h] = rowSum[h]
                      ? arith::AddFOp::create(b, rowSum[h], s[i]).getResult()
                      : s[i];
    }
    for (int64_t h = 0; h < 2; ++h)
      st.l[h] = updateRunningSum(b, st.l[h], alpha[h], rowSum[h]);
    return alpha;
  }

  // Scores with score_mod and the mask applied: in natural units with a
  // score_mod (log2(e) > 0 commutes with the max, so it folds into the
  // exponent's FMA as scale·log2(e) does above, where a multiply per score
  // would hold the log2-domain score for both the max and the exponent),
  // else in the log2 domain.
  bool natural = static_cast<bool>(ctx.scoreMod);
  for (int64_t i = 0, e = s.size(); i < e; ++i) {
    Value &v = s[i];
    int64_t h = Layout::rowHalf(i);
    Value col;
    if (ctx.scoreMod) {
      Value c = arith::AddIOp::create(b, ctx.colBase, ctx.laneCol);
      col = arith::AddIOp::create(b, c, constIdx(b, Layout::column(i)));
    }
    Value x;
    if (ctx.scoreMod) {
      Value nat = arith::MulFOp::create(b, v, scaleNat);
      x = ctx.scoreMod(b, nat, ctx.rowIdx[h], col,
                       ctx.prefetched.empty() ? nullptr : &ctx.prefetched[i]);
    } else {
      x = arith::MulFOp::create(b, v, scaleLog2);
    }
    if (ctx.needsMask) {
      Value ok = keys[h].admits(b, Layout::column(i));
      x = arith::SelectOp::create(b, ok, x, negInf);
    }
    v = x;
  }

  std::array<Value, 2> alpha;
  std::array<Value, 2> mUse;
  for (int64_t h = 0; h < 2; ++h) {
    Value mx;
    for (int64_t i = 0, e = s.size(); i < e; ++i) {
      if (Layout::rowHalf(i) != h)
        continue;
      mx = mx ? arith::MaxNumFOp::create(b, mx, s[i]).getResult() : s[i];
    }
    mx = quadReduce(b, mx, /*isMax=*/true);
    if (natural)
      mx = arith::MulFOp::create(b, mx, log2eV);
    MaxUpdate u = updateRunningMax(b, st.m[h], mx);
    mUse[h] = u.mUse;
    alpha[h] = u.alpha;
    st.m[h] = u.m;
  }

  Value rowSum[2] = {Value(), Value()};
  for (int64_t i = 0, e = s.size(); i < e; ++i) {
    Value &v = s[i];
    int64_t h = Layout::rowHalf(i);
    Value x = natural ? fmaF32(b, v, log2eV, arith::NegFOp::create(b, mUse[h]))
                      : arith::SubFOp::create(b, v, mUse[h]).getResult();
    v = exp2Of(b, x, i, ctx);
    rowSum[h] = rowSum[h] ? arith::AddFOp::create(b, rowSum[h], v).getResult()
                          : v;
  }
  for (int64_t h = 0; h < 2; ++h)
    st.l[h] = updateRunningSum(b, st.l[h], alpha[h], rowSum[h]);
  return alpha;
}

void gpu_lowering::prefetchScoreReads(ImplicitLocOpBuilder &b,
                                      ScoreContext &ctx, int64_t numElements) {
  if (!ctx.prefetch)
    return;
  // The columns onlineSoftmaxStep builds, so that the two fold together.
  for (int64_t i = 0; i < numElements; ++i) {
    Value c = arith::AddIOp::create(b, ctx.colBase, ctx.laneCol);
    c = arith::AddIOp::create(b, c, constIdx(b, Layout::column(i)));
    ctx.prefetched.push_back(
        ctx.prefetch(b, ctx.rowIdx[Layout::rowHalf(i)], c));
  }
}

std::array<Value, 2>
gpu_lowering::maskedSoftmaxStep(ImplicitLocOpBuilder &b,
                                SmallVectorImpl<Value> &s, RowState &st,
                                double scale, Value needsMask,
                                const ScoreContext &ctx) {
  // The predicate is uniform over the 16 rows whose lanes the softmax's
  // shuffles span, so both branches are taken warp-uniformly.
  SmallVector<Type> types(s.size() + 6, b.getF32Type());
  // A tile the score_mod's index mask shows whole drops that mask too; any
  // other goes through the score_mod as written.
  if (ctx.indexFull)
    needsMask = arith::OrIOp::create(
        b, needsMask,
        arith::XOrIOp::create(b, ctx.indexFull,
                              arith::ConstantIntOp::create(b, b.getI1Type(), 1)));
  auto ifMask = scf::IfOp::create(b, types, needsMask, /*withElse=*/true);
  for (bool masked : {true, false}) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(masked ? ifMask.thenBlock()
                                      : ifMask.elseBlock());
    SmallVector<Value> p(s.begin(), s.end());
    RowState r = st;
    ScoreContext c = ctx;
    c.needsMask = masked;
    if (!masked && ctx.indexFull)
      c.scoreMod = ctx.liveScoreMod;
    std::array<Value, 2> alpha = onlineSoftmaxStep(b, p, r, scale, c);
    p.append({r.m[0], r.m[1], r.l[0], r.l[1], alpha[0], alpha[1]});
    scf::YieldOp::create(b, p);
  }
  ValueRange res = ifMask.getResults();
  int64_t n = s.size();
  for (int64_t e = 0; e < n; ++e)
    s[e] = res[e];
  st = RowState{{res[n], res[n + 1]}, {res[n + 2], res[n + 3]}};
  return {res[n + 4], res[n + 5]};
}

SmallVector<Value> gpu_lowering::packA(ImplicitLocOpBuilder &b,
                                       ArrayRef<Value> p, Type elemType) {
  // Accumulator columns [16kb, 16kb+16) are exactly the register-A fragment
  // of k-block kb: a_r = (p[8kb+2r], p[8kb+2r+1]).
  // Each pair is rounded as one vector, which sm_80+ does in one
  // instruction (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32).
  SmallVector<Value> regs;
  auto pair = VectorType::get({2}, elemType);
  auto wide = VectorType::get({2}, b.getF32Type());
  auto one = VectorType::get({1}, b.getI32Type());
  for (size_t i = 0; i + 1 < p.size(); i += 2) {
    Value w = vector::FromElementsOp::create(b, wide, ValueRange{p[i], p[i + 1]});
    Value v = arith::TruncFOp::create(b, pair, w);
    Value c = vector::BitCastOp::create(b, one, v);
    regs.push_back(vector::ExtractOp::create(b, c, ArrayRef<int64_t>{0}));
  }
  return regs;
}
