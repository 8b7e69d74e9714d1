//===- MmaKernel.cpp - flash.attention on tensor cores with mma.sync ------===//
//
// The tensor-core kernel for every chip from sm_80 and for the head dims the
// sm_90a wgmma kernel does not take (any multiple of 16 up to 256): the
// FlashAttention-2 structure. One block of four warps per (batch·head, 64
// query rows), 16 rows per warp; Q stays in registers as mma.sync A
// fragments; per tile of K/V keys staged in shared memory, S = QKᵀ and
// O += PV are m16n8k16 mma.sync. The accumulator fragment of a warp's 16 rows
// is laid out exactly like a wgmma m64 fragment's 16 rows
// (AccumulatorLayout), so the online softmax step and the P → A-fragment
// packing are the tile program's register forms (RegisterSoftmax.cpp).
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"
#include "MmaSyncPrimitives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
constexpr int64_t kWarps = 4;
constexpr int64_t kRowsPerWarp = 16;
constexpr int64_t kRowsPerBlock = kWarps * kRowsPerWarp;
// K and V tiles (16-bit) within the 48 KiB of static shared memory.
constexpr int64_t kTileBudgetBytes = 40 * 1024;
// Tile rows are padded by 16 bytes: the fragment reads of a warp (8 rows ×
// 4 column pairs) then fall in 32 distinct banks instead of 4.
constexpr int64_t kPad = 8;
} // namespace

/// Keys per tile: 64 where K and V tiles fit, else 32 or 16.
static int64_t mmaTileRows(int64_t d, int64_t dv) {
  int64_t t = 64;
  while (t > 16 && t * (d + dv + 2 * kPad) * 2 > kTileBudgetBytes)
    t /= 2;
  return t;
}

static gpu::GPUFuncOp buildMmaKernel(OpBuilder &ob, Location loc,
                                     gpu::GPUModuleOp module,
                                     const MemrefKernelSpec &spec,
                                     ArrayRef<Type> argTypes) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type elem = spec.qElem;
  Type f32 = b.getF32Type();
  const int64_t D = spec.d, Dv = spec.dv, T = mmaTileRows(D, Dv);
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  SmallVector<Type> workgroup = {
      MemRefType::get({T, D + kPad}, elem, MemRefLayoutAttrInterface(), wg),
      MemRefType::get({T, Dv + kPad}, elem, MemRefLayoutAttrInterface(), wg)};
  gpu::GPUFuncOp fn =
      createMemrefKernelFunc(b, argTypes, workgroup, {}, 32 * kWarps);
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value kTile = fn.getWorkgroupAttributions()[0];
  Value vTile = fn.getWorkgroupAttributions()[1];
  MemrefKernelArgs args(entry, spec);

  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  MmaLane ml = mmaLane(b);
  Value tid = ml.tid, warp = ml.warp, g = ml.g, t2 = ml.t2, lane8 = ml.lane8,
        laneHalf8 = ml.laneHalf8, lane16 = ml.lane16;
  Value bh = batchHeadBlock(b, product(b, args.batchSizes));
  Value blockX = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  // Rows of a packed varlen batch are those of the block's sequence, at its
  // offsets in the [tokens, heads, D] tensors.
  RowPlace qPlace, kPlace;
  Value lq, lk;
  if (spec.varlen) {
    SequenceBlock w = varlenSequenceBlock(
        b, args.cuSeqlensQ, args.cuSeqlensK, memref::DimOp::create(b, args.q, 0),
        memref::DimOp::create(b, args.k, 0), blockX, kRowsPerBlock);
    blockX = w.block;
    lq = w.lq;
    lk = w.lk;
    qPlace.offset = w.q0;
    kPlace.offset = w.k0;
  } else {
    lq = memref::DimOp::create(b, args.q, 1);
    lk = memref::DimOp::create(b, args.k, 1);
  }
  Value q0 = arith::MulIOp::create(b, blockX, constIdx(b, kRowsPerBlock));
  Value lqLast = arith::SubIOp::create(b, lq, one);
  Value lkLast = arith::SubIOp::create(b, lk, one);
  HeadIndices heads =
      headIndices(b, bh, args.batchSizes, args.hkv,
                  /*withBatchIndices=*/spec.scoreMod != nullptr);

  // This thread's two rows of its warp's 16 (fragment rows g and g + 8).
  Value rowBase = arith::AddIOp::create(
      b, q0, arith::MulIOp::create(b, warp, constIdx(b, kRowsPerWarp)));
  Value rows[2] = {arith::AddIOp::create(b, rowBase, g), Value()};
  rows[1] = arith::AddIOp::create(b, rows[0], constIdx(b, 8));
  Value rowsC[2] = {arith::MinSIOp::create(b, rows[0], lqLast),
                    arith::MinSIOp::create(b, rows[1], lqLast)};

  // Q as A fragments, loaded once.
  Value bhRows[2] = {bh, bh};
  SmallVector<Value> qFrag =
      loadQueryFragments(b, args.q, bhRows, rowsC, t2, D, qPlace);

  auto [tBegin, tEnd] =
      visibleTileRange(b, spec.mask, q0, kRowsPerBlock, lq, lk, T);
  std::optional<IndexMask> indexMask =
      kernelIndexMask(spec.scoreMod, spec.numBatchDims,
                      !spec.varlen && !spec.pageSize);
  TileWalk walk{tBegin, tEnd, Value(), Value()};
  if (indexMask)
    walk = trimHiddenTiles(b, *spec.scoreMod, *indexMask, heads.batchIdx,
                           heads.batchIdx, {tBegin, tEnd}, q0, kRowsPerBlock,
                           lq, lk, T);
  Value diagOff = maskDiagonalOffset(b, spec.mask, lq, lk);
  Value warpRowHi = arith::MinSIOp::create(
      b, arith::AddIOp::create(b, rowBase, constIdx(b, kRowsPerWarp - 1)),
      lqLast);
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value zf = constF32(b, 0.0);
  SmallVector<Value> init = {negInf, negInf, zf, zf};
  init.append(Dv / 2, zf); // O: Dv/8 fragments of 4
  Value threads = constIdx(b, 32 * kWarps);

  auto loop = scf::ForOp::create(
      b, walk.begin, walk.end, one, init,
      [&](OpBuilder &nb, Location l, Value step, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        Value j0 =
            arith::MulIOp::create(ib, walk.tile(ib, step), constIdx(ib, T));
        // Stage K and V: all threads, consecutive elements of a row;
        // keys past Lk repeat the last key (masked below).
        gpu::BarrierOp::create(ib);
        // 16 bytes (8 elements) per thread and step: D and Dv are multiples
        // of 8, rows of the caller's buffers and of the tiles 16-byte aligned.
        auto stage = [&](Value src, Value dst, int64_t width) {
          int64_t chunks = width / 8;
          auto fl = scf::ForOp::create(ib, tid, constIdx(ib, T * chunks),
                                       threads);
          OpBuilder::InsertionGuard gd(ib);
          ib.setInsertionPointToStart(fl.getBody());
          Value e = fl.getInductionVar();
          Value w = constIdx(ib, chunks);
          Value jj = arith::DivUIOp::create(ib, e, w);
          Value c = arith::MulIOp::create(
              ib, arith::RemUIOp::create(ib, e, w), constIdx(ib, 8));
          Value j = arith::MinSIOp::create(
              ib, arith::AddIOp::create(ib, j0, jj), lkLast);
          auto vt = VectorType::get({8}, elem);
          SmallVector<Value, 2> at = kPlace.rows(ib, heads.kvbh, j);
          Value x = vector::LoadOp::create(ib, vt, src,
                                           ValueRange{at[0], at[1], c},
                                           /*nontemporal=*/false,
                                           llvm::Align(16));
          vector::StoreOp::create(ib, x, dst, ValueRange{jj, c},
                                  /*nontemporal=*/false, llvm::Align(16));
        };
        stage(args.k, kTile, D);
        stage(args.v, vTile, Dv);
        gpu::BarrierOp::create(ib);

        // S = Q Kᵀ: per 8 keys one m16n8 fragment, summed over D in k16
        // steps. B = Kᵀ is K's rows as they lie: ldmatrix without transpose
        // of K[keys][k-step columns 0-7] and [8-15].
        SmallVector<Value> s;
        for (int64_t n8 = 0; n8 < T / 8; ++n8) {
          SmallVector<Value, 4> acc(4, zf);
          Value key = arith::AddIOp::create(ib, lane8, constIdx(ib, 8 * n8));
          for (int64_t ks = 0; ks < D / 16; ++ks) {
            Value c = arith::AddIOp::create(ib, laneHalf8,
                                            constIdx(ib, 16 * ks));
            SmallVector<Value, 2> bRegs =
                ldmatrixB(ib, kTile, ValueRange{key, c}, /*transpose=*/false);
            acc = mmaSync(ib, elem, ArrayRef<Value>(qFrag).slice(4 * ks, 4),
                      bRegs, acc);
          }
          s.append(acc.begin(), acc.end());
        }

        RowState rs{{st[0], st[1]}, {st[2], st[3]}};
        ScoreContext sc = makeScoreContext(
            ib, spec.mask, spec.scoreMod, rows, j0, t2, lq, lk, heads.batchIdx,
            args.captures, /*needsMask=*/true, spec.indexBound());
        // Only tiles that cross Lk or this warp's causal / window bound take
        // the per-element mask; the condition is uniform over the warp, whose
        // lanes the softmax's shuffles span.
        Value needsMask = tileNeedsElementMask(ib, spec.mask, j0, T, rowBase,
                                               warpRowHi, lk, diagOff);
        if (indexMask)
          sc.indexFull = classifyScoreTile(ib, *spec.scoreMod, *indexMask,
                                           heads.batchIdx, heads.batchIdx,
                                           rowBase, warpRowHi, j0, T, lq, lk)
                             .full;
        std::array<Value, 2> alpha =
            maskedSoftmaxStep(ib, s, rs, spec.scale, needsMask, sc);

        // O = alpha·O + P V: P (the softmax registers) as A fragments,
        // B = V[16 keys][8 columns] by ldmatrix with transpose.
        SmallVector<Value> o(st.drop_front(4));
        for (size_t i = 0; i < o.size(); ++i)
          o[i] = arith::MulFOp::create(ib, o[i], alpha[AccumulatorLayout::rowHalf(i)]);
        SmallVector<Value> pFrag = packA(ib, s, elem);
        for (int64_t n8 = 0; n8 < Dv / 8; ++n8) {
          SmallVector<Value, 4> acc(o.begin() + 4 * n8, o.begin() + 4 * n8 + 4);
          Value col = constIdx(ib, 8 * n8);
          for (int64_t kk = 0; kk < T / 16; ++kk) {
            Value key = arith::AddIOp::create(ib, lane16, constIdx(ib, 16 * kk));
            SmallVector<Value, 2> bRegs =
                ldmatrixB(ib, vTile, ValueRange{key, col}, /*transpose=*/true);
            acc = mmaSync(ib, elem, ArrayRef<Value>(pFrag).slice(4 * kk, 4),
                      bRegs, acc);
          }
          std::copy(acc.begin(), acc.end(), o.begin() + 4 * n8);
        }
        SmallVector<Value> next = {rs.m[0], rs.m[1], rs.l[0], rs.l[1]};
        next.append(o.begin(), o.end());
        scf::YieldOp::create(ib, next);
      });

  // Epilogue: the row sums are per thread until here (quad-reduce now).
  ValueRange fin = loop.getResults();
  ValueRange acc = fin.drop_front(4);
  for (int64_t h = 0; h < 2; ++h) {
    Value lTot = quadReduce(b, fin[2 + h], /*isMax=*/false);
    RowResult row =
        finishRow(b, fin[h], lTot, args.lse != nullptr,
                  args.sinks ? sinkLog2(b, args.sinks, bh) : Value());
    Value valid =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, rows[h], lq);
    auto ifRow = scf::IfOp::create(b, valid, /*withElse=*/false);
    OpBuilder::InsertionGuard gd(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    // The thread holds columns 8·n + 2·(lane%4) + {0, 1} of its rows.
    for (int64_t n8 = 0; n8 < Dv / 8; ++n8)
      for (int64_t c = 8 * n8; c < 8 * n8 + 2; ++c) {
        Value x =
            fromF32(b,
                    arith::MulFOp::create(
                        b, acc[AccumulatorLayout::element(c, h)], row.inv),
                    spec.oElem);
        Value col = arith::AddIOp::create(b, t2, constIdx(b, c));
        SmallVector<Value, 2> at = qPlace.rows(b, bh, rows[h]);
        memref::StoreOp::create(b, x, args.out, ValueRange{at[0], at[1], col});
      }
    if (args.lse) {
      // One lane of the quad writes the row's log-sum-exp.
      Value first =
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t2, zero);
      auto ifLane = scf::IfOp::create(b, first, /*withElse=*/false);
      OpBuilder::InsertionGuard gl(b);
      b.setInsertionPointToStart(ifLane.thenBlock());
      memref::StoreOp::create(b, row.lse, args.lse, qPlace.lse(b, bh, rows[h]));
    }
  }
  gpu::ReturnOp::create(b);
  return fn;
}

namespace {
class MmaStrategy final : public MemrefKernelStrategy {
public:
  MmaStrategy() : MemrefKernelStrategy(kRowsPerBlock, 32 * kWarps, buildMmaKernel) {}
  StringRef name() const override { return "mma"; }
  bool supports(AttentionOp op, const ChipInfo &chip,
                std::string &why) const override {
    if (!chip.hasMmaSync()) {
      why = "the mma kernel needs sm_80 or newer";
      return false;
    }
    return mmaSyncSupports(op, why) &&
           succeeded(memrefKernelSpec(op, why));
  }

};
} // namespace

bool gpu_lowering::mmaSupportsVarlen(VarlenAttentionOp op, const ChipInfo &chip,
                                     std::string &why) {
  if (!chip.hasMmaSync()) {
    why = "the mma kernel needs sm_80 or newer";
    return false;
  }
  if (failed(mmaSyncShapeSupported(
          op.getQueryType().getElementType(), op.getKeyType().getElementType(),
          op.getValueType().getElementType(), op.getQueryType().getDimSize(2),
          op.getValueType().getDimSize(2), why)))
    return false;
  return succeeded(memrefKernelSpec(op, why));
}

LogicalResult gpu_lowering::lowerVarlenToMmaLaunch(RewriterBase &rewriter,
                                                   VarlenAttentionOp op,
                                                   const OperandBuffers &bufs) {
  std::string why;
  FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
  if (failed(spec))
    return op.emitOpError("convert-flash-to-gpu: ") << why;
  return lowerToMemrefLaunch(rewriter, op, bufs, *spec, kRowsPerBlock,
                             32 * kWarps, buildMmaKernel);
}

const KernelStrategy &gpu_lowering::mmaStrategy() {
  static const MmaStrategy strategy;
  return strategy;
}
