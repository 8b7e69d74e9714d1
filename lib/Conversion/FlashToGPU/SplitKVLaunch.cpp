//===- SplitKVLaunch.cpp - the split-KV decode strategy and its host side -===//
//
// When the query rows of a K/V head fit one CTA (decode, speculative decode,
// short chunks against a long cache) kernel=auto takes this strategy first. Its host side chooses how many CTAs split each key
// range — from the device's SM count (asked of the runtime at run time),
// the CTAs the heads already give and the number of key tiles — allocates
// the partials stream-ordered on the caller's stream, launches the split
// kernel and, when there is more than one split, the combine kernel.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"
#include "MmaSyncPrimitives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
// kernel=auto prefers the split kernel up to 128 packed rows from several
// query heads (the prefill kernels would read each K/V tile once per head),
// and for one head per K/V head up to 16 rows, or up to 64 when the prefill
// grid would hold fewer than 32 CTAs (few heads, so only a split fills the
// chip). Measured on the H200 (bench/NOTES run 20): at 48-64 rows of one
// head with 64-128 heads the wgmma kernel is 7-20 % faster.
constexpr int64_t kAutoMaxRows = 16, kAutoMaxFewHeadRows = 64,
                  kAutoMaxGroupedRows = 128, kAutoFewCTAs = 32;
// Each split takes at least this many key tiles, so that its pipeline fill
// and its partial's write are amortised.
constexpr int64_t kMinTilesPerSplit = 2;
constexpr int64_t kMaxSplits = 128;
// From this many splits on, each row of the combine gets a whole CTA.
constexpr int64_t kCombineSplitsPerWarp = 16;
} // namespace

/// `splits` rounded to whole key tiles per split, with no split left without
/// one: the tiles per split and the splits that launch (multi unset).
static SplitPlan wholeTileSplits(ImplicitLocOpBuilder &b, Value splits,
                                 Value keyTiles) {
  Value one = constIdx(b, 1);
  SplitPlan p;
  p.tilesPerSplit = arith::MaxSIOp::create(
      b, arith::CeilDivSIOp::create(b, keyTiles, splits), one);
  p.splits = arith::MaxSIOp::create(
      b, arith::CeilDivSIOp::create(b, keyTiles, p.tilesPerSplit), one);
  return p;
}

/// The split count: with `ctas` CTAs per split on `slots` resident CTAs,
/// the fewest splits whose last wave is at least 85 % as full as the best
/// choice's (FlashAttention's rule), none when the heads alone nearly fill
/// the machine. A wave is judged by the splits planSplits launches for s,
/// after rounding to whole key tiles: asking for 14 splits of 32 tiles
/// launches 11 of 3 (bench/NOTES run 48: 16 splits of 2 tiles are 17 %
/// faster there).
static Value chooseSplits(ImplicitLocOpBuilder &b, Value ctas, Value slots,
                          Value maxSplits, Value keyTiles) {
  Value one = constIdx(b, 1);
  Value hi = arith::AddIOp::create(b, maxSplits, one);
  auto efficiency = [&](ImplicitLocOpBuilder &ib, Value s) {
    // ctas·s' / (slots · ceil(ctas·s' / slots)), in thousandths, for the s'
    // splits launched.
    Value launched = wholeTileSplits(ib, s, keyTiles).splits;
    Value work = arith::MulIOp::create(ib, ctas, launched);
    Value waves = arith::CeilDivSIOp::create(ib, work, slots);
    return arith::DivSIOp::create(
        ib, arith::MulIOp::create(ib, work, constIdx(ib, 1000)),
        arith::MulIOp::create(ib, waves, slots));
  };
  auto best = scf::ForOp::create(
      b, one, hi, one, ValueRange{constIdx(b, 0)},
      [&](OpBuilder &nb, Location l, Value s, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        scf::YieldOp::create(
            ib, ValueRange{arith::MaxSIOp::create(ib, st[0], efficiency(ib, s))
                               .getResult()});
      });
  Value bar = arith::DivSIOp::create(
      b, arith::MulIOp::create(b, best.getResult(0), constIdx(b, 85)),
      constIdx(b, 100));
  // Walk down so the loop ends on the smallest s that clears the bar.
  auto pick = scf::ForOp::create(
      b, one, hi, one, ValueRange{maxSplits},
      [&](OpBuilder &nb, Location l, Value i, ValueRange st) {
        ImplicitLocOpBuilder ib(l, nb);
        Value s = arith::SubIOp::create(ib, hi, i);
        Value ok = arith::CmpIOp::create(ib, arith::CmpIPredicate::sge,
                                         efficiency(ib, s), bar);
        scf::YieldOp::create(
            ib, ValueRange{arith::SelectOp::create(ib, ok, s, st[0])
                               .getResult()});
      });
  // Heads that fill 80 % of the slots on their own are not split.
  Value full = arith::CmpIOp::create(
      b, arith::CmpIPredicate::sge,
      arith::MulIOp::create(b, ctas, constIdx(b, 5)),
      arith::MulIOp::create(b, slots, constIdx(b, 4)));
  return arith::SelectOp::create(b, full, one, pick.getResult(0));
}

/// A fresh internal i64 global, zero at load time, at the top of `module`:
/// the split-count memo of one launch site.
static LLVM::GlobalOp splitMemoGlobal(ImplicitLocOpBuilder &b,
                                      ModuleOp module) {
  std::string name;
  for (unsigned i = 0;; ++i) {
    name = "__flash_split_memo_" + std::to_string(i);
    if (!module.lookupSymbol(name))
      break;
  }
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(module.getBody());
  return LLVM::GlobalOp::create(b, b.getI64Type(), /*isConstant=*/false,
                                LLVM::Linkage::Internal, name,
                                b.getI64IntegerAttr(0), /*alignment=*/8);
}

Value gpu_lowering::splitCount(ImplicitLocOpBuilder &b, Operation *anchor,
                               Value ctas, int64_t ctasPerSM, Value keyTiles) {
  Value one = constIdx(b, 1);
  Value slots = arith::MulIOp::create(b, multiprocessorCount(b, anchor),
                                      constIdx(b, ctasPerSM));
  // chooseSplits walks up to 2·kMaxSplits candidates with several integer
  // divisions each: microseconds of host time on every decode call, for an
  // answer that for a static shape depends on the SM count alone. Each launch
  // site keeps its last question and answer in one 64-bit word — CTAs in bits
  // 0-19, key tiles 20-39, slots 40-55, the split count 56-63 — read and
  // written with relaxed atomics, so a concurrent caller sees a whole pair or
  // the initial zero (never a key: slots are at least 1). Questions that do
  // not fit the fields are answered each time.
  static_assert(kMaxSplits < 256, "the split count must fit 8 bits");
  Type i64 = b.getI64Type();
  auto toI64 = [&](Value v) -> Value {
    return arith::IndexCastOp::create(b, i64, v);
  };
  auto c64 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, i64, v);
  };
  auto below = [&](Value v, int64_t bits) -> Value {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, v,
                                 c64(int64_t(1) << bits));
  };
  // Built one op per statement: the IR's order must not depend on the order
  // a compiler evaluates call arguments in.
  Value ctas64 = toI64(ctas);
  Value tiles64 = toI64(keyTiles);
  Value slots64 = toI64(slots);
  Value ctasFit = below(ctas64, 20);
  Value tilesFit = below(tiles64, 20);
  Value slotsFit = below(slots64, 16);
  Value fits = arith::AndIOp::create(
      b, arith::AndIOp::create(b, ctasFit, tilesFit), slotsFit);
  Value tilesField = arith::ShLIOp::create(b, tiles64, c64(20));
  Value slotsField = arith::ShLIOp::create(b, slots64, c64(40));
  Value key = arith::OrIOp::create(
      b, arith::OrIOp::create(b, ctas64, tilesField), slotsField);
  auto memo = splitMemoGlobal(b, anchor->getParentOfType<ModuleOp>());
  Value addr = LLVM::AddressOfOp::create(b, memo);
  Value packed = LLVM::LoadOp::create(b, i64, addr, /*alignment=*/8,
                                      /*isVolatile=*/false,
                                      /*isNonTemporal=*/false,
                                      /*isInvariant=*/false,
                                      /*isInvariantGroup=*/false,
                                      LLVM::AtomicOrdering::monotonic);
  Value stored = arith::AndIOp::create(b, packed, c64((int64_t(1) << 56) - 1));
  Value same = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, stored, key);
  Value hit = arith::AndIOp::create(b, fits, same);
  auto ifHit = scf::IfOp::create(b, TypeRange{b.getIndexType()}, hit,
                                 /*withElse=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifHit.thenBlock());
    scf::YieldOp::create(b, ValueRange{arith::IndexCastOp::create(
                                b, b.getIndexType(),
                                arith::ShRUIOp::create(b, packed, c64(56)))});
    b.setInsertionPointToStart(ifHit.elseBlock());
    Value tilesPer =
        arith::DivSIOp::create(b, keyTiles, constIdx(b, kMinTilesPerSplit));
    Value atLeastOne = arith::MaxSIOp::create(b, tilesPer, one);
    Value maxSplits =
        arith::MinSIOp::create(b, atLeastOne, constIdx(b, kMaxSplits));
    Value splits = chooseSplits(b, ctas, slots, maxSplits, keyTiles);
    auto ifFits = scf::IfOp::create(b, fits, /*withElse=*/false);
    b.setInsertionPointToStart(ifFits.thenBlock());
    Value splits64 = toI64(splits);
    Value entry = arith::OrIOp::create(
        b, key, arith::ShLIOp::create(b, splits64, c64(56)));
    LLVM::StoreOp::create(b, entry, addr, /*alignment=*/8,
                          /*isVolatile=*/false, /*isNonTemporal=*/false,
                          /*isInvariantGroup=*/false,
                          LLVM::AtomicOrdering::monotonic);
    b.setInsertionPointAfter(ifFits);
    scf::YieldOp::create(b, ValueRange{splits});
  }
  return ifHit.getResult(0);
}

SplitPartials gpu_lowering::allocSplitPartials(ImplicitLocOpBuilder &b,
                                               Value stream, Value splits,
                                               Value multi, Value rows,
                                               int64_t dv) {
  MLIRContext *ctx = b.getContext();
  SplitPartials p;
  p.token = UnrealizedConversionCastOp::create(
                b, TypeRange{gpu::AsyncTokenType::get(ctx)}, ValueRange{stream})
                .getResult(0);
  // One split writes the output itself: a zero-sized buffer nothing touches.
  Value n = arith::SelectOp::create(b, multi, splits, constIdx(b, 0));
  // Both partials are views of one buffer: one stream-ordered allocation
  // and one free per call, not two of each (each is host time of a decode
  // call that is mostly host time).
  Value partials = arith::MulIOp::create(b, n, rows);
  Value outBytes = arith::MulIOp::create(b, partials, constIdx(b, 4 * dv));
  Value bytes = arith::AddIOp::create(
      b, outBytes, arith::MulIOp::create(b, partials, constIdx(b, 4)));
  p.buffer = gpu::AllocOp::create(
                 b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type()),
                 gpu::AsyncTokenType::get(ctx), ValueRange{p.token},
                 ValueRange{bytes}, ValueRange{}, /*hostShared=*/false)
                 .getMemref();
  auto [oType, lseType] = splitPartialTypes(ctx, dv);
  p.out = memref::ViewOp::create(b, oType, p.buffer, constIdx(b, 0),
                                 ValueRange{n, rows});
  p.lse = memref::ViewOp::create(b, lseType, p.buffer, outBytes,
                                 ValueRange{n, rows});
  return p;
}

std::pair<MemRefType, MemRefType>
gpu_lowering::splitPartialTypes(MLIRContext *ctx, int64_t dv) {
  Type f32 = Float32Type::get(ctx);
  return {MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, dv}, f32),
          MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, f32)};
}

SmallVector<Type> gpu_lowering::splitCombineArgTypes(MLIRContext *ctx,
                                                     int64_t dv, Type out,
                                                     Type lse, Type sinks) {
  auto [o, l] = splitPartialTypes(ctx, dv);
  SmallVector<Type> t = {o, l, out};
  if (lse)
    t.push_back(lse);
  if (sinks)
    t.push_back(sinks);
  t.push_back(IndexType::get(ctx));
  return t;
}

SplitPlan gpu_lowering::planSplits(ImplicitLocOpBuilder &b, Value splits,
                                   Value keyTiles) {
  SplitPlan p = wholeTileSplits(b, splits, keyTiles);
  p.multi = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, p.splits,
                                  constIdx(b, 1));
  return p;
}

void gpu_lowering::combineAndFreePartials(ImplicitLocOpBuilder &b,
                                          gpu::GPUFuncOp combine,
                                          const SplitPartials &p, Value out,
                                          Value lse, Value sinks,
                                          Value splits, Value multi,
                                          Value rows, Value stream) {
  Value one = constIdx(b, 1);
  {
    OpBuilder::InsertionGuard g(b);
    auto ifMulti = scf::IfOp::create(b, multi, /*withElse=*/false);
    b.setInsertionPointToStart(ifMulti.thenBlock());
    // Many splits over few rows: the warps of a CTA share a row's splits.
    Value wpr = arith::SelectOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sge, splits,
                              constIdx(b, kCombineSplitsPerWarp)),
        constIdx(b, kSplitKVCombineWarps), one);
    SmallVector<Value> cargs = {p.out, p.lse, out};
    if (lse)
      cargs.push_back(lse);
    if (sinks)
      cargs.push_back(sinks);
    cargs.push_back(wpr);
    Value blocks = arith::CeilDivSIOp::create(
        b, rows,
        arith::DivUIOp::create(b, constIdx(b, kSplitKVCombineWarps), wpr));
    launchOnStream(b, combine, blocks, one, 32 * kSplitKVCombineWarps,
                   /*dynamicSmemBytes=*/0, cargs, stream);
  }
  freeSplitPartials(b, p);
}

void gpu_lowering::freeSplitPartials(ImplicitLocOpBuilder &b,
                                     const SplitPartials &p) {
  gpu::DeallocOp::create(b, gpu::AsyncTokenType::get(b.getContext()),
                         ValueRange{p.token}, p.buffer);
}

LogicalResult gpu_lowering::lowerToSplitKVLaunch(
    RewriterBase &rewriter, Operation *op, const OperandBuffers &bufs,
    const MemrefKernelSpec &spec, const SplitKVConfig &cfg,
    const GPUKernelOptions &options, const ChipInfo &chip) {
  Location loc = op->getLoc();
  MLIRContext *ctx = op->getContext();
  Value stream = streamArgument(op);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(loc, rewriter);
  MemrefLaunchArgs a = memrefLaunchArgs(b, bufs, spec);

  auto [oPartTy, lsePartTy] = splitPartialTypes(ctx, spec.dv);
  SmallVector<Type> argTypes;
  for (Value v : a.args)
    argTypes.push_back(v.getType());
  argTypes.append({oPartTy, lsePartTy, b.getIndexType()});
  Value sinks = a.sinks;
  SmallVector<Type> combineTypes = splitCombineArgTypes(
      ctx, spec.dv, a.args[3].getType(),
      bufs.lse ? a.args[4].getType() : Type(),
      sinks ? sinks.getType() : Type());

  gpu::GPUFuncOp kernel, combine;
  {
    OpBuilder::InsertionGuard g(rewriter);
    gpu::GPUModuleOp gmod = newKernelModule(rewriter, op);
    kernel = buildSplitKVKernel(rewriter, loc, gmod, spec, cfg, argTypes);
    combine = buildSplitKVCombineKernel(rewriter, loc, gmod, spec,
                                        combineTypes);
  }

  OpBuilder::InsertionGuard g(b);
  ifNonEmptyQuery(b, a);
  Value nT = arith::CeilDivSIOp::create(b, a.lk, constIdx(b, cfg.tileKeys));
  Value kvbhCount = arith::DivUIOp::create(b, a.bhCount, constIdx(b, cfg.group));
  Value ctas = arith::MulIOp::create(b, kvbhCount, constIdx(b, cfg.rowBlocks()));
  Value splits =
      options.splitKV > 0
          ? constIdx(b, options.splitKV)
          : splitCount(
                b, op, ctas,
                std::clamp<int64_t>(
                    chip.residentCTAs(cfg.smemBytes(spec.d, spec.dv)), 1, 8),
                nT);
  SplitPlan plan = planSplits(b, splits, nT);
  splits = plan.splits;
  Value tps = plan.tilesPerSplit, multi = plan.multi;
  // The partials, stream-ordered on the caller's stream.
  Value rowsTotal = arith::MulIOp::create(b, a.bhCount, a.lq);
  SplitPartials parts =
      allocSplitPartials(b, stream, splits, multi, rowsTotal, spec.dv);
  Value oPart = parts.out, lsePart = parts.lse;

  SmallVector<Value> args(a.args);
  args.append({oPart, lsePart, tps});
  Value grid = arith::MulIOp::create(b, kvbhCount, constIdx(b, cfg.rowBlocks()));
  launchOnStream(b, kernel, splits, grid, cfg.threads(),
                 cfg.smemBytes(spec.d, spec.dv), args, stream);
  combineAndFreePartials(b, combine, parts, a.args[3],
                         bufs.lse ? a.args[4] : Value(), sinks, splits, multi,
                         rowsTotal, stream);
  replaceWithDestinations(rewriter, op, bufs);
  return success();
}

namespace {
class SplitKVStrategy final : public KernelStrategy {
public:
  StringRef name() const override { return "splitkv"; }
  bool supports(AttentionOp op, const ChipInfo &chip,
                std::string &why) const override {
    if (!chip.hasMmaSync()) {
      why = "the split-KV kernel needs sm_80 or newer";
      return false;
    }
    if (!mmaSyncSupports(op, why))
      return false;
    FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
    return succeeded(spec) && succeeded(splitKVConfig(*spec, why));
  }
  bool autoSelects(AttentionOp op, const ChipInfo &chip) const override {
    if (wgmmaDecodePreferred(op, chip))
      return false;
    std::string why;
    FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
    if (failed(spec))
      return false;
    FailureOr<SplitKVConfig> cfg = splitKVConfig(*spec, why);
    if (failed(cfg))
      return false;
    if (cfg->group > 1)
      return cfg->rows <= kAutoMaxGroupedRows;
    if (cfg->rows <= kAutoMaxRows)
      return true;
    if (cfg->rows > kAutoMaxFewHeadRows)
      return false;
    // The prefill kernels' CTAs: one per (batch·head, 64 query rows) at
    // least; unknown (dynamic) batch sizes count as many.
    int64_t ctas = llvm::divideCeil(cfg->lq, 64);
    for (int64_t d = 0, e = op.getNumBatchDims(); d < e; ++d) {
      int64_t s = op.getQueryType().getDimSize(d);
      if (ShapedType::isDynamic(s))
        return false;
      ctas *= s;
    }
    return ctas < kAutoFewCTAs;
  }
  LogicalResult lower(RewriterBase &rewriter, AttentionOp op,
                      const OperandBuffers &bufs,
                      const GPUKernelOptions &options,
                      const ChipInfo &chip) const override {
    std::string why;
    FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
    FailureOr<SplitKVConfig> cfg =
        succeeded(spec) ? splitKVConfig(*spec, why, options.stages)
                        : FailureOr<SplitKVConfig>(failure());
    if (failed(cfg))
      return op.emitOpError("convert-flash-to-gpu: ") << why;
    return lowerToSplitKVLaunch(rewriter, op, bufs, *spec, *cfg, options,
                                chip);
  }
};
} // namespace

const KernelStrategy &gpu_lowering::splitKVStrategy() {
  static const SplitKVStrategy strategy;
  return strategy;
}

bool gpu_lowering::pagedAttentionSupported(PagedAttentionOp op,
                                           const GPUKernelOptions &options,
                                           const ChipInfo &chip,
                                           std::string &why) {
  if (options.kernel == "wgmma")
    return wgmmaSupportsPaged(op, chip, why);
  if (options.kernel != "auto" && options.kernel != "splitkv") {
    why = "a paged KV cache is read by the split-KV kernel or the wgmma "
          "kernel (kernel=auto, kernel=splitkv or kernel=wgmma), got kernel=" +
          options.kernel;
    return false;
  }
  if (options.kernel == "auto" && wgmmaPagedPreferred(op, chip))
    return true;
  if (!chip.hasMmaSync()) {
    why = "the split-KV kernel needs sm_80 or newer";
    return false;
  }
  RankedTensorType q = op.getQueryType();
  if (failed(mmaSyncShapeSupported(q.getElementType(),
                                   op.getKeyCacheType().getElementType(),
                                   op.getValueCacheType().getElementType(),
                                   q.getDimSize(3),
                                   op.getValueCacheType().getDimSize(3), why)))
    return false;
  FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
  return succeeded(spec) && succeeded(splitKVConfig(*spec, why));
}

LogicalResult gpu_lowering::lowerPagedAttention(RewriterBase &rewriter,
                                                PagedAttentionOp op,
                                                const OperandBuffers &bufs,
                                                const GPUKernelOptions &options,
                                                const ChipInfo &chip) {
  std::string why;
  if (!pagedAttentionSupported(op, options, chip, why))
    return op.emitOpError("convert-flash-to-gpu: ") << why;
  if (options.kernel == "wgmma" ||
      (options.kernel == "auto" && wgmmaPagedPreferred(op, chip)))
    return lowerPagedToWgmmaLaunch(rewriter, op, bufs, options, chip);
  FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
  FailureOr<SplitKVConfig> cfg = splitKVConfig(*spec, why, options.stages);
  if (failed(cfg))
    return op.emitOpError("convert-flash-to-gpu: ") << why;
  return lowerToSplitKVLaunch(rewriter, op, bufs, *spec, *cfg, options, chip);
}
