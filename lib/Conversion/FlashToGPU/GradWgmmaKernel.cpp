//===- GradWgmmaKernel.cpp - flash.attention_grad on sm_90a: TMA and wgmma -===//
//
// The backward of the tile program on Hopper, as the mma.sync kernel
// transposes it (a CTA owns a block of keys of one K/V head and walks the
// query blocks of every query head of its group, so dK and dV accumulate in
// registers and a grouped-query gradient needs no second pass), staged the
// way the forward's wgmma kernel stages its tiles:
//
//   warpgroup 0   one thread: the K/V block once, then per step Q and dO by
//                 TMA and the block's lse·log2 e and delta by bulk copies,
//                 into a ring of two slots (full / empty mbarriers)
//   warpgroups    64 keys each; per step, with the keys as wgmma rows:
//   1 and 2         Sᵀ = K Qᵀ, dPᵀ = V dOᵀ         (both from shared memory)
//                   Pᵀ = 2^(Sᵀ·scale·log2 e − lse), dSᵀ = Pᵀ ∘ (dPᵀ − delta)
//                   dV += Pᵀ dO, dK += dSᵀ Q        (P, dS from registers)
//                   dSᵀ to shared memory; both warpgroups meet
//                   dQ = dS K                       (A = dSᵀ transposed)
//                 each warpgroup owns half of the block's dQ (half of the
//                 columns at D = 128, half of the 128 rows at D = 64), staged
//                 in shared memory and added to the f32 accumulator by one
//                 cp.reduce.async.bulk per row, on the copy engine.
//
// Rows past Lq are TMA's zeros with lse·log2 e = +inf (GradRowKernels.cpp),
// so their P is 0 without a test, and land in the accumulator's padding;
// keys past Lk and the causal / window edges take the tile program's
// element mask only in the tiles that cross them.
//
//===----------------------------------------------------------------------===//
#include "HopperPrimitives.h"
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
/// f32 padding of a dQ staging row: a warp's 8-byte fragment stores then
/// take two conflict-free wavefronts.
constexpr int64_t kStagePad = 8;

/// Which part of a query block's dQ a consumer warpgroup computes: 64 rows
/// (the wgmma M) by `cols` columns, at (rowBlock · 64, colBlock · cols).
struct DqShare {
  int64_t cols;
  bool splitRows; // the warpgroups take different rows (else columns)
  explicit DqShare(const GradKernelConfig &c)
      : cols(c.blockQueries == 128 ? c.d : c.d / 2),
        splitRows(c.blockQueries == 128) {}
};

/// Byte offsets of the kernel's shared memory from its 1024-aligned base.
/// Tiles are 64-column panels of 128-byte rows, the 128-byte swizzle that
/// TMA writes and wgmma reads.
struct GradWgmmaSmem {
  int64_t k, v, q, qStage, dO, doStage, ds, dsStage, lse, delta, rowStage,
      dq, dqWarpgroup, bars, total;
  explicit GradWgmmaSmem(const GradKernelConfig &c) {
    int64_t bc = c.blockKeys, br = c.blockQueries;
    k = 0;
    v = k + bc * c.d * 2;
    q = v + bc * c.dv * 2;
    qStage = br * c.d * 2;
    dO = q + 2 * qStage;
    doStage = br * c.dv * 2;
    ds = dO + 2 * doStage;
    dsStage = bc * br * 2;
    lse = ds + 2 * dsStage;
    rowStage = br * 4;
    delta = lse + 2 * rowStage;
    dq = delta + 2 * rowStage;
    dqWarpgroup = kGradWgKeys * (DqShare(c).cols + kStagePad) * 4;
    bars = dq + 2 * dqWarpgroup;
    // kvFull, qFull[2], qEmpty[2]; 1 KiB of slack to align the base.
    total = bars + 5 * 8 + 1024;
  }
  int64_t kvFull() const { return bars; }
  int64_t qFull(int64_t s) const { return bars + 8 + 8 * s; }
  int64_t qEmpty(int64_t s) const { return bars + 24 + 8 * s; }
};
} // namespace

int64_t gpu_lowering::gradWgmmaSmemBytes(const GradKernelConfig &cfg) {
  return GradWgmmaSmem(cfg).total;
}

static Value add(ImplicitLocOpBuilder &b, Value x, Value y) {
  return arith::AddIOp::create(b, x, y);
}
static Value mul(ImplicitLocOpBuilder &b, Value x, int64_t c) {
  return arith::MulIOp::create(b, x, constIdx(b, c));
}
/// `v` through an empty asm statement: LLVM cannot hoist what is computed
/// from it out of the loop it sits in. The descriptors of every k16 step are
/// loop-invariant, and hoisted they would hold dozens of 64-bit registers
/// for the whole walk; recomputed, each is one add before its wgmma.
static Value opaque(ImplicitLocOpBuilder &b, Value v) {
  StringRef constraints =
      v.getType().getIntOrFloatBitWidth() == 64 ? "=l,0" : "=r,0";
  return LLVM::InlineAsmOp::create(
             b, v.getType(), ValueRange{v}, "", constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             ArrayAttr())
      .getResult(0);
}
/// An index through `opaque`: the addresses computed from it inside the
/// loop stay there, instead of being hoisted as registers held across it.
static Value loopLocal(ImplicitLocOpBuilder &b, Value idx) {
  return arith::IndexCastOp::create(b, b.getIndexType(),
                                    opaque(b, toI64(b, idx)));
}
static WgmmaDesc opaque(ImplicitLocOpBuilder &b, const WgmmaDesc &d) {
  return {opaque(b, d.lo), d.hi};
}
/// `desc` `bytes` (an index, a multiple of 16) further on.
static WgmmaDesc descPlus(ImplicitLocOpBuilder &b, const WgmmaDesc &desc,
                          Value bytes) {
  return desc.plusUnits(
      b, toI32(b, arith::DivUIOp::create(b, bytes, constIdx(b, 16))));
}
/// Element `i` of the thread's fragment (query column 8·(i/4) + i%2, key
/// row half (i%4)/2) of each staged capture, indexed by capture (null where
/// not staged). `boxAt(c, off, thread)` is the address of byte `off` plus
/// the thread's offset in c's box for the element's 64 query rows. A 16-bit
/// box loads 16 query columns of both key halves at once (elements 8m to
/// 8m + 7, one ldmatrix.x4.trans kept in `ldm`), a byte box one element.
static SmallVector<Value> stagedElements(
    ImplicitLocOpBuilder &b, const GradKernelConfig &cfg, int64_t i,
    function_ref<Value(const GradStagedCapture &, int64_t, Value)> boxAt,
    Value ldmOffset, const Value byteOffset[2],
    SmallVector<SmallVector<Value, 4>> &ldm) {
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> out(cfg.captureHasGrad.size()); // one per capture
  int64_t n8 = i / 4, e = i % 4, h = e / 2;
  int64_t row = 8 * (n8 % 8); // the 8 queries' first row in their box
  for (auto [s, c] : llvm::enumerate(cfg.staged)) {
    // The kernel's score_mod arguments begin with the captures' memrefs.
    Type elt =
        cast<MemRefType>(cfg.scoreModArgTypes[c.read.capture]).getElementType();
    Value x;
    if (c.read.elementBytes == 2) {
      if (i % 8 == 0) {
        Type i32 = b.getI32Type();
        Value m = NVVM::LdMatrixOp::create(
            b, LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32}),
            boxAt(c, row * 128, ldmOffset), 4, NVVM::MMALayout::col,
            NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
            NVVM::LdStMatrixEltType::B16);
        ldm[s].clear();
        for (int64_t r = 0; r < 4; ++r)
          ldm[s].push_back(LLVM::ExtractValueOp::create(b, m, r));
      }
      Value pair = LLVM::BitcastOp::create(b, VectorType::get({2}, elt),
                                           ldm[s][2 * ((i % 8) / 4) + h]);
      x = LLVM::ExtractElementOp::create(b, pair, constI32(b, e % 2));
    } else {
      x = LLVM::LoadOp::create(b, b.getI8Type(),
                               boxAt(c, (row + e % 2) * 64, byteOffset[h]),
                               /*alignment=*/1);
      if (elt.isInteger(1))
        x = arith::TruncIOp::create(b, elt, x);
      else if (elt != x.getType())
        x = arith::BitcastOp::create(b, elt, x);
    }
    out[c.read.capture] = x;
  }
  return out;
}

gpu::GPUFuncOp gpu_lowering::buildGradWgmmaKernel(OpBuilder &ob, Location loc,
                                                  gpu::GPUModuleOp module,
                                                  const GradKernelConfig &cfg) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  const Type elem = cfg.elem;
  const int64_t D = cfg.d, Dv = cfg.dv, Bc = cfg.blockKeys,
                Br = cfg.blockQueries;
  const GradWgmmaSmem L(cfg);
  const DqShare share(cfg);

  declareSwizzledSmem(b);
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> argTypes(9, ptrTy);
  argTypes.append(5, b.getIndexType());
  argTypes.append(cfg.scoreModArgTypes.begin(), cfg.scoreModArgTypes.end());
  argTypes.append(cfg.staged.size(), ptrTy);
  auto fn = gpu::GPUFuncOp::create(b, "kernel",
                                   FunctionType::get(ctx, argTypes, {}));
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  const int32_t threads = static_cast<int32_t>(cfg.threads());
  // The register cap at entry that lets setmaxnreg move registers from the
  // producer to the consumers (one CTA per SM).
  fn->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({threads, 1, 1}));
  fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value tmaQ = entry.getArgument(0), tmaK = entry.getArgument(1),
        tmaV = entry.getArgument(2), tmaDO = entry.getArgument(3),
        lse2 = entry.getArgument(4), delta = entry.getArgument(5),
        dqAcc = entry.getArgument(6), dkPtr = entry.getArgument(7),
        dvPtr = entry.getArgument(8), lq = entry.getArgument(9),
        lk = entry.getArgument(10), lqPad = entry.getArgument(11),
        group = entry.getArgument(12), kvbhCount = entry.getArgument(13);
  GradScoreModArgs modArgs = gradScoreModArgs(entry, cfg);
  ValueRange stagedMaps = entry.getArguments().take_back(cfg.staged.size());

  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value kvbh = batchHeadBlock(b, kvbhCount);
  Value k0 = mul(b, gpu::BlockIdOp::create(b, gpu::Dimension::x), Bc);
  // Plain variables, not a structured binding: lambdas below capture them.
  Value qBegin, qEnd;
  std::tie(qBegin, qEnd) =
      visibleQueryBlockRange(b, cfg.mask, k0, Bc, lq, lk, Br);
  Value nQ = arith::SubIOp::create(b, qEnd, qBegin);
  Value steps = arith::MulIOp::create(b, nQ, group);
  Value diagOff = maskDiagonalOffset(b, cfg.mask, lq, lk);

  Value tiles = swizzledSmemBase(b);
  auto at = [&](ImplicitLocOpBuilder &ib, int64_t off, Value dyn = Value()) {
    Value p = smemOffset(ib, tiles, off);
    return dyn ? smemOffset(ib, p, toI64(ib, dyn)) : p;
  };

  // Step `it` of the walk: query head `it / nQ` of the group, query block
  // qBegin + it % nQ.
  auto stepBlock = [&](ImplicitLocOpBuilder &ib, Value it) {
    Value bh = add(ib, arith::MulIOp::create(ib, kvbh, group),
                   arith::DivUIOp::create(ib, it, nQ));
    Value qb = add(ib, qBegin, arith::RemUIOp::create(ib, it, nQ));
    return std::make_pair(bh, mul(ib, qb, Br));
  };
  auto slot = [&](ImplicitLocOpBuilder &ib, Value it) {
    return std::make_pair(
        arith::RemUIOp::create(ib, it, constIdx(ib, 2)).getResult(),
        toI32(ib, arith::RemUIOp::create(
                      ib, arith::DivUIOp::create(ib, it, constIdx(ib, 2)),
                      constIdx(ib, 2))));
  };
  // A staged capture's box for consumer warpgroup `wgc` and the 64 query
  // rows `qh` of a step: in the rows of the slot's dSᵀ panel `qh` that
  // warpgroup writes (the 128-byte rows of its 64 keys).
  auto stagedBox = [&](const GradStagedCapture &c, int64_t qh) {
    return L.ds + qh * Bc * 128 + c.offset;
  };
  int64_t stagedBytes = 0;
  for (const GradStagedCapture &c : cfg.staged)
    stagedBytes += Br * Bc * c.read.elementBytes;
  auto globalAt = [&](ImplicitLocOpBuilder &ib, Value ptr, Type t, Value idx) {
    return LLVM::GEPOp::create(ib, ptrTy, t, ptr, ValueRange{toI64(ib, idx)})
        .getResult();
  };

  Value isT0 = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, zero);
  {
    OpBuilder::InsertionGuard g(b);
    auto ifInit = scf::IfOp::create(b, isT0, /*withElse=*/false);
    b.setInsertionPointToStart(ifInit.thenBlock());
    mbarInit(b, at(b, L.kvFull()), 1);
    for (int64_t s = 0; s < 2; ++s) {
      mbarInit(b, at(b, L.qFull(s)), 1);
      // One arrival per consumer thread: each thread's own reads of the
      // slot (the statistics, by ordinary loads) then happen before the
      // producer's next fill, which one arrival per warp would not promise.
      mbarInit(b, at(b, L.qEmpty(s)), 256);
    }
  }
  gpu::BarrierOp::create(b);

  Value wg = uniformWarpgroupIndex(b, tid);
  auto roles = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, wg, zero),
      /*withElse=*/true);

  //===-- Producer ---------------------------------------------------------===//
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.thenBlock());
    NVVM::SetMaxRegisterOp::create(b, 24, NVVM::SetMaxRegisterAction::decrease);
    auto ifT0 = scf::IfOp::create(b, isT0, /*withElse=*/false);
    b.setInsertionPointToStart(ifT0.thenBlock());
    // Coordinates innermost first: (column, row, batch·head).
    auto coords = [&](ImplicitLocOpBuilder &ib, int64_t col, Value row,
                      Value bh) {
      return SmallVector<Value, 3>{constI32(ib, col), toI32(ib, row),
                                   toI32(ib, bh)};
    };
    Value kvFull = at(b, L.kvFull());
    mbarArriveExpectTx(b, kvFull, Bc * (D + Dv) * 2);
    for (int64_t p = 0; p < D / 64; ++p)
      tmaLoad(b, at(b, L.k + p * Bc * 128), tmaK, coords(b, 64 * p, k0, kvbh),
              kvFull);
    for (int64_t p = 0; p < Dv / 64; ++p)
      tmaLoad(b, at(b, L.v + p * Bc * 128), tmaV, coords(b, 64 * p, k0, kvbh),
              kvFull);

    auto loop = scf::ForOp::create(b, zero, steps, one);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getInductionVar();
    auto [st, parity] = slot(b, it);
    Value full = at(b, L.qFull(0), mul(b, st, 8));
    {
      // Slot reuse: the consumers released the fill of step it - 2.
      OpBuilder::InsertionGuard g2(b);
      auto ifReuse = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::uge, it,
                                   constIdx(b, 2)),
          /*withElse=*/false);
      b.setInsertionPointToStart(ifReuse.thenBlock());
      mbarWait(b, at(b, L.qEmpty(0), mul(b, st, 8)),
               arith::XOrIOp::create(b, parity, constI32(b, 1)));
    }
    mbarArriveExpectTx(b, full,
                       L.qStage + L.doStage + 2 * L.rowStage + stagedBytes);
    auto [bh, q0] = stepBlock(b, it);
    for (int64_t p = 0; p < D / 64; ++p)
      tmaLoad(b, at(b, L.q + p * Br * 128, mul(b, st, L.qStage)), tmaQ,
              coords(b, 64 * p, q0, bh), full);
    for (int64_t p = 0; p < Dv / 64; ++p)
      tmaLoad(b, at(b, L.dO + p * Br * 128, mul(b, st, L.doStage)), tmaDO,
              coords(b, 64 * p, q0, bh), full);
    // The block's row statistics: contiguous, 16-byte aligned (the rows are
    // padded to whole blocks), one bulk copy each.
    Value row = add(b, arith::MulIOp::create(b, bh, lqPad), q0);
    for (auto [src, off] : {std::make_pair(lse2, L.lse),
                            std::make_pair(delta, L.delta)})
      inlinePtx(b,
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
                "bytes [$0], [$1], $2, [$3];",
                ValueRange{sharedAddress32(
                               b, at(b, off, mul(b, st, L.rowStage))),
                           globalAt(b, src, b.getF32Type(), row),
                           constI32(b, L.rowStage), sharedAddress32(b, full)},
                "r,l,r,r");
    // Staged captures: per consumer warpgroup and 64 query rows, the box of
    // its keys; coordinates innermost first (key, query, leading indices).
    SmallVector<Value> batchIdx;
    if (!cfg.staged.empty())
      batchIdx = batchIndices(b, bh, modArgs.batchSizes);
    for (auto [c, map] : llvm::zip(cfg.staged, stagedMaps)) {
      SmallVector<Value> lead;
      for (auto [dim, k] : llvm::zip(c.read.leadBatchDim, c.read.leadConstant))
        lead.push_back(toI32(b, dim >= 0 ? batchIdx[dim] : constIdx(b, k)));
      for (int64_t wgc = 0; wgc < Bc / kGradWgKeys; ++wgc)
        for (int64_t qh = 0; qh < Br / kGradWgKeys; ++qh) {
          SmallVector<Value> coords = {
              toI32(b, add(b, k0, constIdx(b, wgc * kGradWgKeys))),
              toI32(b, add(b, q0, constIdx(b, qh * kGradWgKeys)))};
          coords.append(lead.rbegin(), lead.rend());
          tmaLoad(b,
                  at(b, stagedBox(c, qh) + wgc * kGradWgKeys * 128,
                     mul(b, st, L.dsStage)),
                  map, coords, full);
        }
    }
  }

  //===-- Consumers --------------------------------------------------------===//
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(roles.elseBlock());
  NVVM::SetMaxRegisterOp::create(b, 240, NVVM::SetMaxRegisterAction::increase);
  Type f32 = b.getF32Type();
  Value c = arith::SubIOp::create(b, wg, one);
  Value ctid = arith::RemUIOp::create(b, tid, constIdx(b, 128));
  Value warp = arith::DivUIOp::create(b, ctid, constIdx(b, 32));
  Value lane = arith::RemUIOp::create(b, tid, constIdx(b, 32));
  Value quad = arith::DivUIOp::create(b, lane, constIdx(b, 4));
  Value laneCol = mul(b, arith::RemUIOp::create(b, lane, constIdx(b, 4)), 2);
  // This thread's two accumulator rows within the warpgroup's 64.
  Value wgRow[2];
  wgRow[0] = add(b, mul(b, warp, 16), quad);
  wgRow[1] = add(b, wgRow[0], constIdx(b, 8));
  Value wgKey0 = add(b, k0, mul(b, c, kGradWgKeys));
  Value keys[2] = {add(b, wgKey0, wgRow[0]), add(b, wgKey0, wgRow[1])};

  // Descriptors. K-major operands (K, V as A of Sᵀ / dPᵀ; Q, dO as their B)
  // advance 32 B per k16 inside a panel, panels rows·128 B apart; MN-major
  // operands (dO, Q as B of dV / dK; dSᵀ as A and K as B of dQ) advance 16
  // rows (2 KiB) per k16, their panels rows·128 B apart.
  WgmmaDesc kA = descPlus(b, wgmmaDescriptor(b, at(b, L.k), Bc * 128, 1024),
                          mul(b, c, kGradWgKeys * 128));
  WgmmaDesc vA = descPlus(b, wgmmaDescriptor(b, at(b, L.v), Bc * 128, 1024),
                          mul(b, c, kGradWgKeys * 128));
  WgmmaDesc qDesc = wgmmaDescriptor(b, at(b, L.q), Br * 128, 1024);
  WgmmaDesc doDesc = wgmmaDescriptor(b, at(b, L.dO), Br * 128, 1024);
  WgmmaDesc dsDesc = wgmmaDescriptor(b, at(b, L.ds), Bc * 128, 1024);
  WgmmaDesc kB = wgmmaDescriptor(b, at(b, L.k), Bc * 128, 1024);
  // This warpgroup's share of dQ: rows dqRow0 + [0, 64) of the block,
  // columns dqCol0 + [0, share.cols).
  Value dqRow0 = share.splitRows ? mul(b, c, 64) : zero;
  Value dqCol0 = share.splitRows ? zero : mul(b, c, share.cols);
  if (share.splitRows)
    dsDesc = descPlus(b, dsDesc, mul(b, c, Bc * 128)); // the rows' panel
  else
    kB = descPlus(b, kB, mul(b, c, (share.cols / 64) * Bc * 128));
  Value dqIssuer =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ult, ctid, constIdx(b, 64));
  // The thread's byte offsets in a staged box (rows = 64 queries, columns =
  // the warpgroup's 64 keys), once per thread. 16-bit elements: ldmatrix
  // .trans gives a thread the pairs of queries (2·(lane%4), +1) of key
  // lane/4 of an 8x8 block, the accumulator's own; lane l addresses row
  // l%8 of block l/8 = (row half of the keys, +8 queries), at 16-byte
  // chunk (2·warp + half) ^ (row % 8) under the 128-byte swizzle. Bytes:
  // the thread's key of each row half at query row 2·(lane%4), whose
  // 16-byte chunk the 64-byte swizzle XORs with (row / 2) % 4 = lane % 4.
  Value stagedLdm, stagedByte[2];
  if (!cfg.staged.empty()) {
    Value l8 = arith::RemUIOp::create(b, lane, constIdx(b, 8));
    Value blk = arith::DivUIOp::create(b, lane, constIdx(b, 8));
    Value blkHalf = arith::RemUIOp::create(b, blk, constIdx(b, 2));
    Value blkQuery = arith::DivUIOp::create(b, blk, constIdx(b, 2));
    Value chunk =
        arith::XOrIOp::create(b, add(b, mul(b, warp, 2), blkHalf), l8);
    stagedLdm =
        add(b, mul(b, add(b, mul(b, blkQuery, 8), l8), 128), mul(b, chunk, 16));
    Value lane4 = arith::RemUIOp::create(b, lane, constIdx(b, 4));
    Value keyChunk = arith::XOrIOp::create(b, warp, lane4);
    for (int64_t h = 0; h < 2; ++h)
      stagedByte[h] =
          add(b, add(b, mul(b, lane4, 2 * 64), mul(b, keyChunk, 16)),
              add(b, quad, constIdx(b, 8 * h)));
  }
  Value stage = at(b, L.dq, mul(b, c, L.dqWarpgroup));

  mbarWait(b, at(b, L.kvFull()), constI32(b, 0));

  auto dkType = accType(ctx, D), dvType = accType(ctx, Dv),
       sType = accType(ctx, Br), dqType = accType(ctx, share.cols);
  auto loop = scf::ForOp::create(
      b, zero, steps, one,
      ValueRange{LLVM::ZeroOp::create(b, dkType), LLVM::ZeroOp::create(b, dvType)});
  {
    OpBuilder::InsertionGuard gl(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getInductionVar();
    Value dK = loop.getRegionIterArgs()[0], dV = loop.getRegionIterArgs()[1];
    Value st, parity; // captured below: not a binding
    std::tie(st, parity) = slot(b, it);
    // The thread's place, opaque per step (loopLocal).
    Value laneColL = loopLocal(b, laneCol), quadL = loopLocal(b, quad);
    Value wgRowL[2] = {loopLocal(b, wgRow[0]), loopLocal(b, wgRow[1])};
    Value bh, q0; // captured below: not a binding
    std::tie(bh, q0) = stepBlock(b, it);
    mbarWait(b, at(b, L.qFull(0), mul(b, st, 8)), parity);
    WgmmaDesc qSt = descPlus(b, opaque(b, qDesc), mul(b, st, L.qStage));
    WgmmaDesc doSt = descPlus(b, opaque(b, doDesc), mul(b, st, L.doStage));

    // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ over D and Dv.
    wgmmaFence(b);
    auto scores = [&](const WgmmaDesc &a, const WgmmaDesc &bDesc,
                      int64_t width) {
      Value acc = LLVM::UndefOp::create(b, sType);
      for (int64_t kk = 0; kk < width / 16; ++kk) {
        int64_t p = kk / 4, w = kk % 4;
        WgmmaDesc ak = a.plus(b, p * Bc * 128 + 32 * w);
        WgmmaDesc bk = bDesc.plus(b, p * Br * 128 + 32 * w);
        acc = wgmmaSS(b, acc, ak, bk, Br, elem, /*accumulate=*/kk > 0);
      }
      return acc;
    };
    Value sAcc = scores(opaque(b, kA), qSt, D);
    Value dpAcc = scores(opaque(b, vA), doSt, Dv);
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    sAcc = fenceRegisters(b, sAcc);
    dpAcc = fenceRegisters(b, dpAcc);

    // The statistics of the thread's query columns, as pairs from shared
    // memory.
    auto colPair = [&](int64_t off, int64_t n8) {
      Value col = add(b, laneColL, constIdx(b, 8 * n8));
      Value p = at(b, off, add(b, mul(b, st, L.rowStage), mul(b, col, 4)));
      Value v = LLVM::LoadOp::create(b, VectorType::get({2}, f32), p,
                                     /*alignment=*/8);
      return std::make_pair(
          vector::ExtractOp::create(b, v, ArrayRef<int64_t>{0}).getResult(),
          vector::ExtractOp::create(b, v, ArrayRef<int64_t>{1}).getResult());
    };
    // Pᵀ and dSᵀ, with the element mask only where the warpgroup's keys
    // cross Lk or a mask edge of this query block. The statistics are read
    // per 8 columns where they are used, not held for the whole tile.
    SmallVector<Value> batchIdx;
    if (cfg.scoreMod)
      batchIdx = batchIndices(b, bh, modArgs.batchSizes);
    const int64_t n = Br / 2;
    Value needsMask =
        tileNeedsElementMask(b, cfg.mask, wgKey0, kGradWgKeys, q0,
                             add(b, q0, constIdx(b, Br - 1)), lk, diagOff);
    // A staged box holds TMA's zeros past Lq where the buffer's reads are
    // clamped to the last row: a block that crosses Lq reads the buffer.
    if (!cfg.staged.empty())
      needsMask = arith::OrIOp::create(
          b, needsMask,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sgt,
                                add(b, q0, constIdx(b, Br)), lq));
    // This warpgroup's staging area in slot `st`.
    Value area = add(b, mul(b, st, L.dsStage), mul(b, c, kGradWgKeys * 128));
    SmallVector<SmallVector<Value, 4>> ldm(cfg.staged.size());
    std::pair<Value, Value> lsePair, deltaPair;
    auto [p, ds] = buildGradFragment(
        b, cfg, &modArgs, batchIdx, lq, lk, needsMask, n,
        [&](GradFragment &frag, int64_t i) {
          int64_t n8 = i / 4, e = i % 4;
          if (e == 0) {
            lsePair = colPair(L.lse, n8);
            deltaPair = colPair(L.delta, n8);
          }
          SmallVector<Value> staged;
          if (!frag.isMasked() && !cfg.staged.empty())
            staged = stagedElements(
                b, cfg, i,
                [&](const GradStagedCapture &sc, int64_t off, Value thread) {
                  return at(b, stagedBox(sc, n8 / 8) + off,
                            add(b, area, thread));
                },
                stagedLdm, stagedByte, ldm);
          int64_t h = AccumulatorLayout::rowHalf(i);
          // The step's base plus a constant (GradFragment converts the
          // base to f32 once).
          Value query = add(b, add(b, q0, laneColL),
                            constIdx(b, AccumulatorLayout::column(i)));
          return frag.element(b, LLVM::ExtractValueOp::create(b, sAcc, i),
                              LLVM::ExtractValueOp::create(b, dpAcc, i),
                              e % 2 ? lsePair.second : lsePair.first,
                              e % 2 ? deltaPair.second : deltaPair.first,
                              keys[h], query, h, 2 * n8 + e % 2, staged);
        });

    // dV += Pᵀ dO and dK += dSᵀ Q: the registers as A, B MN-major.
    SmallVector<Value> pA = packA(b, p, elem), dsA = packA(b, ds, elem);
    wgmmaFence(b);
    for (int64_t kb = 0; kb < Br / 16; ++kb) {
      dV = wgmmaRS(b, dV, ArrayRef<Value>(pA).slice(4 * kb, 4),
                   doSt.plus(b, kb * 16 * 128), Dv, elem);
      dK = wgmmaRS(b, dK, ArrayRef<Value>(dsA).slice(4 * kb, 4),
                   qSt.plus(b, kb * 16 * 128), D, elem);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    // The warpgroup's staged boxes are read (into P and dS): its dSᵀ may
    // overwrite them.
    if (!cfg.staged.empty())
      NVVM::BarrierOp::create(b, Type(), toI32(b, add(b, c, constIdx(b, 2))),
                              constI32(b, 128), NVVM::BarrierReductionAttr(),
                              Value());

    // dSᵀ into slot `st` of its tile, as the 128-byte swizzle lays it out:
    // the 16-byte chunk j of row r sits at chunk j ^ (r % 8).
    Value dsRow[2] = {add(b, mul(b, c, kGradWgKeys), wgRowL[0]),
                      add(b, mul(b, c, kGradWgKeys), wgRowL[1])};
    for (int64_t n8 = 0; n8 < Br / 8; ++n8)
      for (int64_t h = 0; h < 2; ++h) {
        int64_t i = 4 * n8 + 2 * h;
        Value chunk = arith::XOrIOp::create(b, constIdx(b, n8 % 8), quadL);
        Value byte = add(
            b, mul(b, st, L.dsStage),
            add(b, constIdx(b, (n8 / 8) * Bc * 128),
                add(b, mul(b, dsRow[h], 128),
                    add(b, mul(b, chunk, 16), mul(b, laneColL, 2)))));
        // The pair (i, i + 1) is packed already: A register i / 2.
        LLVM::StoreOp::create(b, dsA[i / 2], at(b, L.ds, byte),
                              /*alignment=*/4);
      }
    {
      // The previous step's reductions have read this warpgroup's staging
      // tile (the barriers below order that before its next writes).
      OpBuilder::InsertionGuard gi(b);
      auto ifIssuer = scf::IfOp::create(b, dqIssuer, /*withElse=*/false);
      b.setInsertionPointToStart(ifIssuer.thenBlock());
      inlinePtx(b, "cp.async.bulk.wait_group.read 0;", {}, "");
    }
    fenceProxyAsyncShared(b);
    // Both consumer warpgroups' dSᵀ are in (named barrier 1). Slot `st` is
    // not written again before both have passed the next step's barrier,
    // by which time their dQ of this step has completed.
    NVVM::BarrierOp::create(b, Type(), constI32(b, 1), constI32(b, 256),
                            NVVM::BarrierReductionAttr(), Value());

    // dQ = dS K: A = dSᵀ read transposed, B = K MN-major.
    wgmmaFence(b);
    Value dqAccum = LLVM::UndefOp::create(b, dqType);
    WgmmaDesc dsSt = descPlus(b, opaque(b, dsDesc), mul(b, st, L.dsStage));
    WgmmaDesc kBi = opaque(b, kB);
    for (int64_t kb = 0; kb < Bc / 16; ++kb) {
      WgmmaDesc a = dsSt.plus(b, kb * 16 * 128);
      WgmmaDesc bk = kBi.plus(b, kb * 16 * 128);
      dqAccum = wgmmaSS(b, dqAccum, a, bk, share.cols, elem,
                        /*accumulate=*/kb > 0, /*transA=*/true,
                        /*transB=*/true);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    dqAccum = fenceRegisters(b, dqAccum);
    dK = fenceRegisters(b, dK);
    dV = fenceRegisters(b, dV);
    // Q, dO and the statistics of slot `st` are read: release it.
    mbarArrive(b, at(b, L.qEmpty(0), mul(b, st, 8)));

    // The share of dQ to the staging tile, then one bulk add per row into
    // the accumulator (rows past Lq land in its padding).
    const int64_t stageRow = share.cols + kStagePad;
    for (int64_t n8 = 0; n8 < share.cols / 8; ++n8)
      for (int64_t h = 0; h < 2; ++h) {
        int64_t i = 4 * n8 + 2 * h;
        Value off = add(b, mul(b, wgRowL[h], stageRow),
                        add(b, laneColL, constIdx(b, 8 * n8)));
        Value pair = vector::FromElementsOp::create(
            b, VectorType::get({2}, f32),
            ValueRange{LLVM::ExtractValueOp::create(b, dqAccum, i),
                       LLVM::ExtractValueOp::create(b, dqAccum, i + 1)});
        LLVM::StoreOp::create(b, pair, smemOffset(b, stage, toI64(b, mul(b, off, 4))),
                              /*alignment=*/8);
      }
    fenceProxyAsyncShared(b);
    NVVM::BarrierOp::create(b, Type(), toI32(b, add(b, c, constIdx(b, 2))),
                            constI32(b, 128), NVVM::BarrierReductionAttr(),
                            Value());
    {
      OpBuilder::InsertionGuard gi(b);
      auto ifIssuer = scf::IfOp::create(b, dqIssuer, /*withElse=*/false);
      b.setInsertionPointToStart(ifIssuer.thenBlock());
      Value grow = add(b, arith::MulIOp::create(b, bh, lqPad),
                       add(b, q0, add(b, dqRow0, ctid)));
      Value dst = globalAt(b, dqAcc, f32,
                           add(b, mul(b, grow, D), dqCol0));
      Value src = sharedAddress32(
          b, smemOffset(b, stage, toI64(b, mul(b, ctid, 4 * stageRow))));
      inlinePtx(b,
                "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 "
                "[$0], [$1], $2;\n\tcp.async.bulk.commit_group;",
                ValueRange{dst, src, constI32(b, 4 * share.cols)}, "l,r,r");
    }
    scf::YieldOp::create(b, ValueRange{dK, dV});
  }
  {
    // Every bulk reduction done before the CTA ends.
    OpBuilder::InsertionGuard gi(b);
    auto ifIssuer = scf::IfOp::create(b, dqIssuer, /*withElse=*/false);
    b.setInsertionPointToStart(ifIssuer.thenBlock());
    inlinePtx(b, "cp.async.bulk.wait_group 0;", {}, "");
  }

  // Epilogue: the keys that exist, straight from registers; dK takes the
  // scale of the scores' chain rule.
  Value dK = loop.getResult(0), dV = loop.getResult(1);
  Value scaleV = constF32(b, cfg.scale);
  auto pairTy = VectorType::get({2}, elem);
  for (int64_t h = 0; h < 2; ++h) {
    OpBuilder::InsertionGuard ge(b);
    auto ifKey = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, keys[h], lk),
        /*withElse=*/false);
    b.setInsertionPointToStart(ifKey.thenBlock());
    Value row = add(b, arith::MulIOp::create(b, kvbh, lk), keys[h]);
    auto store = [&](Value acc, int64_t width, Value dst, bool scaled) {
      for (int64_t col = 0; col < width; col += 8) {
        int64_t e = AccumulatorLayout::element(col, h);
        Value x[2];
        for (int64_t j = 0; j < 2; ++j) {
          x[j] = LLVM::ExtractValueOp::create(b, acc, e + j);
          if (scaled)
            x[j] = arith::MulFOp::create(b, x[j], scaleV);
          x[j] = arith::TruncFOp::create(b, elem, x[j]);
        }
        Value v = vector::FromElementsOp::create(b, pairTy, ValueRange{x[0], x[1]});
        Value idx = add(b, mul(b, row, width), add(b, laneCol, constIdx(b, col)));
        LLVM::StoreOp::create(b, v, globalAt(b, dst, elem, idx),
                              /*alignment=*/4);
      }
    };
    store(dK, D, dkPtr, /*scaled=*/true);
    store(dV, Dv, dvPtr, /*scaled=*/false);
  }
  b.setInsertionPointAfter(roles);
  gpu::ReturnOp::create(b);
  return fn;
}
