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
  // The TMA descriptors of spec.staged, in its order.
  SmallVector<Value> captureMaps;
  Value sinks; // [Hq], null without sinks
  Value tid, bh, kvbh, q0;
  // A varlen batch: the sequence's first query and key token, and the token
  // count (lq, lk are the sequence's own lengths then).
  Value qOff, kOff, tq;
  // The item's steps over its key tiles, and the hidden run they jump
  // over (TileWalk; null without one): loops and ring slots follow the
  // steps, key coordinates keyTile(t).
  Value tBegin, tEnd, gapAt, gapLen;
  // The decode form: the partials, the split count and this CTA's split.
  Value oPartPtr, lsePartPtr, splits, split;
  // With spec.fusedCombine: the arrival counters (global i32 per row block).
  Value splitCounters;
  // Query rows per head as a mask sees them: lq, or lq / G with G query
  // heads packed per K/V head.
  Value qLen;
  // A paged cache: the block table, the lengths, the pool's page count, and
  // this CTA's sequence and K/V head.
  Value table, seqLens, numPages, kvBatch, kvHead;
  Value tiles; // 1024-aligned shared-memory base (!llvm.ptr<3>)
  // A persistent grid: the work item's ordinal among this CTA's (its Q
  // buffer and that buffer's barrier parity), and the tiles its earlier
  // items streamed, where this item's tiles continue the ring's slot and
  // parity sequence. Zero else.
  Value workIter, tileBase;
  // And the launch's work counter (global i32).
  Value workCounter;
  SmallVector<Value> batchIdx; // bh delinearised over the query batch dims
  // The batch indices that bound the item's rows, per dim, for sorting
  // tiles by an index mask: batchIdx twice, or with packed heads the first
  // and last of the K/V head's G query heads.
  SmallVector<Value> batchLo, batchHi;
  // With packed heads and a score_mod: the query's batch sizes (the
  // kernel's end in Hkv, the score_mod reads query heads).
  SmallVector<Value> queryBatchSizes;
  // The score_mod's mask of the indices alone, where tiles are sorted by it.
  std::optional<IndexMask> indexMask;

  /// The key tile of step `t`.
  Value keyTile(ImplicitLocOpBuilder &b, Value t) const {
    return TileWalk{tBegin, tEnd, gapAt, gapLen}.tile(b, t);
  }
};
} // namespace

static Value idxAdd(ImplicitLocOpBuilder &b, Value x, Value y) {
  return arith::AddIOp::create(b, x, y);
}
static Value idxMul(ImplicitLocOpBuilder &b, Value x, int64_t c) {
  return arith::MulIOp::create(b, x, constIdx(b, c));
}

/// Tile t's place in the K/V ring both roles walk: its slot and how many
/// times the ring wrapped before it (i32). Counted in 32 bits: the remainder
/// and quotient by a stage count that is no power of two are a multiply-high
/// each there, where 64-bit ones cost a dozen multiplies on every use in the
/// tile loop (bench/NOTES run 68). A CTA walks far fewer than 2^32 tiles.
namespace {
struct RingPos {
  Value slot, round;
};
} // namespace
static RingPos ringPos(ImplicitLocOpBuilder &b, KernelEnv &env, Value t) {
  Value i = idxAdd(b, arith::SubIOp::create(b, t, env.tBegin), env.tileBase);
  Value i32 = toI32(b, i);
  Value stages = constI32(b, env.cfg.stages);
  Value slot = arith::RemUIOp::create(b, i32, stages);
  Value round = arith::DivUIOp::create(b, i32, stages);
  return {slot, round};
}

/// Byte offset (i64) of stage `slot` (i32) plus a constant.
static Value stageOffset(ImplicitLocOpBuilder &b, Value slot, int64_t stride,
                         int64_t base) {
  Value off = arith::MulIOp::create(b, slot, constI32(b, stride));
  off = arith::AddIOp::create(b, off, constI32(b, base));
  return arith::ExtUIOp::create(b, b.getI64Type(), off);
}

/// Row `token` of a paged pool for key j of this CTA's sequence: row j mod
/// page_size of the page the block table names for j / page_size, the slot
/// and the page clamped (whatever the table holds, nothing outside the pool
/// is read; keys past the sequence are masked).
static Value pagedToken(ImplicitLocOpBuilder &b, KernelEnv &env, Value j) {
  int64_t P = env.spec.pageSize;
  Value one = constIdx(b, 1), zero = constIdx(b, 0);
  Value lastSlot =
      arith::SubIOp::create(b, memref::DimOp::create(b, env.table, 1), one);
  Value slot = arith::MinSIOp::create(
      b, arith::DivUIOp::create(b, j, constIdx(b, P)), lastSlot);
  Value page = arith::IndexCastOp::create(
      b, b.getIndexType(),
      memref::LoadOp::create(b, env.table, ValueRange{env.kvBatch, slot}));
  page = arith::MinSIOp::create(
      b, arith::MaxSIOp::create(b, page, zero),
      arith::SubIOp::create(b, env.numPages, one));
  return idxAdd(b, idxMul(b, page, P),
                arith::RemUIOp::create(b, j, constIdx(b, P)));
}

namespace {
/// The Q buffer of this CTA's work item `item` and how many items that buffer
/// held before it (its barriers' phase). With one buffer: none (buffer 0)
/// and the item's ordinal.
struct QSlot {
  Value buffer, fill;
};
} // namespace
static QSlot qSlot(ImplicitLocOpBuilder &b, const KernelEnv &env, Value item) {
  int64_t n = env.layout.qBuffers;
  if (n == 1)
    return {Value(), item};
  return {arith::RemUIOp::create(b, item, constIdx(b, n)),
          arith::DivUIOp::create(b, item, constIdx(b, n))};
}

/// The address of Q buffer `q.buffer`'s copy of a per-buffer object whose
/// first copy is at `off0`, `stride` bytes apart.
static Value qSlotAddr(ImplicitLocOpBuilder &b, const KernelEnv &env,
                       const QSlot &q, int64_t off0, int64_t stride) {
  if (!q.buffer)
    return smemOffset(b, env.tiles, off0);
  // One op per statement: the IR's order must not depend on the order a
  // compiler evaluates call arguments in.
  Value base = constIdx(b, off0);
  Value step = idxMul(b, q.buffer, stride);
  Value off = toI64(b, idxAdd(b, base, step));
  return smemOffset(b, env.tiles, off);
}

/// A persistent grid's producer, before it publishes item env.workIter:
/// the item's Q buffer (and its item slot) are free once every consumer
/// warp is done with the QKᵀs of the item that buffer held before.
static void waitQBufferFree(ImplicitLocOpBuilder &b, KernelEnv &env,
                            const QSlot &q) {
  Value later = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, q.fill,
                                      constIdx(b, 0));
  auto ifLater = scf::IfOp::create(b, later, /*withElse=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifLater.thenBlock());
  Value next = arith::AddIOp::create(b, q.fill, constIdx(b, 1));
  Value parity = toI32(b, arith::RemUIOp::create(b, next, constIdx(b, 2)));
  Value empty = qSlotAddr(b, env, q, env.layout.qEmptyOff(0), 8);
  mbarWait(b, empty, parity);
}

/// A persistent grid's producer, after its last fetch from the work
/// counter: counts this CTA out, and the last CTA out zeroes the counter and
/// the count for the next launch on the stream. The count's acq_rel orders
/// every CTA's fetches (the same thread's, earlier) before the reset.
static void resetWorkCounter(ImplicitLocOpBuilder &b, KernelEnv &env) {
  Type i32 = b.getI32Type();
  auto ptrTy = LLVM::LLVMPointerType::get(b.getContext());
  Value exits = LLVM::GEPOp::create(b, ptrTy, i32, env.workCounter,
                                    ArrayRef<LLVM::GEPArg>{1});
  Value before =
      LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::add, exits,
                                constI32(b, 1), LLVM::AtomicOrdering::acq_rel);
  // One op per statement: the IR's order must not depend on the order a
  // compiler evaluates call arguments in.
  Value out = arith::IndexCastOp::create(b, b.getIndexType(), before);
  Value gx = gpu::GridDimOp::create(b, gpu::Dimension::x);
  Value gy = gpu::GridDimOp::create(b, gpu::Dimension::y);
  Value gz = gpu::GridDimOp::create(b, gpu::Dimension::z);
  Value ctas = arith::MulIOp::create(b, arith::MulIOp::create(b, gx, gy), gz);
  Value lastOut = arith::SubIOp::create(b, ctas, constIdx(b, 1));
  Value last = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, out, lastOut);
  auto ifLast = scf::IfOp::create(b, last, /*withElse=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifLast.thenBlock());
  LLVM::StoreOp::create(b, constI32(b, 0), env.workCounter, /*alignment=*/4);
  LLVM::StoreOp::create(b, constI32(b, 0), exits, /*alignment=*/4);
}

/// TMA coordinates of the [batch·heads, L, D] views, innermost first:
/// (column, row, batch·head).
static SmallVector<Value, 3> viewCoords(ImplicitLocOpBuilder &b, int64_t col,
                                        Value row, Value head) {
  return {constI32(b, col), toI32(b, row), toI32(b, head)};
}

/// A persistent grid's producer, once this item's loads are issued: the
/// next item's Q and the K/V tiles it streams first are pulled into L2. Q
/// cannot be loaded into shared memory before this item's last QKᵀ frees
/// its buffer, and the K/V ring follows it; from L2 both arrive in a
/// fraction of the DRAM latency the consumers would otherwise wait out at
/// every item boundary (bench/NOTES run 72).
static void prefetchItemToL2(ImplicitLocOpBuilder &b, const KernelEnv &next) {
  const KernelConfig &cfg = next.cfg;
  const KernelSpec &spec = next.spec;
  auto prefetch = [&](Value map, int64_t panels, Value row, Value head) {
    for (int64_t p = 0; p < panels; ++p)
      NVVM::CpAsyncBulkTensorPrefetchOp::create(
          b, map, viewCoords(b, 64 * p, row, head), ValueRange{},
          NVVM::TMALoadMode::TILE, Value());
  };
  prefetch(next.tmaQ, spec.panelD() / 64, next.q0, next.bh);
  for (int64_t k = 0; k < cfg.stages; ++k) {
    Value t = idxAdd(b, next.tBegin, constIdx(b, k));
    auto ifTile = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, t, next.tEnd),
        /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifTile.thenBlock());
    Value row = idxMul(b, next.keyTile(b, t), cfg.blockN);
    prefetch(next.tmaK, spec.panelD() / 64, row, next.kvbh);
    prefetch(next.tmaV, spec.panelDv() / 64, row, next.kvbh);
  }
}

static void buildProducer(ImplicitLocOpBuilder &b, KernelEnv &env) {
  const KernelConfig &cfg = env.cfg;
  const KernelSpec &spec = env.spec;
  const SmemLayout &L = env.layout;

  QSlot q = qSlot(b, env, env.workIter);
  Value qFull = qSlotAddr(b, env, q, L.qFullOff(0), 8);
  Value qTile = qSlotAddr(b, env, q, L.qOff(0), L.qBytes);
  mbarArriveExpectTx(b, qFull, L.qBytes);
  // Coordinates innermost first: (column, head, token) of a packed batch
  // or a paged pool.
  auto tokenCoords = [&](int64_t col, Value head, Value token) {
    return SmallVector<Value, 3>{constI32(b, col), toI32(b, head),
                                 toI32(b, token)};
  };
  for (int64_t p = 0; p < spec.panelD() / 64; ++p)
    tmaLoad(b, smemOffset(b, qTile, p * cfg.blockM * 128), env.tmaQ,
            spec.varlen
                ? tokenCoords(64 * p, env.bh, idxAdd(b, env.qOff, env.q0))
                : viewCoords(b, 64 * p, env.q0, env.bh),
            qFull);

  auto loop = scf::ForOp::create(b, env.tBegin, env.tEnd, constIdx(b, 1));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value t = loop.getInductionVar();
  auto [s, n] = ringPos(b, env, t);
  Value row = idxMul(b, env.keyTile(b, t), cfg.blockN);
  // A paged tile is boxes of `box` keys, each from its own page. The table
  // reads are issued before the wait for the slot, which hides them.
  int64_t box = spec.pageSize > 0 ? pagedBoxRows(cfg, spec) : cfg.blockN;
  SmallVector<Value> tokens;
  if (spec.pageSize > 0)
    for (int64_t k = 0; k < cfg.blockN / box; ++k)
      tokens.push_back(pagedToken(b, env, idxAdd(b, row, constIdx(b, k * box))));
  Value full = smemOffset(b, env.tiles, stageOffset(b, s, 8, L.kvFullOff(0)));
  Value empty = smemOffset(b, env.tiles, stageOffset(b, s, 8, L.kvEmptyOff(0)));
  // Slot reuse: wait until the consumers released the previous fill.
  Value reuse =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, n, constI32(b, 0));
  auto ifReuse = scf::IfOp::create(b, reuse, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ifReuse.thenBlock());
    Value prev = arith::AddIOp::create(b, n, constI32(b, 1));
    mbarWait(b, empty, arith::RemUIOp::create(b, prev, constI32(b, 2)));
  }
  mbarArriveExpectTx(b, full, L.kBytes + L.vBytes + L.captureBytes);
  Value kBase =
      smemOffset(b, env.tiles, stageOffset(b, s, L.stageBytes, L.kOff(0)));
  Value vBase = smemOffset(b, kBase, L.kBytes);
  auto loadTile = [&](Value base, Value tma, int64_t panels) {
    for (int64_t p = 0; p < panels; ++p) {
      Value panel = smemOffset(b, base, p * cfg.blockN * 128);
      if (spec.pageSize > 0) {
        for (int64_t k = 0; k < cfg.blockN / box; ++k)
          tmaLoad(b, smemOffset(b, panel, k * box * 128), tma,
                  tokenCoords(64 * p, env.kvHead, tokens[k]), full);
      } else if (spec.varlen) {
        tmaLoad(b, panel, tma,
                tokenCoords(64 * p, env.kvbh, idxAdd(b, env.kOff, row)), full);
      } else {
        tmaLoad(b, panel, tma, viewCoords(b, 64 * p, row, env.kvbh), full);
      }
    }
  };
  loadTile(kBase, env.tmaK, spec.panelD() / 64);
  loadTile(vBase, env.tmaV, spec.panelDv() / 64);
  // Staged captures: the CTA's rows of the tile's keys, panel by panel;
  // coordinates innermost first (key, query, then the leading indices).
  for (auto [i, c] : llvm::enumerate(spec.staged)) {
    SmallVector<Value> lead;
    for (auto [dim, k] : llvm::zip(c.leadBatchDim, c.leadConstant))
      lead.push_back(toI32(b, dim >= 0 ? env.batchIdx[dim] : constIdx(b, k)));
    Value tile = smemOffset(b, kBase, L.captureOff[i]);
    for (int64_t p = 0; p < cfg.blockN / c.panelKeys(); ++p) {
      SmallVector<Value> coords = {
          toI32(b, idxAdd(b, row, constIdx(b, p * c.panelKeys()))),
          toI32(b, env.q0)};
      coords.append(lead.rbegin(), lead.rend());
      tmaLoad(b, smemOffset(b, tile, p * cfg.blockM * 128), env.captureMaps[i],
              coords, full);
    }
  }
}

namespace {
/// What the consumers' tile loop carries: the O accumulators (one per PV
/// chunk), the row state, and what a schedule passes to the next iteration
/// (P of the previous tile, or S of the next one). Flattened in this order
/// into scf.for iter_args and scf.if results.
struct TileLoopState {
  SmallVector<Value> O;
  RowState st;
  SmallVector<Value> extra;

  SmallVector<Value> flatten() const {
    SmallVector<Value> v(O.begin(), O.end());
    v.append({st.m[0], st.m[1], st.l[0], st.l[1]});
    v.append(extra.begin(), extra.end());
    return v;
  }
  static TileLoopState unflatten(ValueRange v, int64_t chunks) {
    TileLoopState s;
    s.O.assign(v.begin(), v.begin() + chunks);
    s.st = RowState{{v[chunks], v[chunks + 1]}, {v[chunks + 2], v[chunks + 3]}};
    s.extra.assign(v.begin() + chunks + 4, v.end());
    return s;
  }
};

/// One consumer warpgroup: 64 query rows, S = QKᵀ by wgmma from shared
/// memory, the softmax step on the accumulator registers, O += PV by wgmma
/// with P from registers, under one of three schedules (serial, deferred PV,
/// QK look-ahead), then the epilogue.
class WgmmaConsumer {
public:
  WgmmaConsumer(ImplicitLocOpBuilder &b, KernelEnv &env, Value wg);
  /// One work item: its tile loop and epilogue, from the values env binds.
  void build();

private:
  void beginWork();
  void releaseQ();
  void releaseQAfter(Value t);
  std::pair<Value, Value> slotOf(Value t);
  Value waitFull(Value t);
  void zeroValueTail(Value t, Value s);
  void release(Value t);
  Value issueQK(Value s);
  void issuePV(SmallVector<Value> &O, ArrayRef<Value> aRegs, Value s);
  /// What the softmax of tile t needs to know about its scores, with the
  /// score_mod's capture reads issued (cfg.scorePrefetch): built before
  /// the wait for the tile's QKᵀ.
  struct TileScores {
    ScoreContext sc;
    Value needsMask;
  };
  TileScores tileScores(Value t);
  std::array<Value, 2> softmax(TileScores &ts, SmallVectorImpl<Value> &sv,
                               RowState &st);
  void rescale(SmallVector<Value> &O, std::array<Value, 2> alpha);
  SmallVector<Value> extract(Value acc);
  void fenceAll(SmallVector<Value> &O);
  void waitTurn();
  void passTurn();

  struct TileIter {
    scf::ForOp loop;
    Value t;
    TileLoopState state;
  };
  /// The tile loop over [from, tEnd); the builder is left in its body.
  TileIter openLoop(Value from, const TileLoopState &init);
  /// Yields `next`, leaves the builder after the loop, returns its results.
  TileLoopState closeLoop(TileIter &it, const TileLoopState &next);

  TileLoopState runSerial();
  TileLoopState runDeferredPV();
  TileLoopState runOverlapped();
  void storeEpilogue(const TileLoopState &fin);
  void storeRows(const TileLoopState &fin, const RowResult row[2],
                 bool partial);
  void mergeIfLast();

  ImplicitLocOpBuilder &b;
  KernelEnv &env;
  const KernelConfig &cfg;
  const KernelSpec &spec;
  const SmemLayout &L;
  int64_t BM, BN, D, Dv, chunks, chunkN;
  Type elem, f32;
  LLVM::LLVMStructType oType, sType;
  Value c, lane, quadLane, rowInBlock, rows[2], laneCol;
  Value maskRows[2]; // the query index of each row, as masks read it
  // The batch indices of each row's query head, as the score_mod reads
  // them: the item's, or with packed heads each row's own.
  SmallVector<Value> rowBatchIdx[2];
  // Q's descriptor in buffer 0, and in the work item's buffer.
  WgmmaDesc qDesc0, kDesc0, vDesc0, qDesc;
  Value negInf, fzero, one;
  Value wgRowLo, wgRowHi, diagOff;
  // Per staged capture (spec.staged's order): stagedChunkOffsets.
  SmallVector<SmallVector<Value, 8>> stagedOffsets;
  bool pingpong = false;
  Value ppThreads, ppOwn, ppNext;
  TileLoopState init;
};
} // namespace

WgmmaConsumer::WgmmaConsumer(ImplicitLocOpBuilder &b, KernelEnv &env, Value wg)
    : b(b), env(env), cfg(env.cfg), spec(env.spec), L(env.layout) {
  MLIRContext *ctx = b.getContext();
  BM = cfg.blockM;
  BN = cfg.blockN;
  D = spec.panelD();
  Dv = spec.panelDv();
  elem = spec.elemType;

  c = arith::SubIOp::create(b, wg, constIdx(b, 1));
  Value ctid = arith::RemUIOp::create(b, env.tid, constIdx(b, 128));
  Value warp = arith::DivUIOp::create(b, ctid, constIdx(b, 32));
  lane = arith::RemUIOp::create(b, env.tid, constIdx(b, 32));
  quadLane = arith::RemUIOp::create(b, lane, constIdx(b, 4));

  // This thread's first row within the block, and its column offset.
  rowInBlock = idxAdd(b, idxMul(b, c, 64), idxMul(b, warp, 16));
  rowInBlock =
      idxAdd(b, rowInBlock, arith::DivUIOp::create(b, lane, constIdx(b, 4)));
  laneCol = idxMul(b, quadLane, 2);
  for (const StagedCapture &sc : spec.staged)
    stagedOffsets.push_back(
        stagedChunkOffsets(b, rowInBlock, quadLane, sc.elementBytes));

  // Descriptors: K-major tiles advance 32 B (+2) per k16 inside a 64-column
  // panel; panels are rows·128 B apart. V (MN-major) advances 16 rows
  // (+128) per k16.
  Value qTile = smemOffset(b, env.tiles, toI64(b, idxMul(b, c, 64 * 128)));
  qDesc0 = wgmmaDescriptor(b, qTile, BM * 128, 1024);
  kDesc0 =
      wgmmaDescriptor(b, smemOffset(b, env.tiles, L.kOff(0)), BN * 128, 1024);
  vDesc0 =
      wgmmaDescriptor(b, smemOffset(b, env.tiles, L.vOff(0)), BN * 128, 1024);

  chunks = cfg.splitPV ? Dv / 64 : 1;
  chunkN = Dv / chunks;
  oType = accType(ctx, chunkN);
  sType = accType(ctx, BN);
  f32 = b.getF32Type();
  negInf = constF32(b, -std::numeric_limits<double>::infinity());
  fzero = constF32(b, 0.0);

  // Ping-pong between consumer warpgroups: warpgroup c issues its GEMMs only
  // after warpgroup c-1 issued its own (named barrier 1+c, counted over the
  // two warpgroups that meet there). Without it all warpgroups wait on the
  // same full barrier, issue together, share the tensor cores, and then all
  // do their softmax while the tensor cores idle; in turn, one warpgroup's
  // softmax runs under the other's GEMMs.
  int64_t nWG = cfg.consumerWarpgroups;
  pingpong = cfg.pingpong && nWG > 1;
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

  for (int64_t k = 0; k < chunks; ++k)
    init.O.push_back(LLVM::ZeroOp::create(b, oType));
  init.st = RowState{{negInf, negInf}, {fzero, fzero}};
  one = constIdx(b, 1);
}

/// The work item's rows, the bounds its mask-free tiles are judged by, and
/// (with a grid of one CTA per item) the wait for its Q.
void WgmmaConsumer::beginWork() {
  rows[0] = idxAdd(b, env.q0, rowInBlock);
  rows[1] = idxAdd(b, rows[0], constIdx(b, 8));
  for (int h = 0; h < 2; ++h)
    maskRows[h] = spec.packedGroup > 1
                      ? arith::RemUIOp::create(b, rows[h], env.qLen).getResult()
                      : rows[h];
  for (int h = 0; h < 2; ++h) {
    rowBatchIdx[h].assign(env.batchIdx.begin(), env.batchIdx.end());
    if (spec.packedGroup == 1 || !spec.scoreMod)
      continue;
    // Row r is query head bh·G + r / Lq; a padding row past the G·Lq reads
    // as the last head, so a capture is never indexed outside its shape.
    Value last = constIdx(b, spec.packedGroup - 1);
    Value head = arith::DivUIOp::create(b, rows[h], env.qLen);
    Value g = arith::MinUIOp::create(b, head, last);
    rowBatchIdx[h] =
        batchIndices(b, idxAdd(b, idxMul(b, env.bh, spec.packedGroup), g),
                     env.queryBatchSizes);
  }
  // Tiles that need no per-element mask (inside Lk and entirely on the
  // allowed side of the causal/window bounds for this warpgroup's 64 rows)
  // take a softmax without index arithmetic.
  // With packed heads a warpgroup's rows may be any query of each head.
  if (spec.packedGroup > 1) {
    wgRowLo = constIdx(b, 0);
    wgRowHi = arith::SubIOp::create(b, env.qLen, constIdx(b, 1));
  } else {
    wgRowLo = idxAdd(b, env.q0, idxMul(b, c, 64));
    wgRowHi = idxAdd(b, wgRowLo, constIdx(b, 63));
  }
  diagOff = maskDiagonalOffset(b, spec.mask, env.qLen, env.lk);
  QSlot q = qSlot(b, env, env.workIter);
  qDesc =
      q.buffer
          ? qDesc0.plusUnits(b, toI32(b, idxMul(b, q.buffer, L.qBytes / 16)))
          : qDesc0;
  // A persistent grid's consumers waited for Q before they read the item.
  if (!cfg.persistent)
    mbarWait(b, smemOffset(b, env.tiles, L.qFullOff(0)), constI32(b, 0));
}

/// With a persistent grid: one arrival per consumer warp hands the item's Q
/// buffer to the producer for a later work item (every QKᵀ of this one is
/// done). The arrival comes as soon as the item's last QKᵀ completed: with
/// one buffer the next item's Q loads under this one's last softmax, PV and
/// epilogue; with two, the item after next's under the next item's tiles.
void WgmmaConsumer::releaseQ() {
  Value lane0 =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, constIdx(b, 0));
  auto ifLane0 = scf::IfOp::create(b, lane0, /*withElse=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifLane0.thenBlock());
  mbarArrive(b,
             qSlotAddr(b, env, qSlot(b, env, env.workIter), L.qEmptyOff(0), 8));
}

/// After the QKᵀ of step `t` is known complete: Q's last reader, when `t` is
/// the item's last step.
void WgmmaConsumer::releaseQAfter(Value t) {
  if (!cfg.persistent)
    return;
  Value last = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                     idxAdd(b, t, one), env.tEnd);
  auto ifLast = scf::IfOp::create(b, last, /*withElse=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifLast.thenBlock());
  releaseQ();
}

/// Slot of tile t (i32) and the parity of its fill.
std::pair<Value, Value> WgmmaConsumer::slotOf(Value t) {
  auto [s, n] = ringPos(b, env, t);
  return std::make_pair(s, arith::RemUIOp::create(b, n, constI32(b, 2)));
}

Value WgmmaConsumer::waitFull(Value t) {
  auto [s, parity] = slotOf(t);
  mbarWait(b, smemOffset(b, env.tiles, stageOffset(b, s, 8, L.kvFullOff(0))),
           parity);
  if (spec.varlen || spec.pageSize > 0)
    zeroValueTail(t, s);
  return s;
}

/// In a packed varlen batch the key tile that crosses a sequence's end holds
/// the next sequence's rows (TMA zero-fills only past the tensor), in a
/// paged cache rows of whatever pages the table's slots past the length
/// name. Their P is 0, but 0 times a NaN or inf there (another sequence's,
/// or uninitialised padding) is NaN, so each consumer warpgroup zeroes those V rows of the
/// slot before it reads them (all write the same zeros): 128-byte rows of
/// each 64-column panel, which the swizzle permutes only within a row. The
/// stores are ordered before wgmma's reads by fence.proxy.async and the
/// warpgroup's barrier.
void WgmmaConsumer::zeroValueTail(Value t, Value s) {
  Value live =
      arith::SubIOp::create(b, env.lk, idxMul(b, env.keyTile(b, t), BN));
  Value crosses =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, live, constIdx(b, BN));
  auto ifTail = scf::IfOp::create(b, crosses, /*withElse=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifTail.thenBlock());
  Value vBase =
      smemOffset(b, env.tiles, stageOffset(b, s, L.stageBytes, L.vOff(0)));
  Value perPanel =
      idxMul(b, arith::SubIOp::create(b, constIdx(b, BN), live), 8);
  Value total = idxMul(b, perPanel, Dv / 64);
  Value ctid = arith::RemUIOp::create(b, env.tid, constIdx(b, 128));
  auto zeros = scf::ForOp::create(b, ctid, total, constIdx(b, 128));
  {
    OpBuilder::InsertionGuard gz(b);
    b.setInsertionPointToStart(zeros.getBody());
    Value i = zeros.getInductionVar();
    Value panel = arith::DivUIOp::create(b, i, perPanel);
    Value chunk = arith::RemUIOp::create(b, i, perPanel);
    Value byte = idxAdd(b, idxMul(b, panel, BN * 128),
                        idxAdd(b, idxMul(b, live, 128), idxMul(b, chunk, 16)));
    Value zero = LLVM::ZeroOp::create(b, VectorType::get({4}, b.getI32Type()));
    LLVM::StoreOp::create(b, zero, smemOffset(b, vBase, toI64(b, byte)),
                          /*alignment=*/16);
  }
  fenceProxyAsyncShared(b);
  // Barriers 1..warpgroups are ping-pong's; this warpgroup's own is past them.
  Value id = arith::AddIOp::create(
      b, toI32(b, c), constI32(b, 1 + cfg.consumerWarpgroups));
  NVVM::BarrierOp::create(b, Type(), id, constI32(b, 128),
                          NVVM::BarrierReductionAttr(), Value());
}

/// One arrival per consumer warp releases the slot to the producer.
void WgmmaConsumer::release(Value t) {
  Value s = slotOf(t).first;
  Value lane0 =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, constIdx(b, 0));
  auto ifLane0 = scf::IfOp::create(b, lane0, /*withElse=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifLane0.thenBlock());
  mbarArrive(b,
             smemOffset(b, env.tiles, stageOffset(b, s, 8, L.kvEmptyOff(0))));
}

/// S = Q K_tᵀ, issued and committed, not waited for.
Value WgmmaConsumer::issueQK(Value s) {
  Value stageUnits =
      arith::MulIOp::create(b, s, constI32(b, L.stageBytes / 16));
  WgmmaDesc kd = kDesc0.plusUnits(b, stageUnits);
  wgmmaFence(b);
  Value acc = LLVM::UndefOp::create(b, sType);
  for (int64_t kk = 0; kk < D / 16; ++kk) {
    int64_t p = kk / 4, w = kk % 4;
    WgmmaDesc a = qDesc.plus(b, p * BM * 128 + 32 * w);
    WgmmaDesc bd = kd.plus(b, p * BN * 128 + 32 * w);
    acc = wgmmaSS(b, acc, a, bd, BN, elem, /*accumulate=*/kk > 0);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  return acc;
}

/// O += P V_t, issued and committed, not waited for.
void WgmmaConsumer::issuePV(SmallVector<Value> &O, ArrayRef<Value> aRegs,
                            Value s) {
  Value stageUnits =
      arith::MulIOp::create(b, s, constI32(b, L.stageBytes / 16));
  WgmmaDesc vd = vDesc0.plusUnits(b, stageUnits);
  wgmmaFence(b);
  for (int64_t kb = 0; kb < BN / 16; ++kb)
    for (int64_t k = 0; k < chunks; ++k) {
      WgmmaDesc d = vd.plus(b, kb * 16 * 128 + k * BN * 128);
      O[k] = wgmmaRS(b, O[k], aRegs.slice(4 * kb, 4), d, chunkN, elem);
    }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
}

WgmmaConsumer::TileScores WgmmaConsumer::tileScores(Value t) {
  Value col0 = idxMul(b, env.keyTile(b, t), BN);
  TileScores ts;
  ts.needsMask = tileNeedsElementMask(b, spec.mask, col0, BN, wgRowLo, wgRowHi,
                                      env.lk, diagOff);
  // The staged captures' tiles in tile t's slot.
  StagedTiles staged;
  if (!spec.staged.empty()) {
    Value s = slotOf(t).first;
    Value kBase =
        smemOffset(b, env.tiles, stageOffset(b, s, L.stageBytes, L.kOff(0)));
    staged.chunk.resize(spec.captureTypes.size());
    staged.panelBytes.resize(spec.captureTypes.size());
    for (auto [i, c] : llvm::enumerate(spec.staged)) {
      Value tile = smemOffset(b, kBase, L.captureOff[i]);
      for (Value off : stagedOffsets[i])
        staged.chunk[c.capture].push_back(smemOffset(b, tile, off));
      staged.panelBytes[c.capture] = BM * 128;
    }
  }
  ts.sc = makeScoreContext(b, spec.mask, spec.scoreMod, maskRows, col0, laneCol,
                           env.qLen, env.lk, {rowBatchIdx[0], rowBatchIdx[1]},
                           env.captures,
                           /*needsMask=*/true, spec.indexBound(),
                           spec.staged.empty() ? nullptr : &staged);
  ts.sc.softExp2 = env.cfg.softExp2;
  if (env.indexMask)
    ts.sc.indexFull = classifyScoreTile(b, *spec.scoreMod, *env.indexMask,
                                        env.batchLo, env.batchHi, wgRowLo,
                                        wgRowHi, col0, BN, env.qLen, env.lk)
                          .full;
  if (cfg.scorePrefetch)
    prefetchScoreReads(b, ts.sc, BN / 2);
  return ts;
}

/// Softmax of one tile: p (in sv), the new row state, and returns alpha.
std::array<Value, 2> WgmmaConsumer::softmax(TileScores &ts,
                                            SmallVectorImpl<Value> &sv,
                                            RowState &st) {
  return maskedSoftmaxStep(b, sv, st, spec.scale, ts.needsMask, ts.sc);
}

void WgmmaConsumer::rescale(SmallVector<Value> &O,
                            std::array<Value, 2> alpha) {
  for (int64_t k = 0; k < chunks; ++k) {
    Value o = O[k];
    for (int64_t e = 0; e < chunkN / 2; ++e) {
      Value x = LLVM::ExtractValueOp::create(b, o, e);
      x = arith::MulFOp::create(b, x, alpha[AccumulatorLayout::rowHalf(e)]);
      o = LLVM::InsertValueOp::create(b, o, x, e);
    }
    O[k] = o;
  }
}

SmallVector<Value> WgmmaConsumer::extract(Value acc) {
  SmallVector<Value> sv;
  for (int64_t e = 0; e < BN / 2; ++e)
    sv.push_back(LLVM::ExtractValueOp::create(b, acc, e));
  return sv;
}

void WgmmaConsumer::fenceAll(SmallVector<Value> &O) {
  for (Value &o : O)
    o = fenceRegisters(b, o);
}

void WgmmaConsumer::waitTurn() {
  if (pingpong)
    NVVM::BarrierOp::create(b, Type(), ppOwn, ppThreads,
                            NVVM::BarrierReductionAttr(), Value());
}

void WgmmaConsumer::passTurn() {
  if (pingpong)
    NVVM::BarrierArriveOp::create(b, ppNext, ppThreads);
}

WgmmaConsumer::TileIter WgmmaConsumer::openLoop(Value from,
                                                const TileLoopState &init) {
  TileIter it;
  it.loop =
      scf::ForOp::create(b, from, env.tEnd, constIdx(b, 1), init.flatten());
  b.setInsertionPointToStart(it.loop.getBody());
  it.t = it.loop.getInductionVar();
  it.state = TileLoopState::unflatten(it.loop.getRegionIterArgs(), chunks);
  return it;
}

TileLoopState WgmmaConsumer::closeLoop(TileIter &it,
                                       const TileLoopState &next) {
  scf::YieldOp::create(b, next.flatten());
  b.setInsertionPointAfter(it.loop);
  return TileLoopState::unflatten(it.loop.getResults(), chunks);
}

/// Wait for K_t, S = QK_tᵀ, softmax, O = alpha·O + P V_t, wait, release.
TileLoopState WgmmaConsumer::runSerial() {
  TileIter it = openLoop(env.tBegin, init);
  Value t = it.t;
  TileLoopState next = it.state;
  Value s = waitFull(t);
  waitTurn();
  Value acc = issueQK(s);
  passTurn();
  TileScores ts = tileScores(t);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  releaseQAfter(t);
  SmallVector<Value> sv = extract(acc);
  std::array<Value, 2> alpha = softmax(ts, sv, next.st);
  rescale(next.O, alpha);
  issuePV(next.O, packA(b, sv, elem), s);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  release(t);
  return closeLoop(it, next);
}

/// FA3's order: PV of tile t-1 is issued right behind QK of tile t and runs
/// during the softmax of tile t. Only P_{t-1} (BN/4 packed registers)
/// crosses an iteration, not a second S accumulator. A slot is released once
/// PV of its tile completed, one iteration late, hence stages >= 3.
TileLoopState WgmmaConsumer::runDeferredPV() {
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
    TileScores ts = tileScores(env.tBegin);
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    releaseQAfter(env.tBegin);
    SmallVector<Value> sv = extract(fenceRegisters(b, acc));
    TileLoopState first = init;
    (void)softmax(ts, sv, first.st); // O is zero: nothing to rescale
    first.extra = packA(b, sv, elem);
    scf::YieldOp::create(b, first.flatten());
    b.setInsertionPointToStart(pro.elseBlock());
    TileLoopState none = init;
    none.extra.assign(nP, LLVM::UndefOp::create(b, i32));
    scf::YieldOp::create(b, none.flatten());
  }
  TileLoopState res;
  {
    TileIter it = openLoop(idxAdd(b, env.tBegin, one),
                           TileLoopState::unflatten(pro.getResults(), chunks));
    Value t = it.t;
    TileLoopState next = it.state;
    Value tPrev = arith::SubIOp::create(b, t, one);
    Value s = waitFull(t);
    waitTurn();
    Value acc = issueQK(s);
    issuePV(next.O, it.state.extra, slotOf(tPrev).first);
    passTurn();
    TileScores ts = tileScores(t);
    // S_t is complete; PV_{t-1} may still run.
    NVVM::WgmmaWaitGroupSyncOp::create(b, 1);
    releaseQAfter(t);
    SmallVector<Value> sv = extract(fenceRegisters(b, acc));
    std::array<Value, 2> alpha = softmax(ts, sv, next.st);
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    fenceAll(next.O);
    release(tPrev);
    rescale(next.O, alpha);
    next.extra = packA(b, sv, elem);
    res = closeLoop(it, next);
  }
  // PV of the last tile.
  SmallVector<Type> oTypes(chunks, oType);
  auto epi = scf::IfOp::create(b, oTypes, nonEmpty, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(epi.thenBlock());
    SmallVector<Value> O = res.O;
    Value tLast = arith::SubIOp::create(b, env.tEnd, one);
    waitTurn();
    issuePV(O, res.extra, slotOf(tLast).first);
    passTurn();
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    fenceAll(O);
    release(tLast);
    scf::YieldOp::create(b, O);
    b.setInsertionPointToStart(epi.elseBlock());
    scf::YieldOp::create(b, res.O);
  }
  for (int64_t k = 0; k < chunks; ++k)
    res.O[k] = epi.getResult(k);
  return res;
}

/// Software pipeline: QK of tile t+1 runs on the tensor cores while this
/// warpgroup does the softmax of tile t, and PV of tile t runs while the next
/// iteration waits for K. A slot is released one iteration late (after PV of
/// its tile is known complete), hence stages >= 3.
TileLoopState WgmmaConsumer::runOverlapped() {
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
  TileLoopState first = init;
  first.extra = {pro.getResult(0)};
  TileIter it = openLoop(env.tBegin, first);
  Value t = it.t;
  TileLoopState next = it.state;
  Value sCur = it.state.extra[0];
  Value tNext = idxAdd(b, t, one);
  TileScores ts = tileScores(t);
  Value hasNext =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, tNext, env.tEnd);
  auto nextQK = scf::IfOp::create(b, TypeRange{sType}, hasNext, true);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(nextQK.thenBlock());
    Value s = waitFull(tNext);
    Value acc = issueQK(s);
    // Everything but the QK just issued: S_t and PV_{t-1}.
    NVVM::WgmmaWaitGroupSyncOp::create(b, 1);
    scf::YieldOp::create(b, acc);
    b.setInsertionPointToStart(nextQK.elseBlock());
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    scf::YieldOp::create(b, Value(LLVM::UndefOp::create(b, sType)));
  }
  // Keep reads of S_t and O after the wait.
  sCur = fenceRegisters(b, sCur);
  fenceAll(next.O);
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
  std::array<Value, 2> alpha = softmax(ts, sv, next.st);
  rescale(next.O, alpha);
  issuePV(next.O, packA(b, sv, elem), slotOf(t).first);
  next.extra = {nextQK.getResult(0)};
  TileLoopState res = closeLoop(it, next);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  fenceAll(res.O);
  return res;
}

/// O / l, stored straight from registers; rows past Lq skipped. In the
/// decode form with more than one split, the rows go to this split's f32
/// partials instead, with their log-sum-exp, for the combine.
void WgmmaConsumer::storeEpilogue(const TileLoopState &fin) {
  Value lFin[2] = {quadReduce(b, fin.st.l[0], false),
                   quadReduce(b, fin.st.l[1], false)};
  bool withLse = spec.hasLse || spec.splitKV;
  // The rows' final form counts their head's sink; a split's partial rows
  // leave it to the combine.
  RowResult row[2], partRow[2];
  for (int h = 0; h < 2; ++h) {
    partRow[h] = finishRow(b, fin.st.m[h], lFin[h], withLse);
    row[h] = partRow[h];
    if (!env.sinks)
      continue;
    // Row r of batch·head bh is query head bh·G + r / Lq (G query heads
    // packed per K/V head; G = 1 unpacked).
    Value flatHead = env.bh;
    if (spec.packedGroup > 1)
      flatHead = idxAdd(b, idxMul(b, env.bh, spec.packedGroup),
                        arith::DivUIOp::create(b, rows[h], env.qLen));
    row[h] = finishRow(b, fin.st.m[h], lFin[h], withLse,
                       sinkLog2(b, env.sinks, flatHead));
  }
  if (!spec.splitKV) {
    storeRows(fin, row, /*partial=*/false);
    return;
  }
  Value multi = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, env.splits,
                                      constIdx(b, 1));
  auto ifMulti = scf::IfOp::create(b, multi, /*withElse=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifMulti.thenBlock());
  storeRows(fin, partRow, /*partial=*/true);
  if (spec.fusedCombine)
    mergeIfLast();
  b.setInsertionPointToStart(ifMulti.elseBlock());
  storeRows(fin, row, /*partial=*/false);
}

void WgmmaConsumer::storeRows(const TileLoopState &fin, const RowResult row[2],
                              bool partial) {
  MLIRContext *ctx = b.getContext();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Type f32 = b.getF32Type();
  Type outElem = partial ? f32 : spec.outElemType;
  auto pairTy = VectorType::get({2}, outElem);
  int64_t eltBytes = outElem.getIntOrFloatBitWidth() / 8;
  Value outPtr = partial ? env.oPartPtr : env.outPtr;
  Value lsePtr = partial ? env.lsePartPtr : env.lsePtr;
  // A split's partial rows follow the rows of the splits before it.
  Value partBase;
  if (partial)
    partBase = arith::MulIOp::create(
        b, env.split,
        arith::MulIOp::create(b, product(b, env.batchSizes), env.lq));
  for (int h = 0; h < 2; ++h) {
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, rows[h], env.lq);
    auto ifRow = scf::IfOp::create(b, inRange, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    // O's row: bh·Lq + row of [batch·heads, Lq, Dv], or (token)·H + head of
    // a packed [tokens, heads, Dv]; the LSE's: bh·Lq + row, or head·Tq +
    // token.
    Value flatRow, lseRow;
    if (spec.varlen) {
      Value token = idxAdd(b, env.qOff, rows[h]);
      flatRow = idxAdd(b, arith::MulIOp::create(b, token, env.batchSizes[0]),
                       env.bh);
      lseRow = idxAdd(b, arith::MulIOp::create(b, env.bh, env.tq), token);
    } else {
      flatRow = idxAdd(b, arith::MulIOp::create(b, env.bh, env.lq), rows[h]);
      lseRow = flatRow;
    }
    if (partial) {
      flatRow = idxAdd(b, partBase, flatRow);
      lseRow = flatRow;
    }
    Value rowOff = idxAdd(b, idxMul(b, flatRow, spec.valueDim), laneCol);
    // Column pairs (c, c+1) of the row half are adjacent accumulator
    // elements: one 2-element store each.
    // A group of 8 columns past Dv is the panel's zero padding (Dv is a
    // multiple of 8).
    for (int64_t k = 0; k < chunks; ++k)
      for (int64_t col = 0; col < chunkN && k * chunkN + col < spec.valueDim;
           col += 8) {
        int64_t e = AccumulatorLayout::element(col, h);
        Value x0 = LLVM::ExtractValueOp::create(b, fin.O[k], e);
        Value x1 = LLVM::ExtractValueOp::create(b, fin.O[k], e + 1);
        x0 = arith::MulFOp::create(b, x0, row[h].inv);
        x1 = arith::MulFOp::create(b, x1, row[h].inv);
        x0 = fromF32(b, x0, outElem);
        x1 = fromF32(b, x1, outElem);
        Value v = vector::FromElementsOp::create(b, pairTy, ValueRange{x0, x1});
        Value off = toI64(
            b, idxAdd(b, rowOff,
                      constIdx(b, k * chunkN + AccumulatorLayout::column(e))));
        Value ptr =
            LLVM::GEPOp::create(b, ptrTy, outElem, outPtr, ValueRange{off});
        LLVM::StoreOp::create(b, v, ptr, /*alignment=*/2 * eltBytes);
      }
    if (spec.hasLse || partial) {
      // One lane of the quad writes the row's log-sum-exp.
      Value q0 = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, quadLane,
                                       constIdx(b, 0));
      auto ifQ = scf::IfOp::create(b, q0, /*withElse=*/false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifQ.thenBlock());
      Value ptr = LLVM::GEPOp::create(b, ptrTy, f32, lsePtr,
                                      ValueRange{toI64(b, lseRow)});
      LLVM::StoreOp::create(b, row[h].lse, ptr, /*alignment=*/4);
    }
  }
}

/// The fused combine, after this CTA's partial rows are stored: the CTA
/// counts its arrival on its row block's counter, and the last of the
/// block's splits to arrive merges every split's partial rows into the
/// output (mergeSplitRow, a warp per row) and resets the counter for the
/// next launch. Each thread's partial stores are made visible device-wide
/// (membar.gl) before the arrival; the last CTA reads the others' partials
/// with volatile loads, past its L1.
void WgmmaConsumer::mergeIfLast() {
  MLIRContext *ctx = b.getContext();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Type i32 = b.getI32Type();
  const int64_t W = cfg.consumerWarpgroups;
  auto consumersSync = [&] {
    // Barriers 1..2W are ping-pong's and the warpgroups' own.
    NVVM::BarrierOp::create(b, Type(), constI32(b, 1 + 2 * W),
                            constI32(b, 128 * W),
                            NVVM::BarrierReductionAttr(), Value());
  };
  NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
  consumersSync();
  Value ctid = arith::SubIOp::create(b, env.tid, constIdx(b, 128));
  Value flag = smemOffset(b, env.tiles, L.lastArrivalOff);
  Value nq = arith::CeilDivSIOp::create(b, env.lq, constIdx(b, BM));
  Value item = idxAdd(b, arith::MulIOp::create(b, env.bh, nq),
                      arith::DivUIOp::create(b, env.q0, constIdx(b, BM)));
  {
    auto ifFirst = scf::IfOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, ctid,
                              constIdx(b, 0)),
        /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    Value counter = LLVM::GEPOp::create(b, ptrTy, i32, env.splitCounters,
                                        ValueRange{toI64(b, item)});
    Value before = LLVM::AtomicRMWOp::create(
        b, LLVM::AtomicBinOp::add, counter, constI32(b, 1),
        LLVM::AtomicOrdering::acq_rel);
    Value last = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq, before,
        toI32(b, arith::SubIOp::create(b, env.splits, constIdx(b, 1))));
    auto ifLast = scf::IfOp::create(b, last, /*withElse=*/false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifLast.thenBlock());
      LLVM::StoreOp::create(b, constI32(b, 0), counter, /*alignment=*/4);
    }
    LLVM::StoreOp::create(b, arith::ExtUIOp::create(b, i32, last), flag,
                          /*alignment=*/4);
  }
  consumersSync();
  Value isLast = arith::CmpIOp::create(
      b, arith::CmpIPredicate::ne, LLVM::LoadOp::create(b, i32, flag, 4),
      constI32(b, 0));
  auto ifLast = scf::IfOp::create(b, isLast, /*withElse=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifLast.thenBlock());
  NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);

  Type f32 = b.getF32Type();
  const int64_t dv = spec.valueDim, perLane = llvm::divideCeil(dv, 32);
  Value warp = arith::DivUIOp::create(b, ctid, constIdx(b, 32));
  Value rowsTotal = arith::MulIOp::create(b, product(b, env.batchSizes), env.lq);
  Value rowsHere = arith::MinSIOp::create(
      b, constIdx(b, BM), arith::SubIOp::create(b, env.lq, env.q0));
  auto loop = scf::ForOp::create(b, warp, rowsHere, constIdx(b, 4 * W));
  b.setInsertionPointToStart(loop.getBody());
  Value row = idxAdd(b, env.q0, loop.getInductionVar());
  Value flatRow = idxAdd(b, arith::MulIOp::create(b, env.bh, env.lq), row);
  // Split s's copy of the row: the rows of the splits before it first.
  auto partRow = [&](ImplicitLocOpBuilder &ib, Value s) {
    return idxAdd(ib, arith::MulIOp::create(ib, s, rowsTotal), flatRow);
  };
  auto loadLse = [&](ImplicitLocOpBuilder &ib, Value s) -> Value {
    Value p = LLVM::GEPOp::create(ib, ptrTy, f32, env.lsePartPtr,
                                  ValueRange{toI64(ib, partRow(ib, s))});
    return LLVM::LoadOp::create(ib, f32, p, /*alignment=*/4,
                                /*isVolatile=*/true);
  };
  auto loadOut = [&](ImplicitLocOpBuilder &ib, Value s, Value col) -> Value {
    Value off = idxAdd(ib, idxMul(ib, partRow(ib, s), dv), col);
    Value p = LLVM::GEPOp::create(ib, ptrTy, f32, env.oPartPtr,
                                  ValueRange{toI64(ib, off)});
    return LLVM::LoadOp::create(ib, f32, p, /*alignment=*/4,
                                /*isVolatile=*/true);
  };
  auto sameWarp = [](Value v, bool) { return v; };
  SplitRowSource src;
  src.splits = env.splits;
  src.sub = constIdx(b, 0);
  src.wpr = constIdx(b, 1);
  src.lane = lane;
  src.dv = dv;
  src.loadLse = loadLse;
  src.loadOut = loadOut;
  src.rowReduce = sameWarp;
  SplitRowMerge merged = mergeSplitRow(b, src);
  // The partials saw keys only; the sink is counted here, once per row
  // (query head bh·G + row / Lq with G heads packed).
  Value sink;
  if (env.sinks) {
    Value flatHead = env.bh;
    if (spec.packedGroup > 1)
      flatHead = idxAdd(b, idxMul(b, env.bh, spec.packedGroup),
                        arith::DivUIOp::create(b, row, env.qLen));
    sink = sinkLog2(b, env.sinks, flatHead);
  }
  RowResult res =
      finishRow(b, merged.top.m, merged.total, spec.hasLse, sink);
  Type outElem = spec.outElemType;
  int64_t eltBytes = outElem.getIntOrFloatBitWidth() / 8;
  for (int64_t i = 0; i < perLane; ++i) {
    OpBuilder::InsertionGuard gc(b);
    Value col = idxAdd(b, lane, constIdx(b, 32 * i));
    if (dv % 32 && i == perLane - 1) {
      auto in = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, col,
                                   constIdx(b, dv)),
          /*withElse=*/false);
      b.setInsertionPointToStart(in.thenBlock());
    }
    Value x =
        fromF32(b, arith::MulFOp::create(b, merged.acc[i], res.inv), outElem);
    Value p = LLVM::GEPOp::create(
        b, ptrTy, outElem, env.outPtr,
        ValueRange{toI64(b, idxAdd(b, idxMul(b, flatRow, dv), col))});
    LLVM::StoreOp::create(b, x, p, eltBytes);
  }
  if (spec.hasLse) {
    auto lane0 = scf::IfOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                              constIdx(b, 0)),
        /*withElse=*/false);
    b.setInsertionPointToStart(lane0.thenBlock());
    Value p = LLVM::GEPOp::create(b, ptrTy, f32, env.lsePtr,
                                  ValueRange{toI64(b, flatRow)});
    LLVM::StoreOp::create(b, res.lse, p, /*alignment=*/4);
  }
}

void WgmmaConsumer::build() {
  beginWork();
  // The serial and deferred schedules hand Q back after their last QKᵀ
  // (releaseQAfter); an item with no tile, or the look-ahead schedule, here.
  if (cfg.persistent && !cfg.overlap) {
    Value empty = arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                        env.tBegin, env.tEnd);
    auto ifEmpty = scf::IfOp::create(b, empty, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifEmpty.thenBlock());
    releaseQ();
  }
  TileLoopState fin = cfg.deferPV  ? runDeferredPV()
                      : cfg.overlap ? runOverlapped()
                                    : runSerial();
  if (cfg.persistent && cfg.overlap)
    releaseQ();
  storeEpilogue(fin);
}

/// Binds env's values of the work item `qBlock` (of `nq` query blocks, in
/// grid order) of batch·head env.bh: its rows, heads and visible tiles.
static void bindWorkItem(ImplicitLocOpBuilder &b, KernelEnv &env, Value qBlock,
                         Value nq, Value cuq, Value cuk, Value tilesPerSplit) {
  const KernelConfig &cfg = env.cfg;
  const KernelSpec &spec = env.spec;
  if (spec.hasMask()) {
    // Causal/window blocks late in the sequence carry the most tiles:
    // schedule them first so the tail of the grid is short ones.
    qBlock = arith::SubIOp::create(
        b, arith::SubIOp::create(b, nq, constIdx(b, 1)), qBlock);
  }
  if (spec.varlen) {
    // The block's sequence: its lengths replace the token counts, its
    // first tokens offset every row.
    env.tq = env.lq;
    SequenceBlock w =
        varlenSequenceBlock(b, cuq, cuk, env.lq, env.lk, qBlock, cfg.blockM);
    qBlock = w.block;
    env.lq = w.lq;
    env.lk = w.lk;
    env.qOff = w.q0;
    env.kOff = w.k0;
  }
  env.q0 = idxMul(b, qBlock, cfg.blockM);

  HeadIndices heads = headIndices(b, env.bh, env.batchSizes, env.hkv,
                                  /*withBatchIndices=*/spec.scoreMod);
  env.kvbh = heads.kvbh;
  env.batchIdx = heads.batchIdx;
  env.batchLo = env.batchHi = env.batchIdx;
  if (spec.packedGroup > 1 && spec.scoreMod) {
    // Item bh holds query heads bh·G .. bh·G + G - 1 of the query's
    // [b..., Hq] (the kernel's sizes end in Hkv = Hq / G).
    env.queryBatchSizes.assign(env.batchSizes.begin(), env.batchSizes.end());
    env.queryBatchSizes.back() =
        idxMul(b, env.queryBatchSizes.back(), spec.packedGroup);
    Value head0 = idxMul(b, env.bh, spec.packedGroup);
    env.batchLo = batchIndices(b, head0, env.queryBatchSizes);
    env.batchHi =
        batchIndices(b, idxAdd(b, head0, constIdx(b, spec.packedGroup - 1)),
                     env.queryBatchSizes);
  }
  env.qLen = spec.packedGroup > 1
                 ? arith::DivUIOp::create(b, env.lq,
                                          constIdx(b, spec.packedGroup))
                       .getResult()
                 : env.lq;
  if (spec.pageSize > 0) {
    // The sequence's own length, clamped to the table's capacity (lk, as
    // the host passes it); none without pages.
    env.kvBatch = arith::DivUIOp::create(b, env.kvbh, env.hkv);
    env.kvHead = arith::RemUIOp::create(b, env.kvbh, env.hkv);
    Value zero = constIdx(b, 0);
    Value n = arith::IndexCastOp::create(
        b, b.getIndexType(),
        memref::LoadOp::create(b, env.seqLens, ValueRange{env.kvBatch}));
    n = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, n, zero), env.lk);
    env.lk = arith::SelectOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, env.numPages, zero),
        n, zero);
  }
  // With packed heads every block may hold every query of a head.
  if (spec.packedGroup > 1)
    std::tie(env.tBegin, env.tEnd) =
        visibleTileRange(b, spec.mask, constIdx(b, 0), spec.decodeRows,
                         env.qLen, env.lk, cfg.blockN);
  else
    std::tie(env.tBegin, env.tEnd) = visibleTileRange(
        b, spec.mask, env.q0, cfg.blockM, env.lq, env.lk, cfg.blockN);
  env.gapAt = env.gapLen = Value();
  if (env.indexMask) {
    // With packed heads a block's rows may be any query of its G heads.
    bool packed = spec.packedGroup > 1;
    TileWalk walk = trimHiddenTiles(
        b, *spec.scoreMod, *env.indexMask, env.batchLo, env.batchHi,
        {env.tBegin, env.tEnd}, packed ? constIdx(b, 0) : env.q0,
        packed ? spec.decodeRows / spec.packedGroup : cfg.blockM, env.qLen,
        env.lk, cfg.blockN);
    env.tBegin = walk.begin;
    env.tEnd = walk.end;
    env.gapAt = walk.gapAt;
    env.gapLen = walk.gapLen;
  }
  // This split's steps of that walk.
  if (spec.splitKV)
    std::tie(env.tBegin, env.tEnd) = splitShare(
        b, env.tBegin, env.tEnd, env.splits, env.split, tilesPerSplit,
        /*divideVisible=*/env.indexMask || (spec.mask && !spec.mask.isNone()));
}

gpu::GPUFuncOp gpu_lowering::buildWgmmaKernel(OpBuilder &ob, Location loc,
                                              gpu::GPUModuleOp module,
                                              const KernelConfig &cfg,
                                              const KernelSpec &spec) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());

  declareSwizzledSmem(b);

  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Type idx = b.getIndexType();
  SmallVector<Type> argTypes(4, ptrTy);
  if (spec.hasLse)
    argTypes.push_back(ptrTy);
  argTypes.append(3 + spec.numBatchDims, idx);
  for (MemRefType t : spec.captureTypes)
    argTypes.push_back(t);
  argTypes.append(spec.staged.size(), ptrTy);
  if (spec.sinksType)
    argTypes.push_back(spec.sinksType);
  if (spec.pageSize > 0)
    argTypes.append(
        {MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                         b.getI32Type()),
         MemRefType::get({ShapedType::kDynamic}, b.getI32Type()), idx});
  if (spec.varlen)
    argTypes.append(2, MemRefType::get({ShapedType::kDynamic}, b.getI32Type()));
  if (spec.splitKV)
    argTypes.append({ptrTy, ptrTy, idx, idx});
  if (spec.fusedCombine)
    argTypes.push_back(ptrTy);
  if (cfg.persistent)
    argTypes.push_back(ptrTy);
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
  // A paged cache's keys are positions in their sequence, its lk the
  // sequence's own length: its tiles classify as a contiguous cache's.
  env.indexMask =
      kernelIndexMask(spec.scoreMod, spec.numBatchDims, !spec.varlen);
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
  for (size_t k = 0; k < spec.staged.size(); ++k)
    env.captureMaps.push_back(entry.getArgument(a++));
  if (spec.sinksType)
    env.sinks = entry.getArgument(a++);
  if (spec.pageSize > 0) {
    env.table = entry.getArgument(a++);
    env.seqLens = entry.getArgument(a++);
    env.numPages = entry.getArgument(a++);
  }
  Value cuq, cuk;
  if (spec.varlen) {
    cuq = entry.getArgument(a++);
    cuk = entry.getArgument(a++);
  }
  Value tilesPerSplit;
  if (spec.splitKV) {
    env.oPartPtr = entry.getArgument(a++);
    env.lsePartPtr = entry.getArgument(a++);
    env.splits = entry.getArgument(a++);
    tilesPerSplit = entry.getArgument(a++);
  }
  if (spec.fusedCombine)
    env.splitCounters = entry.getArgument(a++);
  if (cfg.persistent)
    env.workCounter = entry.getArgument(a++);

  env.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  env.tiles = swizzledSmemBase(b);
  env.workIter = env.tileBase = constIdx(b, 0);
  Value nq = arith::CeilDivSIOp::create(b, env.lq, constIdx(b, cfg.blockM));
  Value bhCount = product(b, env.batchSizes);
  // The work item (query block, batch·head) a grid of one CTA per item
  // gives this CTA; with a persistent grid each role walks its items.
  if (!cfg.persistent) {
    Value qBlock = gpu::BlockIdOp::create(b, gpu::Dimension::x);
    if (spec.splitKV) {
      // grid.x = query blocks × splits, the split outermost.
      env.split = arith::DivUIOp::create(b, qBlock, nq);
      qBlock = arith::RemUIOp::create(b, qBlock, nq);
    }
    env.bh = batchHeadBlock(b, bhCount);
    // Without a split the grid's x extent is the block count (a varlen
    // batch's, too).
    Value blocks =
        spec.splitKV ? nq : gpu::GridDimOp::create(b, gpu::Dimension::x);
    bindWorkItem(b, env, qBlock, blocks, cuq, cuk, tilesPerSplit);
  }
  // A persistent grid hands out work items dynamically, in the order a grid
  // of one CTA per item would run them: the CTA's first item is blockIdx.x,
  // each next one gridDim.x plus a fetch-and-add on the launch's counter
  // (zeroed by the host), so no CTA idles while another has a queue of
  // heavy causal blocks. Item w is query block w mod nq (heaviest first
  // under a mask) of batch·head w / nq: CTAs resident at once share the
  // K/V of a few heads in L2. The producer publishes each item in shared
  // memory before it arms Q's barrier; an item past the end, published
  // with a plain arrival, stops the consumers.
  Value items = arith::MulIOp::create(b, nq, bhCount);
  auto bindItem = [&](Value w, Value iter, Value base) {
    env.workIter = iter;
    env.tileBase = base;
    env.bh = arith::DivUIOp::create(b, w, nq);
    bindWorkItem(b, env, arith::RemUIOp::create(b, w, nq), nq, cuq, cuk,
                 tilesPerSplit);
  };
  auto nextBase = [&] {
    return idxAdd(b, env.tileBase,
                  arith::SubIOp::create(b, env.tEnd, env.tBegin));
  };
  Type i32 = b.getI32Type();

  const SmemLayout &L = env.layout;
  Value isT0 = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, env.tid,
                                     constIdx(b, 0));
  {
    auto ifInit = scf::IfOp::create(b, isT0, /*withElse=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifInit.thenBlock());
    for (int64_t q = 0; q < L.qBuffers; ++q)
      mbarInit(b, smemOffset(b, env.tiles, L.qFullOff(q)), 1);
    for (int64_t s = 0; s < cfg.stages; ++s) {
      mbarInit(b, smemOffset(b, env.tiles, L.kvFullOff(s)), 1);
      mbarInit(b, smemOffset(b, env.tiles, L.kvEmptyOff(s)),
               4 * cfg.consumerWarpgroups);
    }
    for (int64_t q = 0; cfg.persistent && q < L.qBuffers; ++q)
      mbarInit(b, smemOffset(b, env.tiles, L.qEmptyOff(q)),
               4 * cfg.consumerWarpgroups);
  }
  gpu::BarrierOp::create(b);

  Value wg = uniformWarpgroupIndex(b, env.tid);
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
    if (!cfg.persistent) {
      buildProducer(b, env);
    } else {
      Value zero = constIdx(b, 0);
      Type idx = b.getIndexType();
      Value bx = gpu::BlockIdOp::create(b, gpu::Dimension::x);
      auto loop = scf::WhileOp::create(b, TypeRange{idx, idx, idx},
                                       ValueRange{bx, zero, zero});
      Block *before = b.createBlock(&loop.getBefore(), {}, {idx, idx, idx},
                                    {b.getLoc(), b.getLoc(), b.getLoc()});
      {
        Value w = before->getArgument(0);
        env.workIter = before->getArgument(1);
        QSlot q = qSlot(b, env, env.workIter);
        waitQBufferFree(b, env, q);
        Value wI32 = arith::IndexCastOp::create(b, i32, w);
        Value slot = qSlotAddr(b, env, q, L.workSlotOff(0), 8);
        LLVM::StoreOp::create(b, wI32, slot);
        Value valid =
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, w, items);
        auto ifEnd = scf::IfOp::create(b, valid, /*withElse=*/true);
        {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPointToStart(ifEnd.elseBlock());
          mbarArrive(b, qSlotAddr(b, env, q, L.qFullOff(0), 8));
        }
        scf::ConditionOp::create(b, valid, before->getArguments());
      }
      Block *after = b.createBlock(&loop.getAfter(), {}, {idx, idx, idx},
                                   {b.getLoc(), b.getLoc(), b.getLoc()});
      {
        bindItem(after->getArgument(0), after->getArgument(1),
                 after->getArgument(2));
        // Fetched first, so that its latency hides under this item's loads.
        Value ticket = LLVM::AtomicRMWOp::create(
            b, LLVM::AtomicBinOp::add, env.workCounter, constI32(b, 1),
            LLVM::AtomicOrdering::monotonic);
        // One op per statement: the IR's order must not depend on the order
        // a compiler evaluates call arguments in.
        Value ticketIdx = arith::IndexCastOp::create(b, idx, ticket);
        Value gridX = gpu::GridDimOp::create(b, gpu::Dimension::x);
        Value next = idxAdd(b, gridX, ticketIdx);
        buildProducer(b, env);
        if (cfg.prefetchNext) {
          OpBuilder::InsertionGuard g2(b);
          auto ifNext = scf::IfOp::create(
              b,
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, next, items),
              /*withElse=*/false);
          b.setInsertionPointToStart(ifNext.thenBlock());
          KernelEnv nextEnv = env;
          nextEnv.bh = arith::DivUIOp::create(b, next, nq);
          bindWorkItem(b, nextEnv, arith::RemUIOp::create(b, next, nq), nq, cuq,
                       cuk, tilesPerSplit);
          prefetchItemToL2(b, nextEnv);
        }
        scf::YieldOp::create(
            b, ValueRange{next, idxAdd(b, env.workIter, constIdx(b, 1)),
                          nextBase()});
      }
      b.setInsertionPointAfter(loop);
      resetWorkCounter(b, env);
    }
  }
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.elseBlock());
    if (cfg.consumerRegs > 0)
      NVVM::SetMaxRegisterOp::create(b, cfg.consumerRegs,
                                     NVVM::SetMaxRegisterAction::increase);
    WgmmaConsumer consumer(b, env, wg);
    if (!cfg.persistent) {
      consumer.build();
    } else {
      Value zero = constIdx(b, 0);
      Type idx = b.getIndexType();
      auto loop = scf::WhileOp::create(b, TypeRange{idx, idx, idx},
                                       ValueRange{zero, zero});
      Block *before = b.createBlock(&loop.getBefore(), {}, {idx, idx},
                                    {b.getLoc(), b.getLoc()});
      {
        Value iter = before->getArgument(0);
        QSlot q = qSlot(b, env, iter);
        Value parity =
            toI32(b, arith::RemUIOp::create(b, q.fill, constIdx(b, 2)));
        Value full = qSlotAddr(b, env, q, L.qFullOff(0), 8);
        mbarWait(b, full, parity);
        Value w = arith::IndexCastOp::create(
            b, idx,
            LLVM::LoadOp::create(b, i32,
                                 qSlotAddr(b, env, q, L.workSlotOff(0), 8)));
        Value valid =
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, w, items);
        scf::ConditionOp::create(
            b, valid, ValueRange{w, iter, before->getArgument(1)});
      }
      Block *after = b.createBlock(&loop.getAfter(), {}, {idx, idx, idx},
                                   {b.getLoc(), b.getLoc(), b.getLoc()});
      {
        bindItem(after->getArgument(0), after->getArgument(1),
                 after->getArgument(2));
        consumer.build();
        scf::YieldOp::create(
            b, ValueRange{idxAdd(b, env.workIter, constIdx(b, 1)), nextBase()});
      }
    }
  }
  gpu::ReturnOp::create(b);
  return fn;
}
