//===- SplitKVKernel.cpp - decode: the key range split over CTAs ----------===//
//
// Decoding is one (or a few) query rows against a long K/V history: there is
// no Lq × Lk matrix to speak of, the work is reading K and V once, and the
// prefill kernels, one CTA per (query head, 64-192 query rows), leave most
// of their rows empty, read each K/V head once per query head of its group
// and run Lk = 64k on as few CTAs as there are heads. This strategy runs the
// tile program differently:
//
// - GQA packing: the Lq · group query rows that share a K/V head are the
//   rows of one tile (row r = q·group + head in group), so every K/V tile is
//   read once per K/V head;
// - split-KV: grid.x splits the key tiles into contiguous chunks; each CTA
//   writes its partial output and log-sum-exp, and a second small kernel
//   merges them exactly by LSE (SplitKVCombine.cpp; SplitKVLaunch.cpp
//   chooses the split count from the SM count, the CTAs per split and Lk);
// - inside a CTA, warps split the keys of each tile as well when the rows
//   fill fewer than four 16-row slices, and merge their partials in shared
//   memory at the end with the same rule;
// - K/V tiles stream through a multi-stage cp.async ring (sm_80+), S = QKᵀ
//   and O += PV are m16n8k16 mma.sync, the softmax step and the epilogue are
//   the tile program's (RegisterSoftmax.cpp, finishRow).
//
// The traffic is K and V, read once, coalesced, with several tiles in
// flight per CTA: the kernel is built to run at the HBM roofline.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"
#include "MmaSyncPrimitives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
// Tile rows are padded by 16 bytes so that the ldmatrix row addresses of a
// warp fall in distinct banks (as in MmaKernel.cpp).
constexpr int64_t kPad = 8;
// The ring is sized so that two CTAs fit one SM of sm_90 (three stages of
// 64 keys at D = Dv = 128).
constexpr int64_t kRingBudgetBytes = 110 * 1024;
} // namespace

int64_t SplitKVConfig::ringBytes(int64_t d, int64_t dv) const {
  return stages * tileKeys * (d + kPad + dv + kPad) * 2;
}

int64_t SplitKVConfig::mergeBytes(int64_t dv) const {
  // Per warp and lane: m and l of two rows, then the O fragment.
  return keyWarps > 1 ? warps() * 32 * (4 + dv / 2) * 4 : 0;
}

int64_t SplitKVConfig::smemBytes(int64_t d, int64_t dv) const {
  return std::max(ringBytes(d, dv), mergeBytes(dv));
}

FailureOr<SplitKVConfig>
gpu_lowering::splitKVConfig(const MemrefKernelSpec &spec, std::string &why,
                            int64_t stages) {
  SplitKVConfig cfg;
  cfg.lq = spec.lq;
  if (ShapedType::isDynamic(cfg.lq)) {
    why = "the split-KV kernel packs the query rows of a K/V head into one "
          "tile and needs a static query length";
    return failure();
  }
  if (ShapedType::isDynamic(spec.hq) || ShapedType::isDynamic(spec.hkv)) {
    why = "the split-KV kernel packs the query heads of a K/V head into "
          "one tile and needs static head counts";
    return failure();
  }
  cfg.group = spec.hq / spec.hkv;
  cfg.rows = cfg.lq * cfg.group;
  int64_t d = spec.d, dv = spec.dv;
  int64_t slices = std::max<int64_t>(1, llvm::divideCeil(cfg.rows, 16));
  // Up to 128 rows in one CTA (eight warps), so that a K/V tile is read once
  // for all of them; fewer rows leave warps to share each tile's keys.
  cfg.rowWarps = slices <= 2 ? slices : slices <= 4 ? 4 : 8;
  cfg.tileKeys = d + dv <= 256 ? 64 : 32;
  cfg.keyWarps =
      std::max<int64_t>(1, std::min(4 / cfg.rowWarps, cfg.tileKeys / 16));
  // The loop waits for a tile while the next ones are in flight, and the
  // copies of tile t + S - 1 go into the stage tile t - 1 freed: S >= 2.
  if (stages == 1) {
    why = "the split-KV kernel's ring needs stages >= 2, got 1";
    return failure();
  }
  int64_t stage = cfg.tileKeys * (d + kPad + dv + kPad) * 2;
  cfg.stages = stages > 0 ? stages
                          : std::clamp<int64_t>(kRingBudgetBytes / stage, 2, 4);
  return cfg;
}

/// S = Q Kᵀ for this warp's keys of the tile in stage `st`: one m16n8
/// fragment per 8 keys, summed over D in k16 steps; B = Kᵀ is K's rows as
/// they lie (ldmatrix without transpose).
static SmallVector<Value> scoreFragments(ImplicitLocOpBuilder &b, Type elem,
                                         Value kRing, Value st, Value key0,
                                         ArrayRef<Value> qFrag, Value lane8,
                                         Value laneHalf8, int64_t keys,
                                         int64_t d) {
  Value zf = constF32(b, 0.0);
  SmallVector<Value> s;
  for (int64_t n8 = 0; n8 < keys / 8; ++n8) {
    SmallVector<Value, 4> acc(4, zf);
    Value key = arith::AddIOp::create(
        b, key0, arith::AddIOp::create(b, lane8, constIdx(b, 8 * n8)));
    for (int64_t ks = 0; ks < d / 16; ++ks) {
      Value c = arith::AddIOp::create(b, laneHalf8, constIdx(b, 16 * ks));
      SmallVector<Value, 2> bRegs =
          ldmatrixB(b, kRing, ValueRange{st, key, c}, /*transpose=*/false);
      acc = mmaSync(b, elem, qFrag.slice(4 * ks, 4), bRegs, acc);
    }
    s.append(acc.begin(), acc.end());
  }
  return s;
}

/// O += P V with P (the softmax registers) as A fragments and B = V[16
/// keys][8 columns] by ldmatrix with transpose.
static void accumulatePV(ImplicitLocOpBuilder &b, Type elem, Value vRing,
                         Value st, Value key0, ArrayRef<Value> p, Value lane16,
                         int64_t keys, int64_t dv, SmallVectorImpl<Value> &o) {
  SmallVector<Value> pFrag = packA(b, p, elem);
  for (int64_t n8 = 0; n8 < dv / 8; ++n8) {
    SmallVector<Value, 4> acc(o.begin() + 4 * n8, o.begin() + 4 * n8 + 4);
    Value col = constIdx(b, 8 * n8);
    for (int64_t kk = 0; kk < keys / 16; ++kk) {
      Value key = arith::AddIOp::create(
          b, key0, arith::AddIOp::create(b, lane16, constIdx(b, 16 * kk)));
      SmallVector<Value, 2> bRegs =
          ldmatrixB(b, vRing, ValueRange{st, key, col}, /*transpose=*/true);
      acc = mmaSync(b, elem, ArrayRef<Value>(pFrag).slice(4 * kk, 4), bRegs,
                    acc);
    }
    std::copy(acc.begin(), acc.end(), o.begin() + 4 * n8);
  }
}

gpu::GPUFuncOp gpu_lowering::buildSplitKVKernel(OpBuilder &ob, Location loc,
                                                gpu::GPUModuleOp module,
                                                const MemrefKernelSpec &spec,
                                                const SplitKVConfig &cfg,
                                                ArrayRef<Type> argTypes) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type elem = spec.qElem;
  Type f32 = b.getF32Type();
  const int64_t D = spec.d, Dv = spec.dv, T = cfg.tileKeys,
                Tw = cfg.keysPerWarp(), S = cfg.stages, G = cfg.group,
                R = cfg.rows;
  gpu::GPUFuncOp fn = createMemrefKernelFunc(b, argTypes, {}, {},
                                             cfg.threads());
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  MemrefKernelArgs args(entry, spec);
  unsigned nArgs = entry.getNumArguments();
  Value oPart = entry.getArgument(nArgs - 3);   // [splits, bh·Lq, Dv] f32
  Value lsePart = entry.getArgument(nArgs - 2); // [splits, bh·Lq] f32
  Value tilesPerSplit = entry.getArgument(nArgs - 1);

  // The ring: K tiles [S][T][D + pad] then V tiles [S][T][Dv + pad], in
  // dynamic shared memory; after the loop it holds the warps' partials.
  DynamicSmem smem(b);
  auto view = [&](ArrayRef<int64_t> shape, Type t, int64_t offset) {
    return smem.view(b, shape, t, offset);
  };
  Value kRing = view({S, T, D + kPad}, elem, 0);
  Value vRing = view({S, T, Dv + kPad}, elem, S * T * (D + kPad) * 2);

  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  MmaLane ml = mmaLane(b);
  Value tid = ml.tid, warp = ml.warp, lane = ml.lane, g = ml.g, t2 = ml.t2,
        lane8 = ml.lane8, laneHalf8 = ml.laneHalf8, lane16 = ml.lane16;
  Value rw = arith::DivUIOp::create(b, warp, constIdx(b, cfg.keyWarps));
  Value kw = arith::RemUIOp::create(b, warp, constIdx(b, cfg.keyWarps));

  Value split = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value splits = gpu::GridDimOp::create(b, gpu::Dimension::x);
  Value yb = batchHeadBlock(
      b, arith::MulIOp::create(
             b,
             arith::DivUIOp::create(b, product(b, args.batchSizes),
                                    constIdx(b, G)),
             constIdx(b, cfg.rowBlocks())));
  Value kvbh = arith::DivUIOp::create(b, yb, constIdx(b, cfg.rowBlocks()));
  Value rb = arith::RemUIOp::create(b, yb, constIdx(b, cfg.rowBlocks()));
  Value lq = constIdx(b, cfg.lq);
  // Where key row j of this CTA's K/V head lives: row j of [kvbh] in a
  // contiguous cache; in a paged one row j mod S of the page the block
  // table names for j / S, clamped into the pool. A paged sequence's length
  // is its own (clamped to the table's capacity; none without pages).
  Value lk, kvBatch, kvHead, lastPage;
  if (spec.pageSize > 0) {
    kvBatch = arith::DivUIOp::create(b, kvbh, args.hkv);
    kvHead = arith::RemUIOp::create(b, kvbh, args.hkv);
    Value pages = memref::DimOp::create(b, args.k, 0);
    lastPage = arith::SubIOp::create(b, pages, one);
    Value capacity = arith::MulIOp::create(
        b, memref::DimOp::create(b, args.blockTable, 1),
        constIdx(b, spec.pageSize));
    Value n = arith::IndexCastOp::create(
        b, b.getIndexType(),
        memref::LoadOp::create(b, args.seqLens, ValueRange{kvBatch}));
    n = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, n, zero), capacity);
    lk = arith::SelectOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, pages, zero), n,
        zero);
  } else {
    lk = memref::DimOp::create(b, args.k, 1);
  }
  Value lkLast = arith::SubIOp::create(b, lk, one);
  auto kvIndex = [&](ImplicitLocOpBuilder &ib, Value j,
                     Value col) -> SmallVector<Value, 4> {
    if (spec.pageSize == 0)
      return {kvbh, j, col};
    Value size = constIdx(ib, spec.pageSize);
    Value slot = arith::DivUIOp::create(ib, j, size);
    Value page = arith::IndexCastOp::create(
        ib, ib.getIndexType(),
        memref::LoadOp::create(ib, args.blockTable, ValueRange{kvBatch, slot}));
    page = arith::MinSIOp::create(
        ib, arith::MaxSIOp::create(ib, page, constIdx(ib, 0)), lastPage);
    return {page, arith::RemUIOp::create(ib, j, size), kvHead, col};
  };

  // This thread's two packed rows (fragment rows g and g + 8 of its warp's
  // slice), clamped into the R rows, and the query row and head of each.
  Value blockRow0 = arith::MulIOp::create(b, rb, constIdx(b, cfg.rowsPerBlock()));
  Value rowBase = arith::AddIOp::create(
      b, blockRow0, arith::MulIOp::create(b, rw, constIdx(b, 16)));
  Value rows[2], qRow[2], bhRow[2];
  std::array<SmallVector<Value>, 2> batchIdx;
  for (int64_t h = 0; h < 2; ++h) {
    rows[h] = arith::AddIOp::create(b, rowBase,
                                    arith::AddIOp::create(b, g, constIdx(b, 8 * h)));
    Value rc = arith::MinSIOp::create(b, rows[h], constIdx(b, R - 1));
    qRow[h] = arith::DivUIOp::create(b, rc, constIdx(b, G));
    bhRow[h] = arith::AddIOp::create(
        b, arith::MulIOp::create(b, kvbh, constIdx(b, G)),
        arith::RemUIOp::create(b, rc, constIdx(b, G)));
    if (spec.scoreMod)
      batchIdx[h] = headIndices(b, bhRow[h], args.batchSizes, args.hkv,
                                /*withBatchIndices=*/true)
                        .batchIdx;
  }
  SmallVector<Value> qFrag = loadQueryFragments(b, args.q, bhRow, qRow, t2, D);

  // The key tiles of this CTA: its split's chunk of whole tiles, within
  // those the mask leaves visible to its query rows.
  Value q0 = arith::DivUIOp::create(b, blockRow0, constIdx(b, G));
  int64_t blockQueries = (cfg.rowsPerBlock() - 1) / G + 2;
  auto [vBegin, vEnd] =
      visibleTileRange(b, spec.mask, q0, blockQueries, lq, lk, T);
  TileWalk walk{vBegin, vEnd, Value(), Value()};
  // A score_mod's mask of the indices alone sorts tiles too: the block's
  // rows are queries [q0, q0 + blockQueries) of the G query heads of its
  // K/V head, which bound the batch indices the mask may read (the outer
  // dims are the same for the G heads, the head dim is a range).
  // (With pages too: keys are positions in their sequence, lk its length.)
  std::optional<IndexMask> indexMask =
      kernelIndexMask(spec.scoreMod, spec.numBatchDims, /*classifiable=*/true);
  SmallVector<Value> blockBatchLo, blockBatchHi;
  if (indexMask) {
    Value head0 = arith::MulIOp::create(b, kvbh, constIdx(b, G));
    blockBatchLo = batchIndices(b, head0, args.batchSizes);
    blockBatchHi =
        batchIndices(b, arith::AddIOp::create(b, head0, constIdx(b, G - 1)),
                     args.batchSizes);
    walk = trimHiddenTiles(b, *spec.scoreMod, *indexMask, blockBatchLo,
                           blockBatchHi, {vBegin, vEnd}, q0, blockQueries, lq,
                           lk, T);
  }
  // This CTA's steps of the walk.
  Value tBegin, tEnd;
  std::tie(tBegin, tEnd) = splitShare(
      b, walk.begin, walk.end, splits, split, tilesPerSplit,
      /*divideVisible=*/indexMask || (spec.mask && !spec.mask.isNone()));
  Value nLocal = arith::SubIOp::create(b, tEnd, tBegin);

  auto tokenTy = nvgpu::DeviceAsyncTokenType::get(ctx);
  // A thread's copies of one tile: when the threads cover whole rows
  // (threads a multiple of the row's 16-byte chunks) its rows are jj0 + i·step
  // and its column is fixed, so every copy of a whole tile is the thread's
  // base address plus a constant; only the tile that crosses Lk clamps.
  struct RowCopies {
    Value src, ring;
    int64_t chunks, total;
    Value jj0, col; // set when threads % chunks == 0
  };
  auto rowCopies = [&](Value src, Value ring, int64_t width) {
    RowCopies rc{src, ring, width / 8, T * (width / 8), Value(), Value()};
    if (cfg.threads() % rc.chunks == 0) {
      rc.jj0 = arith::DivUIOp::create(b, tid, constIdx(b, rc.chunks));
      rc.col = arith::MulIOp::create(
          b, arith::RemUIOp::create(b, tid, constIdx(b, rc.chunks)),
          constIdx(b, 8));
    }
    return rc;
  };
  RowCopies kCopies = rowCopies(args.k, kRing, D);
  RowCopies vCopies = rowCopies(args.v, vRing, Dv);
  auto copyAt = [&](ImplicitLocOpBuilder &ib, const RowCopies &rc, Value st,
                    Value jj, ValueRange src) {
    nvgpu::DeviceAsyncCopyOp::create(ib, tokenTy, rc.ring,
                                     ValueRange{st, jj, src.back()}, rc.src,
                                     src, ib.getIndexAttr(8), Value(),
                                     ib.getUnitAttr());
  };
  auto copy = [&](ImplicitLocOpBuilder &ib, const RowCopies &rc, Value st,
                  Value jj, Value j, Value col) {
    copyAt(ib, rc, st, jj, kvIndex(ib, j, col));
  };
  // With D = Dv the K and V copies of a thread cover the same rows and
  // columns: in a paged cache one block-table read serves both.
  bool sharedRows = spec.pageSize > 0 && kCopies.jj0 && vCopies.jj0 &&
                    kCopies.chunks == vCopies.chunks;
  auto copyRows = [&](ImplicitLocOpBuilder &ib, const RowCopies &rc, Value st,
                      Value j0, bool clamp, const RowCopies *twin = nullptr) {
    auto row = [&](Value jj) {
      Value j = arith::AddIOp::create(ib, j0, jj);
      return clamp ? arith::MinSIOp::create(ib, j, lkLast).getResult() : j;
    };
    if (rc.jj0) {
      int64_t step = cfg.threads() / rc.chunks;
      for (int64_t i = 0; i * step < T; ++i) {
        Value jj = arith::AddIOp::create(ib, rc.jj0, constIdx(ib, i * step));
        SmallVector<Value, 4> src = kvIndex(ib, row(jj), rc.col);
        copyAt(ib, rc, st, jj, src);
        if (twin)
          copyAt(ib, *twin, st, jj, src);
      }
      return;
    }
    for (int64_t i = 0; i * cfg.threads() < rc.total; ++i) {
      Value e = arith::AddIOp::create(ib, tid, constIdx(ib, i * cfg.threads()));
      OpBuilder::InsertionGuard gd(ib);
      if ((i + 1) * cfg.threads() > rc.total) {
        auto in = scf::IfOp::create(
            ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, e,
                                      constIdx(ib, rc.total)),
            /*withElse=*/false);
        ib.setInsertionPointToStart(in.thenBlock());
      }
      Value jj = arith::DivUIOp::create(ib, e, constIdx(ib, rc.chunks));
      Value col = arith::MulIOp::create(
          ib, arith::RemUIOp::create(ib, e, constIdx(ib, rc.chunks)),
          constIdx(ib, 8));
      copy(ib, rc, st, jj, row(jj), col);
    }
  };
  // One tile into stage `st`: all threads, 16 bytes per copy; keys past Lk
  // repeat the last key (masked in the softmax).
  auto loadTile = [&](ImplicitLocOpBuilder &ib, Value tile, Value st) {
    Value j0 = arith::MulIOp::create(ib, tile, constIdx(ib, T));
    Value whole = arith::CmpIOp::create(
        ib, arith::CmpIPredicate::sle,
        arith::AddIOp::create(ib, j0, constIdx(ib, T)), lk);
    auto ifWhole = scf::IfOp::create(ib, whole, /*withElse=*/true);
    for (bool clamp : {false, true}) {
      OpBuilder::InsertionGuard gd(ib);
      ib.setInsertionPointToStart(clamp ? ifWhole.elseBlock()
                                        : ifWhole.thenBlock());
      if (sharedRows) {
        copyRows(ib, kCopies, st, j0, clamp, &vCopies);
        continue;
      }
      copyRows(ib, kCopies, st, j0, clamp);
      copyRows(ib, vCopies, st, j0, clamp);
    }
  };
  // Copies are committed as one group per tile, empty groups included, so
  // that "all but the newest S - 2 groups done" at the top of an iteration
  // always means "its tile is in". The NVVM ops directly: the nvgpu group
  // ops thread tokens, which the copies under scf.if cannot hand out.
  auto commit = [&](ImplicitLocOpBuilder &ib) {
    NVVM::CpAsyncCommitGroupOp::create(ib);
  };
  auto waitGroups = [&](ImplicitLocOpBuilder &ib, int64_t pending) {
    NVVM::CpAsyncWaitGroupOp::create(ib, ib.getI32IntegerAttr(pending));
  };
  auto loadIfInRange = [&](ImplicitLocOpBuilder &ib, Value i) {
    auto in = scf::IfOp::create(
        ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, i, nLocal),
        /*withElse=*/false);
    OpBuilder::InsertionGuard gd(ib);
    ib.setInsertionPointToStart(in.thenBlock());
    loadTile(ib, walk.tile(ib, arith::AddIOp::create(ib, tBegin, i)),
             arith::RemUIOp::create(ib, i, constIdx(ib, S)));
  };
  for (int64_t s = 0; s + 1 < S; ++s) {
    loadIfInRange(b, constIdx(b, s));
    commit(b);
  }

  Value diagOff = maskDiagonalOffset(b, spec.mask, lq, lk);
  // The query rows of this warp's slice, for the per-tile mask test.
  Value warpQLo = arith::DivUIOp::create(
      b, arith::MinSIOp::create(b, rowBase, constIdx(b, R - 1)),
      constIdx(b, G));
  Value warpQHi = arith::DivUIOp::create(
      b,
      arith::MinSIOp::create(
          b, arith::AddIOp::create(b, rowBase, constIdx(b, 15)),
          constIdx(b, R - 1)),
      constIdx(b, G));
  Value warpKey0 = arith::MulIOp::create(b, kw, constIdx(b, Tw));
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value zf = constF32(b, 0.0);
  SmallVector<Value> init = {negInf, negInf, zf, zf};
  init.append(Dv / 2, zf);

  auto loop = scf::ForOp::create(
      b, zero, nLocal, one, init,
      [&](OpBuilder &nb, Location l, Value it, ValueRange state) {
        ImplicitLocOpBuilder ib(l, nb);
        // Tile `it` is in once at most S - 2 groups are pending; past the
        // barrier every thread has also finished the previous tile, so its
        // stage takes the copies of tile it + S - 1 during this one's math.
        waitGroups(ib, S - 2);
        gpu::BarrierOp::create(ib);
        loadIfInRange(ib, arith::AddIOp::create(ib, it, constIdx(ib, S - 1)));
        commit(ib);
        Value st = arith::RemUIOp::create(ib, it, constIdx(ib, S));
        Value tile = walk.tile(ib, arith::AddIOp::create(ib, tBegin, it));
        Value colBase = arith::AddIOp::create(
            ib, arith::MulIOp::create(ib, tile, constIdx(ib, T)), warpKey0);

        SmallVector<Value> s = scoreFragments(ib, elem, kRing, st, warpKey0,
                                              qFrag, lane8, laneHalf8, Tw, D);
        RowState rs{{state[0], state[1]}, {state[2], state[3]}};
        ScoreContext sc =
            makeScoreContext(ib, spec.mask, spec.scoreMod, qRow, colBase, t2,
                             lq, lk, {batchIdx[0], batchIdx[1]}, args.captures,
                             /*needsMask=*/true, spec.indexBound());
        Value needsMask = tileNeedsElementMask(ib, spec.mask, colBase, Tw,
                                               warpQLo, warpQHi, lk, diagOff);
        // Whole for the block's rows is whole for this warp's (the rows the
        // softmax's shuffles span).
        if (indexMask)
          sc.indexFull = classifyScoreTile(ib, *spec.scoreMod, *indexMask,
                                           blockBatchLo, blockBatchHi, warpQLo,
                                           warpQHi, colBase, Tw, lq, lk)
                             .full;
        std::array<Value, 2> alpha =
            maskedSoftmaxStep(ib, s, rs, spec.scale, needsMask, sc);
        SmallVector<Value> o(state.drop_front(4));
        for (size_t i = 0; i < o.size(); ++i)
          o[i] = arith::MulFOp::create(ib, o[i],
                                       alpha[AccumulatorLayout::rowHalf(i)]);
        accumulatePV(ib, elem, vRing, st, warpKey0, s, lane16, Tw, Dv, o);
        SmallVector<Value> next = {rs.m[0], rs.m[1], rs.l[0], rs.l[1]};
        next.append(o.begin(), o.end());
        scf::YieldOp::create(ib, next);
      });
  SmallVector<Value> fin(loop.getResults());

  // Warps that split the keys of a tile merge their partials (m, l, O) into
  // the first warp of their row slice, through the drained ring.
  if (cfg.keyWarps > 1) {
    waitGroups(b, 0);
    gpu::BarrierOp::create(b);
    int64_t vals = fin.size();
    Value part = view({cfg.warps(), vals, 32}, f32, 0);
    for (int64_t v = 0; v < vals; ++v)
      memref::StoreOp::create(b, fin[v], part,
                              ValueRange{warp, constIdx(b, v), lane});
    gpu::BarrierOp::create(b);
    auto first = scf::IfOp::create(
        b, SmallVector<Type>(vals, f32),
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, kw, zero),
        /*withElse=*/true);
    {
      OpBuilder::InsertionGuard gd(b);
      b.setInsertionPointToStart(first.thenBlock());
      SmallVector<Value> acc(fin);
      for (int64_t w = 1; w < cfg.keyWarps; ++w) {
        Value src = arith::AddIOp::create(b, warp, constIdx(b, w));
        auto read = [&](int64_t v) {
          return memref::LoadOp::create(b, part,
                                        ValueRange{src, constIdx(b, v), lane})
              .getResult();
        };
        std::array<Value, 2> alpha, beta;
        for (int64_t h = 0; h < 2; ++h) {
          PartialMerge pm = mergePartial(b, acc[h], acc[2 + h], read(h),
                                         read(2 + h));
          acc[h] = pm.m;
          acc[2 + h] = pm.l;
          alpha[h] = pm.alpha;
          beta[h] = pm.beta;
        }
        for (int64_t i = 4; i < vals; ++i) {
          int64_t h = AccumulatorLayout::rowHalf(i - 4);
          acc[i] = fmaF32(b, read(i), beta[h],
                          arith::MulFOp::create(b, acc[i], alpha[h]));
        }
      }
      scf::YieldOp::create(b, acc);
      b.setInsertionPointToStart(first.elseBlock());
      scf::YieldOp::create(b, fin);
    }
    fin.assign(first.getResults().begin(), first.getResults().end());
  }

  // Epilogue, by the first warp of each row slice: the whole result when
  // there is one split, else the partial (normalised O and its lse) for
  // the combine kernel.
  Value writer = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, kw, zero);
  auto ifWriter = scf::IfOp::create(b, writer, /*withElse=*/false);
  b.setInsertionPointToStart(ifWriter.thenBlock());
  Value single = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, splits, one);
  Value lqV = constIdx(b, cfg.lq);
  for (int64_t h = 0; h < 2; ++h) {
    Value lTot = quadReduce(b, fin[2 + h], /*isMax=*/false);
    RowResult partRow = finishRow(b, fin[h], lTot, /*withLse=*/true);
    // The whole row counts its head's sink; a partial leaves it to the
    // combine, which counts it once over all splits.
    RowResult wholeRow =
        args.sinks ? finishRow(b, fin[h], lTot, /*withLse=*/true,
                               sinkLog2(b, args.sinks, bhRow[h]))
                   : partRow;
    Value valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, rows[h],
                                        constIdx(b, R));
    auto ifRow = scf::IfOp::create(b, valid, /*withElse=*/false);
    OpBuilder::InsertionGuard gd(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    Value firstLane =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t2, zero);
    auto ifSingle = scf::IfOp::create(b, single, /*withElse=*/true);
    for (bool whole : {true, false}) {
      OpBuilder::InsertionGuard gs(b);
      b.setInsertionPointToStart(whole ? ifSingle.thenBlock()
                                       : ifSingle.elseBlock());
      const RowResult &row = whole ? wholeRow : partRow;
      Value flat = arith::AddIOp::create(
          b, arith::MulIOp::create(b, bhRow[h], lqV), qRow[h]);
      // The thread holds columns 8·n + 2·(lane%4) + {0, 1} of its rows.
      for (int64_t n8 = 0; n8 < Dv / 8; ++n8)
        for (int64_t c = 8 * n8; c < 8 * n8 + 2; ++c) {
          Value x = arith::MulFOp::create(
              b, fin[4 + AccumulatorLayout::element(c, h)], row.inv);
          Value col = arith::AddIOp::create(b, t2, constIdx(b, c));
          if (whole) {
            memref::StoreOp::create(b, fromF32(b, x, spec.oElem), args.out,
                                    ValueRange{bhRow[h], qRow[h], col});
          } else {
            memref::StoreOp::create(b, x, oPart, ValueRange{split, flat, col});
          }
        }
      if (whole && !args.lse)
        continue;
      // One lane of the quad writes the row's log-sum-exp.
      auto ifLane = scf::IfOp::create(b, firstLane, /*withElse=*/false);
      OpBuilder::InsertionGuard gl(b);
      b.setInsertionPointToStart(ifLane.thenBlock());
      if (whole)
        memref::StoreOp::create(b, row.lse, args.lse,
                                ValueRange{bhRow[h], qRow[h]});
      else
        memref::StoreOp::create(b, row.lse, lsePart, ValueRange{split, flat});
    }
  }
  b.setInsertionPointAfter(ifWriter);
  gpu::ReturnOp::create(b);
  return fn;
}
