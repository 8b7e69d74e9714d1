//===- PortableKernel.cpp - flash.attention on any NVIDIA GPU -------------===//
//
// The kernel for everything the sm_90a wgmma kernel does not take: other
// chips (sm_80 and up, through PTX), head dims other than 64/128, f32 inputs,
// mixed element types. Plain f32 arithmetic, no tensor cores, but the same
// algorithm and memory behaviour: one block per (batch·head, 128 query rows),
// one thread per query row; K/V tiles staged in shared memory by the whole
// block; per tile the thread's scores go to a private array, then a single
// online-softmax step (running max, running sum, rescaled accumulator), so O
// is rescaled once per tile rather than once per key. Nothing of size Lk is
// ever stored.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
constexpr int64_t kRowsPerBlock = 128;
// K and V tiles (f32) must fit the 48 KiB of static shared memory every
// chip has; 32 KiB leaves room for two blocks per SM on small chips.
constexpr int64_t kTileBudgetBytes = 32 * 1024;

} // namespace

/// Keys per shared-memory tile: the largest power of two up to 64 whose K
/// and V tiles fit the budget; 0 when even one key does not.
static int64_t tileRowsFor(int64_t d, int64_t dv) {
  int64_t t = 64;
  while (t > 0 && t * (d + dv) * 4 > kTileBudgetBytes)
    t /= 2;
  return t;
}

/// x·y + z as a contractible multiply-add (NVPTX fuses it into fma.rn.f32;
/// math.fma would become a libdevice call).
static Value fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z) {
  auto contract = arith::FastMathFlagsAttr::get(b.getContext(),
                                                arith::FastMathFlags::contract);
  return arith::AddFOp::create(b, arith::MulFOp::create(b, x, y, contract), z,
                               contract);
}

/// for (iv = lb; iv < ub; iv += step) with loop-carried values; `body`
/// returns the values to carry on.
static scf::ForOp
forLoop(ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
        ValueRange init,
        function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value,
                                        ValueRange)>
            body) {
  auto loop = scf::ForOp::create(
      b, lb, ub, step, init,
      [&](OpBuilder &nb, Location loc, Value iv, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nb);
        scf::YieldOp::create(ib, body(ib, iv, args));
      });
  return loop;
}

/// init + sum over n of lhs[lhsIdx..., e] · rhs[e, rhsIdx...] (rowMajorRhs:
/// rhs[rhsIdx..., e]), one contractible FMA per step.
static Value dotLoop(ImplicitLocOpBuilder &b, int64_t n, Value init, Value lhs,
                     ValueRange lhsIdx, Value rhs, ValueRange rhsIdx,
                     bool rowMajorRhs) {
  return forLoop(b, constIdx(b, 0), constIdx(b, n), constIdx(b, 1), {init},
                 [&](ImplicitLocOpBuilder &db, Value e, ValueRange s) {
                   SmallVector<Value> li(lhsIdx), ri;
                   li.push_back(e);
                   if (rowMajorRhs)
                     ri.append(rhsIdx.begin(), rhsIdx.end());
                   ri.push_back(e);
                   if (!rowMajorRhs)
                     ri.append(rhsIdx.begin(), rhsIdx.end());
                   Value x = memref::LoadOp::create(db, lhs, li);
                   Value y = memref::LoadOp::create(db, rhs, ri);
                   return SmallVector<Value>{fma(db, x, y, s[0])};
                 })
      .getResult(0);
}

static gpu::GPUFuncOp buildPortableKernel(OpBuilder &ob, Location loc,
                                          gpu::GPUModuleOp module,
                                          const MemrefKernelSpec &spec,
                                          ArrayRef<Type> argTypes) {
  MLIRContext *ctx = ob.getContext();
  ImplicitLocOpBuilder b(loc, ob);
  b.setInsertionPointToEnd(module.getBody());
  Type f32 = b.getF32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto priv = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Private);
  int64_t T = tileRowsFor(spec.d, spec.dv), D = spec.d, Dv = spec.dv;
  SmallVector<Type> workgroup = {
      MemRefType::get({T, D}, f32, MemRefLayoutAttrInterface(), wg),
      MemRefType::get({T, Dv}, f32, MemRefLayoutAttrInterface(), wg)};
  SmallVector<Type> privates = {
      MemRefType::get({D}, f32, MemRefLayoutAttrInterface(), priv),
      MemRefType::get({Dv}, f32, MemRefLayoutAttrInterface(), priv),
      MemRefType::get({T}, f32, MemRefLayoutAttrInterface(), priv)};
  gpu::GPUFuncOp fn =
      createMemrefKernelFunc(b, argTypes, workgroup, privates, kRowsPerBlock);
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value kTile = fn.getWorkgroupAttributions()[0];
  Value vTile = fn.getWorkgroupAttributions()[1];
  Value qRow = fn.getPrivateAttributions()[0];
  Value acc = fn.getPrivateAttributions()[1];
  Value scores = fn.getPrivateAttributions()[2];

  MemrefKernelArgs args(entry, spec);
  Value q = args.q, k = args.k, v = args.v, o = args.out, lse = args.lse;
  ArrayRef<Value> batchSizes = args.batchSizes, captures = args.captures;
  Value hkv = args.hkv;

  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value bh = batchHeadBlock(b, product(b, batchSizes));
  Value q0 = arith::MulIOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
      constIdx(b, kRowsPerBlock));
  Value row = arith::AddIOp::create(b, q0, tid);
  Value lq = memref::DimOp::create(b, q, 1);
  Value lk = memref::DimOp::create(b, k, 1);
  HeadIndices heads = headIndices(b, bh, batchSizes, hkv,
                                  /*withBatchIndices=*/spec.scoreMod);
  Value rowValid =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, row, lq);
  // Threads past the last row still help stage tiles; they read a valid row.
  Value rowC = arith::MinSIOp::create(
      b, row, arith::SubIOp::create(b, lq, one));

  // The thread's query row, scaled, in f32; the accumulator at zero.
  Value scale = constF32(b, spec.scale);
  forLoop(b, zero, constIdx(b, D), one, {},
          [&](ImplicitLocOpBuilder &ib, Value c, ValueRange) {
            Value x = toF32(ib, memref::LoadOp::create(
                                    ib, q, ValueRange{bh, rowC, c}));
            memref::StoreOp::create(ib, arith::MulFOp::create(ib, x, scale),
                                    qRow, ValueRange{c});
            return SmallVector<Value>{};
          });
  Value zf = constF32(b, 0.0);
  forLoop(b, zero, constIdx(b, Dv), one, {},
          [&](ImplicitLocOpBuilder &ib, Value c, ValueRange) {
            memref::StoreOp::create(ib, zf, acc, ValueRange{c});
            return SmallVector<Value>{};
          });

  auto [tBegin, tEnd] =
      visibleTileRange(b, spec.mask, q0, kRowsPerBlock, lq, lk, T);
  TileWalk walk{tBegin, tEnd, Value(), Value()};
  // Tiles hidden by a score_mod's mask of the indices alone are skipped as
  // well.
  if (std::optional<IndexMask> indexMask = kernelIndexMask(
          spec.scoreMod, spec.numBatchDims, !spec.varlen && !spec.pageSize))
    walk = trimHiddenTiles(b, *spec.scoreMod, *indexMask, heads.batchIdx,
                           heads.batchIdx, {tBegin, tEnd}, q0, kRowsPerBlock,
                           lq, lk, T);
  Value negInf = constF32(b, -std::numeric_limits<double>::infinity());
  Value log2e = constF32(b, 1.0 / std::log(2.0));
  Value threads = constIdx(b, kRowsPerBlock);
  Value lkLast = arith::SubIOp::create(b, lk, one);

  auto tiles = forLoop(
      b, walk.begin, walk.end, one, {negInf, zf},
      [&](ImplicitLocOpBuilder &ib, Value step, ValueRange st) {
        Value j0 =
            arith::MulIOp::create(ib, walk.tile(ib, step), constIdx(ib, T));
        // Stage the tile: all threads, coalesced along the head dim; keys
        // past Lk read the last key (their scores are masked below).
        gpu::BarrierOp::create(ib);
        auto stage = [&](Value src, Value dst, int64_t width) {
          forLoop(ib, tid, constIdx(ib, T * width), threads, {},
                  [&](ImplicitLocOpBuilder &lb, Value e, ValueRange) {
                    Value w = constIdx(lb, width);
                    Value jj = arith::DivUIOp::create(lb, e, w);
                    Value c = arith::RemUIOp::create(lb, e, w);
                    Value j = arith::MinSIOp::create(
                        lb, arith::AddIOp::create(lb, j0, jj), lkLast);
                    Value x = toF32(lb, memref::LoadOp::create(
                                            lb, src,
                                            ValueRange{heads.kvbh, j, c}));
                    memref::StoreOp::create(lb, x, dst, ValueRange{jj, c});
                    return SmallVector<Value>{};
                  });
        };
        stage(k, kTile, D);
        stage(v, vTile, Dv);
        gpu::BarrierOp::create(ib);

        auto update = scf::IfOp::create(ib, TypeRange{ib.getF32Type(),
                                                      ib.getF32Type()},
                                        rowValid, /*withElse=*/true);
        {
          OpBuilder::InsertionGuard g(ib);
          ib.setInsertionPointToStart(update.elseBlock());
          scf::YieldOp::create(ib, st);
          ib.setInsertionPointToStart(update.thenBlock());
          Value m = st[0], l = st[1];
          // Scores of this tile (masked to -inf) and their max.
          Value tileMax =
              forLoop(ib, zero, constIdx(ib, T), one, {negInf},
                      [&](ImplicitLocOpBuilder &sb, Value jj, ValueRange mx) {
                        Value dot = dotLoop(sb, D, zf, qRow, {}, kTile, {jj},
                                            /*rowMajorRhs=*/true);
                        Value j = arith::AddIOp::create(sb, j0, jj);
                        Value jC = arith::MinSIOp::create(sb, j, lkLast);
                        Value s = dot;
                        if (spec.scoreMod)
                          s = inlineScoreMod(sb, *spec.scoreMod, s,
                                             heads.batchIdx, row, jC,
                                             captures);
                        Value ok = scoreAllowed(sb, spec.mask, row, j, lq, lk);
                        s = arith::SelectOp::create(
                            sb, ok, arith::MulFOp::create(sb, s, log2e),
                            negInf);
                        memref::StoreOp::create(sb, s, scores, ValueRange{jj});
                        return SmallVector<Value>{
                            arith::MaximumFOp::create(sb, mx[0], s)};
                      })
                  .getResult(0);
          MaxUpdate u = updateRunningMax(ib, m, tileMax);
          Value mSafe = u.mUse, alpha = u.alpha;
          Value pSum =
              forLoop(ib, zero, constIdx(ib, T), one, {zf},
                      [&](ImplicitLocOpBuilder &pb, Value jj, ValueRange s) {
                        Value x = memref::LoadOp::create(pb, scores,
                                                         ValueRange{jj});
                        Value p = exp2Approx(
                            pb, arith::SubFOp::create(pb, x, mSafe));
                        memref::StoreOp::create(pb, p, scores, ValueRange{jj});
                        return SmallVector<Value>{
                            arith::AddFOp::create(pb, s[0], p)};
                      })
                  .getResult(0);
          forLoop(ib, zero, constIdx(ib, Dv), one, {},
                  [&](ImplicitLocOpBuilder &ab, Value c, ValueRange) {
                    Value a0 = arith::MulFOp::create(
                        ab, memref::LoadOp::create(ab, acc, ValueRange{c}),
                        alpha);
                    Value sum = dotLoop(ab, T, a0, scores, {}, vTile, {c},
                                        /*rowMajorRhs=*/false);
                    memref::StoreOp::create(ab, sum, acc, ValueRange{c});
                    return SmallVector<Value>{};
                  });
          Value lNew = updateRunningSum(ib, l, alpha, pSum);
          scf::YieldOp::create(ib, ValueRange{u.m, lNew});
        }
        return SmallVector<Value>(update.getResults());
      });

  // Epilogue: O = acc / l; a row that saw no key writes 0 and lse = -inf.
  auto ifRow = scf::IfOp::create(b, rowValid, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    RowResult fin =
        finishRow(b, tiles.getResult(0), tiles.getResult(1), lse != nullptr,
                  args.sinks ? sinkLog2(b, args.sinks, bh) : Value());
    forLoop(b, zero, constIdx(b, Dv), one, {},
            [&](ImplicitLocOpBuilder &ib, Value c, ValueRange) {
              Value x = arith::MulFOp::create(
                  ib, memref::LoadOp::create(ib, acc, ValueRange{c}), fin.inv);
              memref::StoreOp::create(ib, fromF32(ib, x, spec.oElem), o,
                                      ValueRange{bh, row, c});
              return SmallVector<Value>{};
            });
    if (lse)
      memref::StoreOp::create(b, fin.lse, lse, ValueRange{bh, row});
  }
  gpu::ReturnOp::create(b);
  return fn;
}

namespace {
class PortableStrategy final : public MemrefKernelStrategy {
public:
  PortableStrategy() : MemrefKernelStrategy(kRowsPerBlock, kRowsPerBlock, buildPortableKernel) {}
  StringRef name() const override { return "portable"; }
  bool supports(AttentionOp op, const ChipInfo &,
                std::string &why) const override {
    FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
    if (failed(spec))
      return false;
    if (tileRowsFor(spec->d, spec->dv) == 0) {
      llvm::raw_string_ostream(why)
          << "head dims D = " << spec->d << ", Dv = " << spec->dv
          << " are too large for a shared-memory tile of one key";
      return false;
    }
    return true;
  }

};
} // namespace

const KernelStrategy &gpu_lowering::portableStrategy() {
  static const PortableStrategy strategy;
  return strategy;
}
