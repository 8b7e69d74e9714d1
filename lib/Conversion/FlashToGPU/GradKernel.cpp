//===- GradKernel.cpp - flash.attention_grad on tensor cores with mma.sync ===//
//
// The backward of the tile program, transposed: a CTA owns a block of keys
// of one K/V head (16 per warp) and walks the query blocks that can see
// them, for every query head of the group, so dK and dV accumulate in
// registers over the whole walk and a grouped-query gradient needs no
// second pass. Per query block, with the warp's scores as rows = keys:
//
//   Sᵀ  = K Qᵀ,  dPᵀ = V dOᵀ                      (mma.sync, K/V from smem)
//   Pᵀ  = 2^(Sᵀ·scale·log2 e − lse·log2 e)        (no row reduction: the
//                                                    statistics are saved)
//   dSᵀ = Pᵀ ∘ (dPᵀ − rowsum(dO ∘ O))
//   dV += Pᵀ dO,  dK += dSᵀ Q                      (P and dS stay registers)
//   dQ += dS K                                     (dSᵀ through smem; the
//                                                    block's dQ staged in
//                                                    smem and added to the
//                                                    f32 accumulator by
//                                                    bulk reductions)
//
// The softmax's per-row normaliser is what the forward saved (lse), so the
// recomputation is elementwise. A query row that saw no key, and the padding
// past Lq, carry lse·log2 e = +inf (GradRowKernels.cpp) and get P = 0
// without a per-element test; keys past Lk and the causal / window edges
// take the tile program's element mask only in tiles that cross them.
// Q, dO and the row statistics of the next block stream in by cp.async
// while this block is computed.
//
//===----------------------------------------------------------------------===//
#include "HopperPrimitives.h"
#include "KernelStrategies.h"
#include "MmaSyncPrimitives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
// Tile rows padded by 16 bytes: ldmatrix rows and fragment stores of a warp
// then fall in distinct banks.
constexpr int64_t kPad = 8;
// f32 rows of the dQ staging tile padded by 32 bytes: a warp's 8-byte
// fragment stores then take two conflict-free wavefronts.
constexpr int64_t kDqPad = 8;

/// The address of a memref's first element as an i64.
static Value baseAddress(ImplicitLocOpBuilder &b, Value m) {
  return arith::IndexCastOp::create(
      b, b.getI64Type(),
      memref::ExtractAlignedPointerAsIndexOp::create(b, m));
}

/// Byte offsets of the kernel's shared memory.
struct GradSmem {
  int64_t k, v, q, dO, ds, lse, delta, dq, total;
  explicit GradSmem(const GradKernelConfig &c) {
    int64_t bc = c.blockKeys, br = c.blockQueries;
    k = 0;
    v = k + bc * (c.d + kPad) * 2;
    q = v + bc * (c.dv + kPad) * 2;
    dO = q + 2 * br * (c.d + kPad) * 2;
    ds = dO + 2 * br * (c.dv + kPad) * 2;
    lse = ds + bc * (br + kPad) * 2;
    delta = lse + 2 * br * 4;
    dq = delta + 2 * br * 4;
    total = dq + (c.bulkReduceDq ? br * (c.d / c.colSplit + kDqPad) * 4 : 0);
  }
};
} // namespace

int64_t GradKernelConfig::smemBytes() const {
  return wgmma ? gradWgmmaSmemBytes(*this) : GradSmem(*this).total;
}

gpu::GPUFuncOp gpu_lowering::buildGradKernel(OpBuilder &ob, Location loc,
                                             gpu::GPUModuleOp module,
                                             const GradKernelConfig &cfg,
                                             ArrayRef<Type> argTypes) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type elem = cfg.elem;
  Type f32 = b.getF32Type();
  const int64_t D = cfg.d, Dv = cfg.dv, Bc = cfg.blockKeys,
                Br = cfg.blockQueries, W = cfg.warps();
  // The columns of dK, dV and dQ this CTA owns: all, or one of colSplit
  // slices (wide heads; S and dP still contract over all of D and Dv).
  const int64_t Dh = D / cfg.colSplit, Dvh = Dv / cfg.colSplit;
  gpu::GPUFuncOp fn =
      createMemrefKernelFunc(b, argTypes, {}, {}, cfg.threads(), "kernel");
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value q = entry.getArgument(0), k = entry.getArgument(1),
        v = entry.getArgument(2), dO = entry.getArgument(3),
        lse2 = entry.getArgument(4), delta = entry.getArgument(5),
        dqAcc = entry.getArgument(6), dk = entry.getArgument(7),
        dv = entry.getArgument(8), group = entry.getArgument(9),
        kvbhCount = entry.getArgument(10);

  DynamicSmem smem(b);
  auto view = [&](ArrayRef<int64_t> shape, Type t, int64_t offset) {
    return smem.view(b, shape, t, offset);
  };
  GradSmem lay(cfg);
  Value kT = view({Bc, D + kPad}, elem, lay.k);
  Value vT = view({Bc, Dv + kPad}, elem, lay.v);
  Value qT = view({2, Br, D + kPad}, elem, lay.q);
  Value doT = view({2, Br, Dv + kPad}, elem, lay.dO);
  Value dsT = view({Bc, Br + kPad}, elem, lay.ds);
  Value lseT = view({2, Br}, f32, lay.lse);
  Value deltaT = view({2, Br}, f32, lay.delta);
  Value dqT =
      cfg.bulkReduceDq ? view({Br, Dh + kDqPad}, f32, lay.dq) : Value();

  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  MmaLane ml = mmaLane(b);
  Value tid = ml.tid, warp = ml.warp, lane = ml.lane, g = ml.g, t2 = ml.t2,
        lane8 = ml.lane8, laneHalf8 = ml.laneHalf8, lane16 = ml.lane16;
  Value kvbh = batchHeadBlock(b, kvbhCount);
  Value bx = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value split = constIdx(b, cfg.colSplit);
  Value slice = arith::RemUIOp::create(b, bx, split);
  Value colD = arith::MulIOp::create(b, slice, constIdx(b, Dh));
  Value colDv = arith::MulIOp::create(b, slice, constIdx(b, Dvh));
  Value k0 = arith::MulIOp::create(b, arith::DivUIOp::create(b, bx, split),
                                   constIdx(b, Bc));
  Value lq = memref::DimOp::create(b, q, 1);
  Value lk = memref::DimOp::create(b, k, 1);
  Value lqLast = arith::SubIOp::create(b, lq, one);
  Value lkLast = arith::SubIOp::create(b, lk, one);
  // The warp's 16 keys within the block, and this thread's two of them.
  Value kw0 = arith::MulIOp::create(b, warp, constIdx(b, 16));
  Value keys[2] = {arith::AddIOp::create(b, arith::AddIOp::create(b, k0, kw0), g),
                   Value()};
  keys[1] = arith::AddIOp::create(b, keys[0], constIdx(b, 8));

  // Plain variables, not a structured binding: lambdas below capture them.
  Value qBegin, qEnd;
  std::tie(qBegin, qEnd) =
      visibleQueryBlockRange(b, cfg.mask, k0, Bc, lq, lk, Br);
  Value nQ = arith::SubIOp::create(b, qEnd, qBegin);
  Value steps = arith::MulIOp::create(b, nQ, group);
  Value diagOff = maskDiagonalOffset(b, cfg.mask, lq, lk);

  // 16-byte cp.async copies of `rows` rows of width `width` from src[bh,
  // row0 + r (clamped to `last`)] into dst[prefix..., r]: all threads,
  // consecutive chunks of a row.
  auto tokenTy = nvgpu::DeviceAsyncTokenType::get(ctx);
  const int64_t threads = cfg.threads();
  auto copyRows = [&](ImplicitLocOpBuilder &ib, Value src, Value bh,
                      Value row0, Value last, int64_t rows, int64_t width,
                      Value dst, ValueRange prefix) {
    int64_t chunks = width / 8, total = rows * chunks;
    for (int64_t i = 0; i * threads < total; ++i) {
      Value e = arith::AddIOp::create(ib, tid, constIdx(ib, i * threads));
      OpBuilder::InsertionGuard gd(ib);
      if ((i + 1) * threads > total) {
        auto in = scf::IfOp::create(
            ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, e,
                                      constIdx(ib, total)),
            /*withElse=*/false);
        ib.setInsertionPointToStart(in.thenBlock());
      }
      Value r = arith::DivUIOp::create(ib, e, constIdx(ib, chunks));
      Value c = arith::MulIOp::create(
          ib, arith::RemUIOp::create(ib, e, constIdx(ib, chunks)),
          constIdx(ib, 8));
      Value j = arith::MinSIOp::create(ib, arith::AddIOp::create(ib, row0, r),
                                       last);
      SmallVector<Value> dIdx(prefix);
      dIdx.append({r, c});
      nvgpu::DeviceAsyncCopyOp::create(ib, tokenTy, dst, dIdx, src,
                                       ValueRange{bh, j, c},
                                       ib.getIndexAttr(8), Value(),
                                       ib.getUnitAttr());
    }
  };
  // Step `it` of the walk: query head `g` of the group, query block `qb`.
  auto stepBlock = [&](ImplicitLocOpBuilder &ib, Value it) {
    Value gi = arith::DivUIOp::create(ib, it, nQ);
    Value qb = arith::AddIOp::create(ib, qBegin,
                                     arith::RemUIOp::create(ib, it, nQ));
    Value bh = arith::AddIOp::create(ib, arith::MulIOp::create(ib, kvbh, group),
                                     gi);
    return std::make_pair(bh, arith::MulIOp::create(ib, qb, constIdx(ib, Br))
                                  .getResult());
  };
  // Q, dO and the row statistics of step `it` into buffer `st`. The row
  // buffers are padded to whole blocks, so their copies need no bounds;
  // Q and dO rows past Lq repeat the last row (their P is 0).
  auto loadStep = [&](ImplicitLocOpBuilder &ib, Value it, Value st) {
    auto [bh, q0] = stepBlock(ib, it);
    copyRows(ib, q, bh, q0, lqLast, Br, D, qT, ValueRange{st});
    copyRows(ib, dO, bh, q0, lqLast, Br, Dv, doT, ValueRange{st});
    Value quads = constIdx(ib, Br / 4);
    for (auto [src, dst, lo] : {std::make_tuple(lse2, lseT, int64_t(0)),
                                std::make_tuple(delta, deltaT, Br / 4)}) {
      Value e = arith::SubIOp::create(ib, tid, constIdx(ib, lo));
      Value in = arith::AndIOp::create(
          ib,
          arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, tid,
                                constIdx(ib, lo)),
          arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, e, quads));
      auto ifIn = scf::IfOp::create(ib, in, /*withElse=*/false);
      OpBuilder::InsertionGuard gd(ib);
      ib.setInsertionPointToStart(ifIn.thenBlock());
      Value c = arith::MulIOp::create(ib, e, constIdx(ib, 4));
      nvgpu::DeviceAsyncCopyOp::create(
          ib, tokenTy, dst, ValueRange{st, c}, src,
          ValueRange{bh, arith::AddIOp::create(ib, q0, c)},
          ib.getIndexAttr(4), Value(), UnitAttr());
    }
  };

  // Prologue: the K/V block (keys past Lk repeat the last key; masked) and
  // the first step's Q block.
  copyRows(b, k, kvbh, k0, lkLast, Bc, D, kT, ValueRange{});
  copyRows(b, v, kvbh, k0, lkLast, Bc, Dv, vT, ValueRange{});
  {
    OpBuilder::InsertionGuard gd(b);
    auto ifAny = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, steps, zero),
        /*withElse=*/false);
    b.setInsertionPointToStart(ifAny.thenBlock());
    loadStep(b, zero, zero);
  }
  NVVM::CpAsyncCommitGroupOp::create(b);

  Value zf = constF32(b, 0.0);
  GradScoreModArgs modArgs = gradScoreModArgs(entry, cfg);
  SmallVector<Value> init(Dh / 2 + Dvh / 2, zf); // dK then dV fragments
  // dQ's share of a warp: 16 query rows × `dqCols` columns.
  const int64_t rowTiles = Br / 16, colSplits = W / rowTiles,
                dqCols = Dh / colSplits;
  Value dqRow = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, warp, constIdx(b, rowTiles)),
      constIdx(b, 16));
  Value dqCol0 = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, warp, constIdx(b, rowTiles)),
      constIdx(b, dqCols));
  // ldmatrix.x4 row addresses (MmaSyncPrimitives.h): A from [m][k] tiles
  // (aRow, aCol), A from the [k][m] dSᵀ tile (atRow, atCol); B pairs from
  // [n][k] tiles (atRow, laneHalf8) and from [k][n] tiles (lane16, aCol).
  Value aRow = lane16;
  Value aCol = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, lane, constIdx(b, 16)), constIdx(b, 8));
  Value atRow = arith::AddIOp::create(b, aCol, lane8);
  Value atCol = laneHalf8;

  // Thread r < Br reduces row r of the staging tile into the accumulator
  // row of step `it`'s block: cp.reduce.async.bulk (sm_90) adds 4·D bytes
  // in L2. Rows past Lq land in the accumulator's padding.
  auto ifReducer = [&](ImplicitLocOpBuilder &ib, function_ref<void()> body) {
    OpBuilder::InsertionGuard gd(ib);
    auto ifR = scf::IfOp::create(
        ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::ult, tid,
                                  constIdx(ib, Br)),
        /*withElse=*/false);
    ib.setInsertionPointToStart(ifR.thenBlock());
    body();
  };
  Value lqPad, dqBase, stageBase, lockBase;
  if (cfg.bulkReduceDq) {
    lqPad = memref::DimOp::create(b, dqAcc, 1);
    dqBase = baseAddress(b, dqAcc);
    stageBase = baseAddress(b, dqT);
  }
  if (cfg.deterministic)
    lockBase = baseAddress(b, entry.getArgument(11));
  // Row r of the staging tile into its accumulator row (this CTA's
  // columns): one bulk add of 4·Dh bytes.
  auto reduceRow = [&](ImplicitLocOpBuilder &ib, Value bh, Value q0, Value r) {
    Value grow = arith::AddIOp::create(
        ib, arith::MulIOp::create(ib, bh, lqPad), arith::AddIOp::create(ib, q0, r));
    Value dst = arith::AddIOp::create(
        ib, dqBase,
        arith::IndexCastOp::create(
            ib, ib.getI64Type(),
            arith::MulIOp::create(
                ib, arith::AddIOp::create(
                        ib, arith::MulIOp::create(ib, grow, constIdx(ib, D)),
                        colD),
                constIdx(ib, 4))));
    Value src = arith::TruncIOp::create(
        ib, ib.getI32Type(),
        arith::AddIOp::create(
            ib, stageBase,
            arith::IndexCastOp::create(
                ib, ib.getI64Type(),
                arith::MulIOp::create(ib, r, constIdx(ib, 4 * (Dh + kDqPad))))));
    inlinePtx(ib,
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], "
        "[$1], $2;\n\tcp.async.bulk.commit_group;",
        ValueRange{dst, src, constI32(ib, 4 * Dh)}, "l,r,r");
  };
  auto reduceDq = [&](ImplicitLocOpBuilder &ib, Value it) {
    if (!cfg.deterministic) {
      ifReducer(ib, [&] {
        auto [bh, q0] = stepBlock(ib, it);
        reduceRow(ib, bh, q0, tid);
      });
      return;
    }
    // Deterministic: the key blocks that see this query block add their dQ
    // in key-block order. Lane 0 of warp 0 waits until the block's counter
    // says kb - kFirst blocks went before it (they have lower CTA indices, so
    // they were scheduled first); the warp's lanes then add the block's rows,
    // each waits for its own adds, and once the whole warp has (warp
    // barriers, which a divergent lane may join late) lane 0 passes the turn
    // on. Only warp 0 waits on the turn, so the CTA's barriers stay whole.
    OpBuilder::InsertionGuard gw(ib);
    auto ifWarp0 = scf::IfOp::create(
        ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::ult, tid,
                                  constIdx(ib, 32)),
        /*withElse=*/false);
    ib.setInsertionPointToStart(ifWarp0.thenBlock());
    auto [bh, q0] = stepBlock(ib, it);
    Value lock = arith::AddIOp::create(
        ib, lockBase,
        arith::IndexCastOp::create(
            ib, ib.getI64Type(),
            arith::MulIOp::create(
                ib,
                arith::AddIOp::create(
                    ib, arith::MulIOp::create(ib, bh, lqPad),
                    arith::DivUIOp::create(ib, q0, constIdx(ib, Br))),
                constIdx(ib, 4))));
    Value kFirst = zero;
    if (cfg.mask && cfg.mask.keysBehindDiagonal()) {
      Value lo = buildVisibleKeys(ib, ib.getLoc(), cfg.mask, q0, diagOff).lo;
      kFirst = arith::MaxSIOp::create(
          ib, arith::FloorDivSIOp::create(ib, lo, constIdx(ib, Bc)), zero);
    }
    Value turn = arith::IndexCastOp::create(
        ib, ib.getI32Type(),
        arith::SubIOp::create(
            ib, gpu::BlockIdOp::create(ib, gpu::Dimension::x), kFirst));
    Value first = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, tid, zero);
    {
      OpBuilder::InsertionGuard gs(ib);
      auto ifFirst = scf::IfOp::create(ib, first, /*withElse=*/false);
      ib.setInsertionPointToStart(ifFirst.thenBlock());
      auto spin = scf::WhileOp::create(ib, TypeRange{}, ValueRange{});
      Block *before = ib.createBlock(&spin.getBefore());
      ib.setInsertionPointToStart(before);
      Value seen =
          LLVM::InlineAsmOp::create(
              ib, ib.getI32Type(), ValueRange{lock},
              "ld.acquire.gpu.global.b32 $0, [$1];", "=r,l",
              /*has_side_effects=*/true, /*is_align_stack=*/false,
              LLVM::tailcallkind::TailCallKind::None,
              LLVM::AsmDialectAttr::get(ib.getContext(),
                                        LLVM::AsmDialect::AD_ATT),
              ArrayAttr())
              .getResult(0);
      scf::ConditionOp::create(
          ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::ne, seen, turn),
          ValueRange{});
      Block *after = ib.createBlock(&spin.getAfter());
      ib.setInsertionPointToStart(after);
      scf::YieldOp::create(ib, ValueRange{});
    }
    inlinePtx(ib, "bar.warp.sync -1;", {}, "");
    for (int64_t r0 = 0; r0 < Br; r0 += 32)
      reduceRow(ib, bh, q0, arith::AddIOp::create(ib, tid, constIdx(ib, r0)));
    inlinePtx(ib, "cp.async.bulk.wait_group 0;", {}, "");
    inlinePtx(ib, "bar.warp.sync -1;", {}, "");
    auto ifFirst = scf::IfOp::create(ib, first, /*withElse=*/false);
    ib.setInsertionPointToStart(ifFirst.thenBlock());
    inlinePtx(ib,
        "fence.proxy.async.global;\n\tred.release.gpu.global.add.s32 "
        "[$0], 1;",
        ValueRange{lock}, "l");
  };

  auto loop = scf::ForOp::create(
      b, zero, steps, one, init,
      [&](OpBuilder &nb, Location l, Value it, ValueRange acc) {
        ImplicitLocOpBuilder ib(l, nb);
        Value st = arith::RemUIOp::create(ib, it, constIdx(ib, 2));
        // This step's copies are in, and every warp is done with the
        // previous step's buffers (the other Q/dO buffer, dSᵀ).
        NVVM::CpAsyncWaitGroupOp::create(ib, ib.getI32IntegerAttr(0));
        gpu::BarrierOp::create(ib);
        {
          OpBuilder::InsertionGuard gd(ib);
          Value next = arith::AddIOp::create(ib, it, one);
          auto ifNext = scf::IfOp::create(
              ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, next,
                                        steps),
              /*withElse=*/false);
          ib.setInsertionPointToStart(ifNext.thenBlock());
          loadStep(ib, next, arith::SubIOp::create(ib, one, st));
        }
        NVVM::CpAsyncCommitGroupOp::create(ib);
        if (cfg.bulkReduceDq) {
          OpBuilder::InsertionGuard gd(ib);
          auto ifPrev = scf::IfOp::create(
              ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::ugt, it, zero),
              /*withElse=*/false);
          ib.setInsertionPointToStart(ifPrev.thenBlock());
          reduceDq(ib, arith::SubIOp::create(ib, it, one));
        }
        Value bh, q0; // captured below: not a binding
        std::tie(bh, q0) = stepBlock(ib, it);

        // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: rows = the warp's keys (A from the K
        // and V tiles), columns = the block's queries (B = Qᵀ, dOᵀ: the
        // rows as they lie).
        auto transposedScores = [&](Value aTile, Value bTile, int64_t width) {
          SmallVector<Value> s(Br / 2, zf);
          for (int64_t ks = 0; ks < width / 16; ++ks) {
            Value kCol = arith::AddIOp::create(ib, aCol, constIdx(ib, 16 * ks));
            SmallVector<Value, 4> a = ldmatrixX4(
                ib, aTile, ValueRange{arith::AddIOp::create(ib, kw0, aRow), kCol},
                /*transpose=*/false);
            Value bCol =
                arith::AddIOp::create(ib, laneHalf8, constIdx(ib, 16 * ks));
            for (int64_t n16 = 0; n16 < Br / 16; ++n16) {
              Value row =
                  arith::AddIOp::create(ib, atRow, constIdx(ib, 16 * n16));
              SmallVector<Value, 4> bRegs = ldmatrixX4(
                  ib, bTile, ValueRange{st, row, bCol}, /*transpose=*/false);
              mmaSyncPair(ib, elem, a, bRegs, s, n16);
            }
          }
          return s;
        };
        SmallVector<Value> s = transposedScores(kT, qT, D);
        SmallVector<Value> dp = transposedScores(vT, doT, Dv);

        // The statistics of the thread's query columns, as pairs.
        auto pairs = [&](Value tile) {
          SmallVector<Value> xs;
          auto pt = VectorType::get({2}, f32);
          for (int64_t n8 = 0; n8 < Br / 8; ++n8) {
            Value c = arith::AddIOp::create(ib, t2, constIdx(ib, 8 * n8));
            Value x = vector::LoadOp::create(ib, pt, tile, ValueRange{st, c});
            for (int64_t e = 0; e < 2; ++e)
              xs.push_back(
                  vector::ExtractOp::create(ib, x, ArrayRef<int64_t>{e}));
          }
          return xs;
        };
        SmallVector<Value> lseCols = pairs(lseT), deltaCols = pairs(deltaT);
        auto colOf = [](size_t i) { return 2 * (i / 4) + i % 2; };
        SmallVector<Value> batchIdx;
        if (cfg.scoreMod)
          batchIdx = batchIndices(ib, bh, modArgs.batchSizes);

        // Pᵀ and dSᵀ, with the element mask only where the warp's keys
        // cross Lk or a mask edge for this query block.
        Value needsMask = tileNeedsElementMask(
            ib, cfg.mask, arith::AddIOp::create(ib, k0, kw0), 16, q0,
            arith::AddIOp::create(ib, q0, constIdx(ib, Br - 1)), lk, diagOff);
        auto [p, ds] = buildGradFragment(
            ib, cfg, &modArgs, batchIdx, lq, lk, needsMask, s.size(),
            [&](GradFragment &frag, int64_t i) {
              // The step's base plus a constant (GradFragment converts the
              // base to f32 once).
              Value query = arith::AddIOp::create(
                  ib, arith::AddIOp::create(ib, q0, t2),
                  constIdx(ib, AccumulatorLayout::column(i)));
              int64_t h = AccumulatorLayout::rowHalf(i);
              return frag.element(ib, s[i], dp[i], lseCols[colOf(i)],
                                  deltaCols[colOf(i)], keys[h], query, h,
                                  colOf(i));
            });

        // dV += Pᵀ dO and dK += dSᵀ Q: the registers as A fragments, B the
        // block's rows by ldmatrix with transpose.
        SmallVector<Value> dK(acc.take_front(Dh / 2)),
            dV(acc.drop_front(Dh / 2));
        auto accumulate = [&](ArrayRef<Value> aVals, Value bTile,
                              int64_t width, Value col0,
                              SmallVectorImpl<Value> &out) {
          SmallVector<Value> aFrag = packA(ib, aVals, elem);
          for (int64_t kk = 0; kk < Br / 16; ++kk) {
            Value row = arith::AddIOp::create(ib, lane16, constIdx(ib, 16 * kk));
            for (int64_t n16 = 0; n16 < width / 16; ++n16) {
              SmallVector<Value, 4> bRegs = ldmatrixX4(
                  ib, bTile,
                  ValueRange{st, row,
                             arith::AddIOp::create(
                                 ib, col0,
                                 arith::AddIOp::create(
                                     ib, aCol, constIdx(ib, 16 * n16)))},
                  /*transpose=*/true);
              mmaSyncPair(ib, elem, ArrayRef<Value>(aFrag).slice(4 * kk, 4),
                          bRegs, out, n16);
            }
          }
        };
        accumulate(p, doT, Dvh, colDv, dV);
        accumulate(ds, qT, Dh, colD, dK);

        // dSᵀ to shared memory as pairs of the element type, for dQ.
        for (size_t i = 0; i < ds.size(); i += 2) {
          Value row = arith::AddIOp::create(
              ib, kw0,
              arith::AddIOp::create(
                  ib, g, constIdx(ib, 8 * AccumulatorLayout::rowHalf(i))));
          Value col = arith::AddIOp::create(
              ib, t2, constIdx(ib, AccumulatorLayout::column(i)));
          Value pair = arith::TruncFOp::create(
              ib, VectorType::get({2}, elem),
              vector::FromElementsOp::create(ib, VectorType::get({2}, f32),
                                             ValueRange{ds[i], ds[i + 1]}));
          vector::StoreOp::create(ib, pair, dsT, ValueRange{row, col});
        }
        // The previous block's reduction has read the staging tile.
        if (cfg.bulkReduceDq)
          ifReducer(ib, [&] {
            inlinePtx(ib, "cp.async.bulk.wait_group.read 0;", {}, "");
          });
        gpu::BarrierOp::create(ib);

        // dQ += dS K over the block's keys: A = dS from the dSᵀ tile (with
        // transpose), B = K by rows; f32 atomics into the accumulator, whose
        // padding takes the rows past Lq.
        SmallVector<Value> dq(dqCols / 2, zf);
        for (int64_t kk = 0; kk < Bc / 16; ++kk) {
          SmallVector<Value, 4> a = ldmatrixX4(
              ib, dsT,
              ValueRange{arith::AddIOp::create(ib, atRow,
                                               constIdx(ib, 16 * kk)),
                         arith::AddIOp::create(ib, dqRow, atCol)},
              /*transpose=*/true);
          Value row = arith::AddIOp::create(ib, lane16, constIdx(ib, 16 * kk));
          for (int64_t n16 = 0; n16 < dqCols / 16; ++n16) {
            Value col = arith::AddIOp::create(
                ib, arith::AddIOp::create(ib, colD, dqCol0),
                arith::AddIOp::create(ib, aCol, constIdx(ib, 16 * n16)));
            SmallVector<Value, 4> bRegs =
                ldmatrixX4(ib, kT, ValueRange{row, col}, /*transpose=*/true);
            mmaSyncPair(ib, elem, a, bRegs, dq, n16);
          }
        }
        Value rowBase = arith::AddIOp::create(ib, dqRow, g);
        if (!cfg.bulkReduceDq) {
          // f32 atomics straight into the accumulator (sm_80 / sm_89).
          for (size_t i = 0; i < dq.size(); ++i) {
            Value row = arith::AddIOp::create(
                ib, arith::AddIOp::create(ib, q0, rowBase),
                constIdx(ib, 8 * AccumulatorLayout::rowHalf(i)));
            Value col = arith::AddIOp::create(
                ib, arith::AddIOp::create(ib, colD, dqCol0),
                arith::AddIOp::create(
                    ib, t2, constIdx(ib, AccumulatorLayout::column(i))));
            memref::AtomicRMWOp::create(ib, arith::AtomicRMWKind::addf, dq[i],
                                        dqAcc, ValueRange{bh, row, col});
          }
        } else {
          // The block's dQ goes to the staging tile; the next step (or the
          // epilogue) reduces it into the accumulator with one bulk add per
          // row, on the copy engine instead of per-element atomics.
          for (size_t i = 0; i < dq.size(); i += 2) {
            Value row = arith::AddIOp::create(
                ib, rowBase, constIdx(ib, 8 * AccumulatorLayout::rowHalf(i)));
            Value col = arith::AddIOp::create(
                ib, dqCol0,
                arith::AddIOp::create(
                    ib, t2, constIdx(ib, AccumulatorLayout::column(i))));
            Value pair = vector::FromElementsOp::create(
                ib, VectorType::get({2}, f32), ValueRange{dq[i], dq[i + 1]});
            vector::StoreOp::create(ib, pair, dqT, ValueRange{row, col});
          }
          fenceProxyAsyncShared(ib);
        }
        SmallVector<Value> next(dK);
        next.append(dV.begin(), dV.end());
        scf::YieldOp::create(ib, next);
      });

  // The last block's dQ, and every bulk reduction done before the CTA ends.
  if (cfg.bulkReduceDq) {
    gpu::BarrierOp::create(b);
    OpBuilder::InsertionGuard gd(b);
    auto ifAny = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, steps, zero),
        /*withElse=*/false);
    b.setInsertionPointToStart(ifAny.thenBlock());
    reduceDq(b, arith::SubIOp::create(b, steps, one));
    b.setInsertionPointAfter(ifAny);
    ifReducer(b, [&] { inlinePtx(b, "cp.async.bulk.wait_group 0;", {}, ""); });
  }

  // Epilogue: the warp's keys that exist; dK takes the scale of the
  // scores' chain rule.
  ValueRange fin = loop.getResults();
  Value scaleV = constF32(b, cfg.scale);
  for (int64_t h = 0; h < 2; ++h) {
    auto ifKey = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, keys[h], lk),
        /*withElse=*/false);
    OpBuilder::InsertionGuard gd(b);
    b.setInsertionPointToStart(ifKey.thenBlock());
    auto store = [&](ValueRange frag, int64_t width, Value col0, Value dst,
                     bool scaled) {
      for (int64_t n8 = 0; n8 < width / 8; ++n8) {
        int64_t c = 8 * n8;
        Value lo = frag[AccumulatorLayout::element(c, h)];
        Value hi = frag[AccumulatorLayout::element(c, h) + 1];
        if (scaled) {
          lo = arith::MulFOp::create(b, lo, scaleV);
          hi = arith::MulFOp::create(b, hi, scaleV);
        }
        Value pair = vector::FromElementsOp::create(
            b, VectorType::get({2}, elem),
            ValueRange{arith::TruncFOp::create(b, elem, lo),
                       arith::TruncFOp::create(b, elem, hi)});
        vector::StoreOp::create(
            b, pair, dst,
            ValueRange{kvbh, keys[h],
                       arith::AddIOp::create(
                           b, col0, arith::AddIOp::create(b, t2, constIdx(b, c)))});
      }
    };
    store(fin.take_front(Dh / 2), Dh, colD, dk, /*scaled=*/true);
    store(fin.drop_front(Dh / 2), Dvh, colDv, dv, /*scaled=*/false);
  }
  gpu::ReturnOp::create(b);
  return fn;
}
