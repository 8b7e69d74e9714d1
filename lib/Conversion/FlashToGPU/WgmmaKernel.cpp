//===- WgmmaKernel.cpp - the sm_90a strategy: TMA ring, wgmma, warpgroups -===//
//
// One CTA per (batch·head, block of blockM query rows). Warpgroup 0 is the
// producer: one thread loads Q once and streams K/V tiles into a ring of
// `stages` shared-memory slots with TMA, each slot guarded by a "full"
// mbarrier (TMA transaction bytes) and an "empty" mbarrier (one arrival per
// consumer warp). Warpgroups 1..n are consumers, 64 query rows each: per
// tile, S = QKᵀ by wgmma from shared memory, online softmax on the
// registers, O = alpha·O + PV by wgmma with P from registers. The tile loop
// comes in three schedules: serial, deferred PV (PV of tile t-1 under the
// softmax of tile t) and the older QK look-ahead (`overlap`); ping-pong
// orders the consumer warpgroups' GEMM issues in any but the last.
//
//===----------------------------------------------------------------------===//
#include "HopperPrimitives.h"
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
/// Values every part of the kernel body reads.
struct KernelEnv {
  const KernelConfig &cfg;
  const KernelSpec &spec;
  SmemLayout layout;
  Value tmaQ, tmaK, tmaV, outPtr, lsePtr;
  Value lq, lk, hkv;
  SmallVector<Value> batchSizes, captures;
  Value tid, bh, kvbh, q0;
  Value tBegin, tEnd;
  Value tiles; // 1024-aligned shared-memory base (!llvm.ptr<3>)
  SmallVector<Value> batchIdx; // bh delinearised over the query batch dims
};
} // namespace

static Value idxAdd(ImplicitLocOpBuilder &b, Value x, Value y) {
  return arith::AddIOp::create(b, x, y);
}
static Value idxMul(ImplicitLocOpBuilder &b, Value x, int64_t c) {
  return arith::MulIOp::create(b, x, constIdx(b, c));
}

/// Byte offset (i64) of stage `s` (index) plus a constant.
static Value stageOffset(ImplicitLocOpBuilder &b, KernelEnv &env, Value s,
                         int64_t stride, int64_t base) {
  Value off = toI64(b, idxMul(b, s, stride));
  return arith::AddIOp::create(b, off, constI64(b, base));
}

static void buildProducer(ImplicitLocOpBuilder &b, KernelEnv &env) {
  const KernelConfig &cfg = env.cfg;
  const KernelSpec &spec = env.spec;
  const SmemLayout &L = env.layout;
  int64_t S = cfg.stages;

  Value qFull = smemOffset(b, env.tiles, L.qFullOff());
  mbarArriveExpectTx(b, qFull, L.qBytes);
  Value bhI = toI32(b, env.bh), q0I = toI32(b, env.q0);
  for (int64_t p = 0; p < spec.headDim / 64; ++p)
    tmaLoad(b, smemOffset(b, env.tiles, p * cfg.blockM * 128), env.tmaQ,
            {constI32(b, 64 * p), q0I, bhI}, qFull);

  Value kvbhI = toI32(b, env.kvbh);
  auto loop = scf::ForOp::create(b, env.tBegin, env.tEnd, constIdx(b, 1));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value t = loop.getInductionVar();
  Value i = arith::SubIOp::create(b, t, env.tBegin);
  Value s = arith::RemUIOp::create(b, i, constIdx(b, S));
  Value n = arith::DivUIOp::create(b, i, constIdx(b, S));
  Value full = smemOffset(b, env.tiles,
                          stageOffset(b, env, s, 8, L.kvFullOff(0)));
  Value empty = smemOffset(b, env.tiles,
                           stageOffset(b, env, s, 8, L.kvEmptyOff(0, S)));
  // Slot reuse: wait until the consumers released the previous fill.
  Value reuse = arith::CmpIOp::create(b, arith::CmpIPredicate::uge, i,
                                      constIdx(b, S));
  auto ifReuse = scf::IfOp::create(b, reuse, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ifReuse.thenBlock());
    Value prev = arith::AddIOp::create(b, n, constIdx(b, 1));
    Value parity = arith::RemUIOp::create(b, prev, constIdx(b, 2));
    mbarWait(b, empty, toI32(b, parity));
  }
  mbarArriveExpectTx(b, full, L.kBytes + L.vBytes);
  Value kBase =
      smemOffset(b, env.tiles, stageOffset(b, env, s, L.stageBytes, L.kOff(0)));
  Value vBase = smemOffset(b, kBase, L.kBytes);
  Value row = toI32(b, idxMul(b, t, cfg.blockN));
  for (int64_t p = 0; p < spec.headDim / 64; ++p)
    tmaLoad(b, smemOffset(b, kBase, p * cfg.blockN * 128), env.tmaK,
            {constI32(b, 64 * p), row, kvbhI}, full);
  for (int64_t p = 0; p < spec.valueDim / 64; ++p)
    tmaLoad(b, smemOffset(b, vBase, p * cfg.blockN * 128), env.tmaV,
            {constI32(b, 64 * p), row, kvbhI}, full);
}

static void buildConsumer(ImplicitLocOpBuilder &b, KernelEnv &env,
                          Value wg) {
  const KernelConfig &cfg = env.cfg;
  const KernelSpec &spec = env.spec;
  const SmemLayout &L = env.layout;
  MLIRContext *ctx = b.getContext();
  int64_t S = cfg.stages, BM = cfg.blockM, BN = cfg.blockN;
  int64_t D = spec.headDim, Dv = spec.valueDim;
  Type elem = spec.elemType;

  Value c = arith::SubIOp::create(b, wg, constIdx(b, 1));
  Value ctid = arith::RemUIOp::create(b, env.tid, constIdx(b, 128));
  Value warp = arith::DivUIOp::create(b, ctid, constIdx(b, 32));
  Value lane = arith::RemUIOp::create(b, env.tid, constIdx(b, 32));
  Value quadLane = arith::RemUIOp::create(b, lane, constIdx(b, 4));

  // This thread's two rows (global query index) and its column offset.
  Value row0 = idxAdd(b, env.q0, idxMul(b, c, 64));
  row0 = idxAdd(b, row0, idxMul(b, warp, 16));
  row0 = idxAdd(b, row0, arith::DivUIOp::create(b, lane, constIdx(b, 4)));
  Value rows[2] = {row0, idxAdd(b, row0, constIdx(b, 8))};
  Value laneCol = idxMul(b, quadLane, 2);

  mbarWait(b, smemOffset(b, env.tiles, L.qFullOff()), constI32(b, 0));

  // Descriptors: K-major tiles advance 32 B (+2) per k16 inside a 64-column
  // panel; panels are rows·128 B apart. V (MN-major) advances 16 rows
  // (+128) per k16.
  Value qTile = smemOffset(b, env.tiles, toI64(b, idxMul(b, c, 64 * 128)));
  Value qDesc0 = wgmmaDescriptor(b, qTile, BM * 128, 1024);
  Value kDesc0 =
      wgmmaDescriptor(b, smemOffset(b, env.tiles, L.kOff(0)), BN * 128, 1024);
  Value vDesc0 =
      wgmmaDescriptor(b, smemOffset(b, env.tiles, L.vOff(0)), BN * 128, 1024);
  auto descAt = [&](Value d, int64_t units) -> Value {
    if (units == 0)
      return d;
    return LLVM::AddOp::create(b, d, constI64(b, units));
  };

  int64_t chunks = cfg.splitPV ? Dv / 64 : 1;
  int64_t chunkN = Dv / chunks;
  auto oType = accType(ctx, chunkN);
  auto sType = accType(ctx, BN);
  Type f32 = b.getF32Type();
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value fzero = constF32(b, 0.0);
  MaskAttr mask = spec.mask;
  Value lq = env.lq, lk = env.lk;

  // Slot of tile t and the parity of its fill.
  auto slotOf = [&](Value t) {
    Value i = arith::SubIOp::create(b, t, env.tBegin);
    Value s = arith::RemUIOp::create(b, i, constIdx(b, S));
    Value n = arith::DivUIOp::create(b, i, constIdx(b, S));
    return std::make_pair(
        s, toI32(b, arith::RemUIOp::create(b, n, constIdx(b, 2))));
  };
  auto waitFull = [&](Value t) {
    auto [s, parity] = slotOf(t);
    mbarWait(b,
             smemOffset(b, env.tiles, stageOffset(b, env, s, 8, L.kvFullOff(0))),
             parity);
    return s;
  };
  // One arrival per consumer warp releases the slot to the producer.
  auto release = [&](Value t) {
    auto [s, parity] = slotOf(t);
    (void)parity;
    Value lane0 = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                                        constIdx(b, 0));
    auto ifLane0 = scf::IfOp::create(b, lane0, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifLane0.thenBlock());
    mbarArrive(b, smemOffset(b, env.tiles,
                             stageOffset(b, env, s, 8, L.kvEmptyOff(0, S))));
  };
  // S = Q K_tᵀ, issued and committed, not waited for.
  auto issueQK = [&](Value s) -> Value {
    Value stageUnits = toI64(b, idxMul(b, s, L.stageBytes / 16));
    Value kd = LLVM::AddOp::create(b, kDesc0, stageUnits);
    wgmmaFence(b);
    Value acc = LLVM::UndefOp::create(b, sType);
    for (int64_t kk = 0; kk < D / 16; ++kk) {
      int64_t p = kk / 4, w = kk % 4;
      Value a = descAt(qDesc0, p * BM * 128 / 16 + 2 * w);
      Value bd = descAt(kd, p * BN * 128 / 16 + 2 * w);
      acc = wgmmaSS(b, acc, a, bd, BN, elem, /*accumulate=*/kk > 0);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    return acc;
  };
  // O += P V_t, issued and committed, not waited for.
  auto issuePV = [&](SmallVector<Value> &O, ArrayRef<Value> aRegs, Value s) {
    Value stageUnits = toI64(b, idxMul(b, s, L.stageBytes / 16));
    Value vd = LLVM::AddOp::create(b, vDesc0, stageUnits);
    wgmmaFence(b);
    for (int64_t kb = 0; kb < BN / 16; ++kb)
      for (int64_t k = 0; k < chunks; ++k) {
        Value d = descAt(vd, kb * 16 * 128 / 16 + k * BN * 128 / 16);
        O[k] = wgmmaRS(b, O[k], aRegs.slice(4 * kb, 4), d, chunkN, elem);
      }
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
  };
  // Tiles that need no per-element mask (inside Lk and entirely on the
  // allowed side of the causal/window bounds for this warpgroup's 64 rows)
  // take a softmax without index arithmetic.
  Value wgRowLo = idxAdd(b, env.q0, idxMul(b, c, 64));
  Value wgRowHi = idxAdd(b, wgRowLo, constIdx(b, 63));
  Value diagOff = maskDiagonalOffset(b, mask, lq, lk);
  auto tileNeedsMask = [&](Value t) -> Value {
    return tileNeedsElementMask(b, mask, idxMul(b, t, BN), BN, wgRowLo,
                                wgRowHi, lk, diagOff);
  };
  // Softmax of one tile: returns p (in sv), alpha, and the new row state.
  auto softmax = [&](Value t, SmallVectorImpl<Value> &sv, RowState &st)
      -> std::array<Value, 2> {
    Value needsMask = tileNeedsMask(t);
    ScoreContext sc = makeScoreContext(b, mask, spec.scoreMod, rows,
                                       idxMul(b, t, BN), laneCol, lq, lk,
                                       env.batchIdx, env.captures,
                                       /*needsMask=*/true);
    return maskedSoftmaxStep(b, sv, st, spec.scale, needsMask, sc);
  };
  auto rescale = [&](SmallVector<Value> &O, std::array<Value, 2> alpha) {
    for (int64_t k = 0; k < chunks; ++k) {
      Value o = O[k];
      for (int64_t e = 0; e < chunkN / 2; ++e) {
        Value x = LLVM::ExtractValueOp::create(b, o, e);
        x = arith::MulFOp::create(b, x, alpha[AccumulatorLayout::rowHalf(e)]);
        o = LLVM::InsertValueOp::create(b, o, x, e);
      }
      O[k] = o;
    }
  };
  auto extract = [&](Value acc) {
    SmallVector<Value> sv;
    for (int64_t e = 0; e < BN / 2; ++e)
      sv.push_back(LLVM::ExtractValueOp::create(b, acc, e));
    return sv;
  };

  // Ping-pong between consumer warpgroups: warpgroup c issues its GEMMs only
  // after warpgroup c-1 issued its own (named barrier 1+c, counted over the
  // two warpgroups that meet there). Without it all warpgroups wait on the
  // same full barrier, issue together, share the tensor cores, and then all
  // do their softmax while the tensor cores idle; in turn, one warpgroup's
  // softmax runs under the other's GEMMs.
  int64_t nWG = cfg.consumerWarpgroups;
  bool pingpong = cfg.pingpong && nWG > 1;
  Value ppThreads, ppOwn, ppNext;
  if (pingpong) {
    ppThreads = constI32(b, 256);
    Value cI = toI32(b, c);
    ppOwn = arith::AddIOp::create(b, cI, constI32(b, 1));
    ppNext = arith::AddIOp::create(
        b, arith::RemUIOp::create(b, ppOwn, constI32(b, nWG)),
        constI32(b, 1));
    // Nobody precedes the first warpgroup's first turn: it opens it itself.
    Value first =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, c, constIdx(b, 0));
    auto ifFirst = scf::IfOp::create(b, first, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    NVVM::BarrierArriveOp::create(b, ppOwn, ppThreads);
  }
  auto waitTurn = [&] {
    if (pingpong)
      NVVM::BarrierOp::create(b, Type(), ppOwn, ppThreads,
                              NVVM::BarrierReductionAttr(), Value());
  };
  auto passTurn = [&] {
    if (pingpong)
      NVVM::BarrierArriveOp::create(b, ppNext, ppThreads);
  };

  // The tile loop over [from, tEnd): O, the row state and `extra` values
  // are carried; the builder is left at the start of the body.
  struct TileIter {
    scf::ForOp loop;
    Value t;
    SmallVector<Value> O;
    RowState st;
    SmallVector<Value> extra;
  };
  auto openLoop = [&](Value from, ArrayRef<Value> O0, const RowState &st0,
                      ArrayRef<Value> extra0) {
    SmallVector<Value> init(O0.begin(), O0.end());
    init.append({st0.m[0], st0.m[1], st0.l[0], st0.l[1]});
    init.append(extra0.begin(), extra0.end());
    TileIter it;
    it.loop = scf::ForOp::create(b, from, env.tEnd, constIdx(b, 1), init);
    b.setInsertionPointToStart(it.loop.getBody());
    it.t = it.loop.getInductionVar();
    auto iter = it.loop.getRegionIterArgs();
    it.O.assign(iter.begin(), iter.begin() + chunks);
    it.st = RowState{{iter[chunks], iter[chunks + 1]},
                     {iter[chunks + 2], iter[chunks + 3]}};
    it.extra.assign(iter.begin() + chunks + 4, iter.end());
    return it;
  };
  // Yields and leaves the builder after the loop; returns its results.
  auto closeLoop = [&](TileIter &it, ArrayRef<Value> O, const RowState &st,
                       ArrayRef<Value> extra) {
    SmallVector<Value> yields(O.begin(), O.end());
    yields.append({st.m[0], st.m[1], st.l[0], st.l[1]});
    yields.append(extra.begin(), extra.end());
    scf::YieldOp::create(b, yields);
    b.setInsertionPointAfter(it.loop);
    return SmallVector<Value>(it.loop.getResults());
  };
  auto fenceAll = [&](SmallVector<Value> &O) {
    for (Value &o : O)
      o = fenceRegisters(b, o);
  };

  SmallVector<Value> O0;
  for (int64_t k = 0; k < chunks; ++k)
    O0.push_back(LLVM::ZeroOp::create(b, oType));
  RowState st0{{negInf, negInf}, {fzero, fzero}};
  Value one = constIdx(b, 1);
  SmallVector<Value> res;

  if (cfg.deferPV) {
    // FA3's order: PV of tile t-1 is issued right behind QK of tile t and
    // runs during the softmax of tile t. Only P_{t-1} (BN/4 packed
    // registers) crosses an iteration, not a second S accumulator. A slot
    // is released once PV of its tile completed, one iteration late, hence
    // stages >= 3.
    Value nonEmpty = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                           env.tBegin, env.tEnd);
    int64_t nP = BN / 4;
    Type i32 = b.getI32Type();
    SmallVector<Type> proTypes(chunks, oType);
    proTypes.append(4, f32);
    proTypes.append(nP, i32);
    auto pro = scf::IfOp::create(b, proTypes, nonEmpty, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(pro.thenBlock());
      Value s = waitFull(env.tBegin);
      waitTurn();
      Value acc = issueQK(s);
      passTurn();
      NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
      SmallVector<Value> sv = extract(fenceRegisters(b, acc));
      RowState st = st0;
      (void)softmax(env.tBegin, sv, st); // O is still zero: nothing to rescale
      SmallVector<Value> yields(O0);
      yields.append({st.m[0], st.m[1], st.l[0], st.l[1]});
      for (Value p : packA(b, sv, elem))
        yields.push_back(p);
      scf::YieldOp::create(b, yields);
      b.setInsertionPointToStart(pro.elseBlock());
      SmallVector<Value> none(O0);
      none.append({negInf, negInf, fzero, fzero});
      Value undefI32 = LLVM::UndefOp::create(b, i32);
      none.append(nP, undefI32);
      scf::YieldOp::create(b, none);
    }
    auto pr = pro.getResults();
    SmallVector<Value> proO(pr.begin(), pr.begin() + chunks);
    RowState proSt{{pr[chunks], pr[chunks + 1]}, {pr[chunks + 2], pr[chunks + 3]}};
    SmallVector<Value> proP(pr.begin() + chunks + 4, pr.end());

    TileIter it =
        openLoop(idxAdd(b, env.tBegin, one), proO, proSt, proP);
    {
      Value t = it.t;
      SmallVector<Value> O = it.O;
      RowState st = it.st;
      Value tPrev = arith::SubIOp::create(b, t, one);
      Value s = waitFull(t);
      waitTurn();
      Value acc = issueQK(s);
      issuePV(O, it.extra, slotOf(tPrev).first);
      passTurn();
      // S_t is complete; PV_{t-1} may still run.
      NVVM::WgmmaWaitGroupSyncOp::create(b, 1);
      SmallVector<Value> sv = extract(fenceRegisters(b, acc));
      std::array<Value, 2> alpha = softmax(t, sv, st);
      NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
      fenceAll(O);
      release(tPrev);
      rescale(O, alpha);
      SmallVector<Value> P = packA(b, sv, elem);
      res = closeLoop(it, O, st, P);
    }
    // PV of the last tile.
    SmallVector<Type> oTypes(chunks, oType);
    auto epi = scf::IfOp::create(b, oTypes, nonEmpty, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(epi.thenBlock());
      SmallVector<Value> O(res.begin(), res.begin() + chunks);
      SmallVector<Value> P(res.begin() + chunks + 4, res.end());
      Value tLast = arith::SubIOp::create(b, env.tEnd, one);
      waitTurn();
      issuePV(O, P, slotOf(tLast).first);
      passTurn();
      NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
      fenceAll(O);
      release(tLast);
      scf::YieldOp::create(b, O);
      b.setInsertionPointToStart(epi.elseBlock());
      scf::YieldOp::create(b, ArrayRef<Value>(res).take_front(chunks));
    }
    for (int64_t k = 0; k < chunks; ++k)
      res[k] = epi.getResult(k);
  } else if (!cfg.overlap) {
    TileIter it = openLoop(env.tBegin, O0, st0, {});
    Value t = it.t;
    SmallVector<Value> O = it.O;
    RowState st = it.st;
    Value s = waitFull(t);
    waitTurn();
    Value acc = issueQK(s);
    passTurn();
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    SmallVector<Value> sv = extract(acc);
    std::array<Value, 2> alpha = softmax(t, sv, st);
    rescale(O, alpha);
    issuePV(O, packA(b, sv, elem), s);
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    release(t);
    res = closeLoop(it, O, st, {});
  } else {
    // Software pipeline: QK of tile t+1 runs on the tensor cores while this
    // warpgroup does the softmax of tile t, and PV of tile t runs while the
    // next iteration waits for K. A slot is released one iteration late
    // (after PV of its tile is known complete), hence stages >= 3.
    Value nonEmpty = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                           env.tBegin, env.tEnd);
    auto pro = scf::IfOp::create(b, TypeRange{sType}, nonEmpty, true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(pro.thenBlock());
      Value s = waitFull(env.tBegin);
      scf::YieldOp::create(b, issueQK(s));
      b.setInsertionPointToStart(pro.elseBlock());
      scf::YieldOp::create(b, Value(LLVM::UndefOp::create(b, sType)));
    }
    TileIter it = openLoop(env.tBegin, O0, st0, {pro.getResult(0)});
    Value t = it.t;
    SmallVector<Value> O = it.O;
    RowState st = it.st;
    Value sCur = it.extra[0];
    Value tNext = idxAdd(b, t, one);
    Value hasNext =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, tNext, env.tEnd);
    auto next = scf::IfOp::create(b, TypeRange{sType}, hasNext, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(next.thenBlock());
      Value s = waitFull(tNext);
      Value acc = issueQK(s);
      // Everything but the QK just issued: S_t and PV_{t-1}.
      NVVM::WgmmaWaitGroupSyncOp::create(b, 1);
      scf::YieldOp::create(b, acc);
      b.setInsertionPointToStart(next.elseBlock());
      NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
      scf::YieldOp::create(b, Value(LLVM::UndefOp::create(b, sType)));
    }
    // Keep reads of S_t and O after the wait.
    sCur = fenceRegisters(b, sCur);
    fenceAll(O);
    Value i = arith::SubIOp::create(b, t, env.tBegin);
    Value hasPrev =
        arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, i, constIdx(b, 0));
    auto ifPrev = scf::IfOp::create(b, hasPrev, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifPrev.thenBlock());
      release(arith::SubIOp::create(b, t, one));
    }
    SmallVector<Value> sv = extract(sCur);
    std::array<Value, 2> alpha = softmax(t, sv, st);
    rescale(O, alpha);
    issuePV(O, packA(b, sv, elem), slotOf(t).first);
    res = closeLoop(it, O, st, {next.getResult(0)});
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    for (int64_t k = 0; k < chunks; ++k)
      res[k] = fenceRegisters(b, res[k]);
  }
  // Epilogue: O / l, stored straight from registers; rows past Lq skipped.
  Value mFin[2] = {res[chunks], res[chunks + 1]};
  Value lFin[2] = {quadReduce(b, res[chunks + 2], false),
                   quadReduce(b, res[chunks + 3], false)};
  RowResult fin[2] = {finishRow(b, mFin[0], lFin[0], spec.hasLse),
                      finishRow(b, mFin[1], lFin[1], spec.hasLse)};
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  auto pairTy = VectorType::get({2}, elem);
  int64_t eltBytes = elem.getIntOrFloatBitWidth() / 8;
  Value rowBase = arith::MulIOp::create(b, env.bh, env.lq); // bh·Lq + row
  for (int h = 0; h < 2; ++h) {
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, rows[h], env.lq);
    auto ifRow = scf::IfOp::create(b, inRange, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    Value flatRow = idxAdd(b, rowBase, rows[h]);
    Value rowOff = idxAdd(b, idxMul(b, flatRow, Dv), laneCol);
    // Column pairs (c, c+1) of the row half are adjacent accumulator
    // elements: one 2-element store each.
    for (int64_t k = 0; k < chunks; ++k)
      for (int64_t c = 0; c < chunkN; c += 8) {
        int64_t e = AccumulatorLayout::element(c, h);
        Value x0 = LLVM::ExtractValueOp::create(b, res[k], e);
        Value x1 = LLVM::ExtractValueOp::create(b, res[k], e + 1);
        x0 = arith::TruncFOp::create(
            b, elem, arith::MulFOp::create(b, x0, fin[h].inv));
        x1 = arith::TruncFOp::create(
            b, elem, arith::MulFOp::create(b, x1, fin[h].inv));
        Value v = vector::FromElementsOp::create(b, pairTy, ValueRange{x0, x1});
        int64_t col = k * chunkN + AccumulatorLayout::column(e);
        Value off = toI64(b, idxAdd(b, rowOff, constIdx(b, col)));
        Value ptr = LLVM::GEPOp::create(b, ptrTy, elem, env.outPtr,
                                        ValueRange{off});
        LLVM::StoreOp::create(b, v, ptr, /*alignment=*/2 * eltBytes);
      }
    if (spec.hasLse) {
      // One lane of the quad writes the row's log-sum-exp.
      Value q0 = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, quadLane,
                                       constIdx(b, 0));
      auto ifQ = scf::IfOp::create(b, q0, /*withElse=*/false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifQ.thenBlock());
      Value lse = fin[h].lse;
      Value ptr = LLVM::GEPOp::create(b, ptrTy, b.getF32Type(), env.lsePtr,
                                      ValueRange{toI64(b, flatRow)});
      LLVM::StoreOp::create(b, lse, ptr, /*alignment=*/4);
    }
  }
}

gpu::GPUFuncOp gpu_lowering::buildWgmmaKernel(OpBuilder &ob, Location loc,
                                              gpu::GPUModuleOp module,
                                              const KernelConfig &cfg,
                                              const KernelSpec &spec) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());

  // Dynamic shared memory: `extern __shared__ __align__(1024) char smem[]`.
  auto arrTy = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
  LLVM::GlobalOp::create(b, arrTy, /*isConstant=*/false,
                         LLVM::Linkage::External, "flash_smem", Attribute(),
                         /*alignment=*/1024, /*addrSpace=*/3);

  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  auto sptrTy = LLVM::LLVMPointerType::get(ctx, 3);
  Type idx = b.getIndexType();
  SmallVector<Type> argTypes(4, ptrTy);
  if (spec.hasLse)
    argTypes.push_back(ptrTy);
  argTypes.append(3 + spec.numBatchDims, idx);
  for (MemRefType t : spec.captureTypes)
    argTypes.push_back(t);
  auto fn = gpu::GPUFuncOp::create(b, "kernel",
                                   FunctionType::get(ctx, argTypes, {}));
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int32_t threads = static_cast<int32_t>(cfg.threads());
  // A register cap at entry (launch bounds with one CTA per SM) is what
  // lets setmaxnreg move registers from the producer to the consumers.
  fn->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({threads, 1, 1}));
  fn->setAttr("nvvm.minctasm",
             b.getI32IntegerAttr(static_cast<int32_t>(cfg.ctasPerSM)));

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  KernelEnv env{cfg, spec, SmemLayout(cfg, spec)};
  unsigned a = 0;
  env.tmaQ = entry.getArgument(a++);
  env.tmaK = entry.getArgument(a++);
  env.tmaV = entry.getArgument(a++);
  env.outPtr = entry.getArgument(a++);
  if (spec.hasLse)
    env.lsePtr = entry.getArgument(a++);
  env.lq = entry.getArgument(a++);
  env.lk = entry.getArgument(a++);
  env.hkv = entry.getArgument(a++);
  for (int64_t d = 0; d < spec.numBatchDims; ++d)
    env.batchSizes.push_back(entry.getArgument(a++));
  for (size_t k = 0; k < spec.captureTypes.size(); ++k)
    env.captures.push_back(entry.getArgument(a++));

  env.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value qBlock = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  if (spec.hasMask()) {
    // Causal/window blocks late in the sequence carry the most tiles:
    // schedule them first so the tail of the grid is short ones.
    Value nq = gpu::GridDimOp::create(b, gpu::Dimension::x);
    qBlock = arith::SubIOp::create(
        b, arith::SubIOp::create(b, nq, constIdx(b, 1)), qBlock);
  }
  env.bh = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  env.q0 = idxMul(b, qBlock, cfg.blockM);

  HeadIndices heads = headIndices(b, env.bh, env.batchSizes, env.hkv,
                                  /*withBatchIndices=*/spec.scoreMod);
  env.kvbh = heads.kvbh;
  env.batchIdx = heads.batchIdx;
  std::tie(env.tBegin, env.tEnd) = visibleTileRange(
      b, spec.mask, env.q0, cfg.blockM, env.lq, env.lk, cfg.blockN);

  // Align the dynamic shared-memory base to 1024 B (128B-swizzle atoms).
  Value base = LLVM::AddressOfOp::create(b, sptrTy, "flash_smem");
  Value baseInt = LLVM::PtrToIntOp::create(b, b.getI64Type(), base);
  Value up = LLVM::AddOp::create(b, baseInt, constI64(b, 1023));
  Value aligned = LLVM::AndOp::create(b, up, constI64(b, ~int64_t(1023)));
  Value pad = LLVM::SubOp::create(b, aligned, baseInt);
  env.tiles = smemOffset(b, base, pad);

  const SmemLayout &L = env.layout;
  Value isT0 = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, env.tid,
                                     constIdx(b, 0));
  {
    auto ifInit = scf::IfOp::create(b, isT0, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifInit.thenBlock());
    mbarInit(b, smemOffset(b, env.tiles, L.qFullOff()), 1);
    for (int64_t s = 0; s < cfg.stages; ++s) {
      mbarInit(b, smemOffset(b, env.tiles, L.kvFullOff(s)), 1);
      mbarInit(b, smemOffset(b, env.tiles, L.kvEmptyOff(s, cfg.stages)),
               4 * cfg.consumerWarpgroups);
    }
  }
  gpu::BarrierOp::create(b);

  Value wg = arith::DivUIOp::create(b, env.tid, constIdx(b, 128));
  Value isProducer =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, wg, constIdx(b, 0));
  auto roles = scf::IfOp::create(b, isProducer, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.thenBlock());
    if (cfg.producerRegs > 0)
      NVVM::SetMaxRegisterOp::create(b, cfg.producerRegs,
                                     NVVM::SetMaxRegisterAction::decrease);
    auto ifT0 = scf::IfOp::create(b, isT0, /*withElse=*/false);
    b.setInsertionPointToStart(ifT0.thenBlock());
    buildProducer(b, env);
  }
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.elseBlock());
    if (cfg.consumerRegs > 0)
      NVVM::SetMaxRegisterOp::create(b, cfg.consumerRegs,
                                     NVVM::SetMaxRegisterAction::increase);
    buildConsumer(b, env, wg);
  }
  gpu::ReturnOp::create(b);
  return fn;
}
