//===- WgmmaLaunch.cpp - host side and legality of the sm_90a strategy ----===//
//
// Builds, at the op's place in the host function, the TMA descriptors of Q,
// K and V (viewed as [batch·heads, L, D]), the run-time sizes and the
// asynchronous launch of the wgmma kernel on the caller's stream.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

/// The kernels' sinks argument: any count of the op's element type.
static MemRefType sinksArgType(Value sinks) {
  return MemRefType::get({ShapedType::kDynamic},
                         cast<MemRefType>(sinks.getType()).getElementType());
}

Value gpu_lowering::tmaDescriptor(ImplicitLocOpBuilder &b, Value m3,
                                  int64_t rows, bool packed) {
  return tmaDescriptor(b, m3,
                       packed ? SmallVector<int64_t>{rows, 1, 64}
                              : SmallVector<int64_t>{1, rows, 64});
}

/// A TMA descriptor of a boolean memref, its bytes as UINT8: what
/// nvgpu.tma.create.descriptor lowers to (the runtime's encoder called on
/// the unranked descriptor), with the data type NVGPU's lowering has no
/// entry for (it maps i1 to another type).
static Value byteTmaDescriptor(ImplicitLocOpBuilder &b, Value unranked,
                               ArrayRef<int64_t> boxShape,
                               int64_t swizzleBytes) {
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  auto fnTy = LLVM::LLVMFunctionType::get(
      ptrTy, {i64, ptrTy, i64, i64, i64, i64, i64, ptrTy});
  constexpr StringLiteral kEncoder = "mgpuTensorMapEncodeTiledMemref";
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  if (!module.lookupSymbol(kEncoder)) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(module.getBody());
    LLVM::LLVMFuncOp::create(b, kEncoder, fnTy);
  }
  auto descTy = LLVM::LLVMStructType::getLiteral(ctx, {i64, ptrTy});
  Value desc =
      UnrealizedConversionCastOp::create(b, TypeRange{descTy}, unranked)
          .getResult(0);
  Value rank = LLVM::ExtractValueOp::create(b, desc, 0);
  Value ranked = LLVM::ExtractValueOp::create(b, desc, 1);
  Value box =
      LLVM::AllocaOp::create(b, ptrTy, i64, constI64(b, boxShape.size()));
  for (auto [d, size] : llvm::enumerate(boxShape))
    LLVM::StoreOp::create(
        b, constI64(b, size),
        LLVM::GEPOp::create(b, ptrTy, i64, box,
                            ArrayRef<LLVM::GEPArg>{int32_t(d)}));
  // CU_TENSOR_MAP_DATA_TYPE_UINT8, no interleave, the 128- or 64-byte
  // swizzle (CU_TENSOR_MAP_SWIZZLE_128B = 3, _64B = 2), 256-byte L2
  // promotion, zeros out of bounds.
  int64_t swizzle = swizzleBytes == 128 ? 3 : 2;
  return LLVM::CallOp::create(b, fnTy, kEncoder,
                              ValueRange{rank, ranked, constI64(b, 0),
                                         constI64(b, 0), constI64(b, swizzle),
                                         constI64(b, 3), constI64(b, 0), box})
      .getResult();
}

Value gpu_lowering::tmaDescriptor(ImplicitLocOpBuilder &b, Value m,
                                  ArrayRef<int64_t> boxShape,
                                  int64_t swizzleBytes) {
  assert((swizzleBytes == 128 || swizzleBytes == 64) &&
         "the kernels read 128- or 64-byte swizzled rows");
  MLIRContext *ctx = b.getContext();
  auto t = cast<MemRefType>(m.getType());
  Type elem = t.getElementType();
  Value unranked =
      memref::CastOp::create(b, UnrankedMemRefType::get(elem, Attribute()), m);
  if (elem.isInteger(1))
    return byteTmaDescriptor(b, unranked, boxShape, swizzleBytes);
  auto box = MemRefType::get(boxShape, elem, MemRefLayoutAttrInterface(),
                             b.getI64IntegerAttr(3));
  auto descTy = nvgpu::TensorMapDescriptorType::get(
      ctx, box,
      swizzleBytes == 128 ? nvgpu::TensorMapSwizzleKind::SWIZZLE_128B
                          : nvgpu::TensorMapSwizzleKind::SWIZZLE_64B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  SmallVector<Value> dims;
  for (int64_t d : boxShape)
    dims.push_back(constIdx(b, d));
  Value desc = nvgpu::TmaCreateDescriptorOp::create(b, descTy, unranked, dims);
  // Kernels cannot take the descriptor type itself; pass the pointer.
  return UnrealizedConversionCastOp::create(
             b, TypeRange{LLVM::LLVMPointerType::get(ctx)}, ValueRange{desc})
      .getResult(0);
}

/// The configuration's shared memory (Q and the K/V ring) fits what one CTA
/// may request on `chip`, or an error naming the options that decide it.
static LogicalResult checkSharedMemory(Operation *op, const KernelConfig &cfg,
                                       const KernelSpec &spec,
                                       const ChipInfo &chip) {
  int64_t total = SmemLayout(cfg, spec).total;
  if (total <= chip.maxDynamicSmemPerBlock)
    return success();
  return op->emitOpError("convert-flash-to-gpu: the wgmma kernel's shared "
                         "memory (")
         << cfg.qBuffers << " Q buffer" << (cfg.qBuffers > 1 ? "s" : "")
         << " of " << cfg.blockM << " rows, " << cfg.stages << " stages of "
         << cfg.blockN << "-key K/V tiles at D = " << spec.headDim
         << ", Dv = " << spec.valueDim << ") is " << total
         << " bytes, more than the " << chip.maxDynamicSmemPerBlock
         << " a CTA may have: lower block-n, block-m, stages or q-buffers";
}

/// Stages what stageableCaptures allows where the ring still fits: one CTA
/// per SM as `cfg` plans (stage-captures=1 or -1). Staged tiles come before
/// an automatic second Q buffer, which gives way to them.
static void stageCaptures(const GPUKernelOptions &options, const ChipInfo &chip,
                          KernelConfig &cfg, KernelSpec &spec) {
  if (options.stageCaptures == 0)
    return;
  spec.staged = stageableCaptures(spec, cfg);
  auto fits = [&] {
    return chip.residentCTAs(SmemLayout(cfg, spec).total) >= cfg.ctasPerSM;
  };
  if (!spec.staged.empty() && !fits() && cfg.qBuffers == 2 &&
      options.qBuffers == 0) {
    cfg.qBuffers = 1;
    if (!fits())
      cfg.qBuffers = 2; // the tiles do not fit either way
  }
  if (!fits())
    spec.staged.clear();
}

/// `m3` with every size dynamic, so that tensors of other head dims share
/// its type.
static Value dynamicSizes(ImplicitLocOpBuilder &b, Value m3) {
  auto t = cast<MemRefType>(m3.getType());
  return memref::CastOp::create(
             b,
             MemRefType::get(SmallVector<int64_t>(3, ShapedType::kDynamic),
                             t.getElementType()),
             m3)
      .getResult();
}

std::pair<Value, Value> gpu_lowering::tensorsOrStandIns(ImplicitLocOpBuilder &b,
                                                        Value rows,
                                                        Value standIn, Value a,
                                                        Value b3) {
  Value none =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, rows, constIdx(b, 0));
  Value s = dynamicSizes(b, standIn);
  return {arith::SelectOp::create(b, none, s, dynamicSizes(b, a)),
          arith::SelectOp::create(b, none, s, dynamicSizes(b, b3))};
}

/// Any head dim up to 256 (the largest wgmma N for PV) whose rows are whole
/// 16-byte units, as TMA's strides must be: the tiles are rounded up to
/// 64-column panels and TMA fills the columns past D with zeros
/// (KernelSpec::panelD).
static bool isSupportedHeadDim(int64_t d) {
  return d >= 8 && d <= 256 && d % 8 == 0;
}

/// The element-type and head-dim rule of the wgmma kernel.
static bool wgmmaTypesSupported(Type q, Type k, Type v, Type o, int64_t d,
                                int64_t dv, std::string &why) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (!q.isBF16() && !q.isF16()) {
    os << "element type '" << q << "' is not supported (bf16 or f16)";
    why = s;
    return false;
  }
  if (k != q || v != q) {
    why = "query, key and value must share one element type";
    return false;
  }
  // The accumulator is f32: any float output is one conversion away.
  if (!o.isF32() && !o.isF16() && !o.isBF16()) {
    os << "output element type '" << o
       << "' is not supported (f32, f16 or bf16)";
    why = s;
    return false;
  }
  if (!isSupportedHeadDim(d) || !isSupportedHeadDim(dv)) {
    os << "head dims must be multiples of 8 up to 256, got D = " << d
       << ", Dv = " << dv;
    why = s;
    return false;
  }
  return true;
}

static bool wgmmaKernelSupports(AttentionOp op, std::string &why) {
  auto fail = [&](const Twine &msg) {
    why = msg.str();
    return false;
  };
  int64_t nb = op.getNumBatchDims();
  std::string s;
  llvm::raw_string_ostream os(s);
  if (!wgmmaTypesSupported(op.getQueryType().getElementType(),
                           op.getKeyType().getElementType(),
                           op.getValueType().getElementType(),
                           op.getOutputType().getElementType(),
                           op.getQueryType().getDimSize(nb + 1),
                           op.getValueType().getDimSize(nb + 1), why))
    return false;
  // TMA coordinates are 32-bit signed: the batch·head index and the row of
  // Q, K and V must stay below 2^31. A dynamic size cannot get there on a
  // card (2^31 rows of at least 128 B are 256 GB); a static one is refused
  // here, so kernel=auto takes the mma.sync kernel, whose indices are 64-bit.
  constexpr int64_t kTmaCoordLimit = int64_t(1) << 31;
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{
                                "query", op.getQueryType()},
                            {"key", op.getKeyType()}}) {
    int64_t bh = 1;
    for (int64_t i = 0; i < nb && bh < kTmaCoordLimit; ++i)
      bh = ShapedType::isDynamic(type.getDimSize(i))
               ? 1
               : bh * std::max<int64_t>(type.getDimSize(i), 1);
    int64_t rows = type.getDimSize(nb);
    if (bh >= kTmaCoordLimit ||
        (!ShapedType::isDynamic(rows) && rows >= kTmaCoordLimit)) {
      os << "the wgmma kernel's TMA coordinates are 32-bit: " << name << " "
         << type << " has a batch·head count or length of 2^31 or more";
      return fail(s);
    }
  }
  return true;
}

std::optional<WgmmaDecodeForm>
gpu_lowering::wgmmaDecodeForm(AttentionOp op, const GPUKernelOptions &options) {
  int64_t nb = op.getNumBatchDims();
  int64_t lq = op.getQueryType().getDimSize(nb);
  if (ShapedType::isDynamic(lq) || lq == 0)
    return std::nullopt;
  WgmmaDecodeForm form;
  int64_t hq = nb > 0 ? op.getQueryType().getDimSize(nb - 1) : 1;
  int64_t hkv = nb > 0 ? op.getKeyType().getDimSize(nb - 1) : 1;
  // Rows of one K/V head from several query heads make one tile:
  // [.., Hq, Lq, D] is [.., Hkv, G·Lq, D] in memory, so the kernel sees one
  // head of G·Lq rows and each K/V tile is read once per K/V head instead
  // of G times. A mask reads row r as query r mod Lq, a score_mod as query
  // r mod Lq of head bh·G + r / Lq (KernelSpec::packedGroup).
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) && hkv > 0 &&
      hq > hkv)
    form.group = hq / hkv;
  form.rows = form.group * lq;
  // Decode, speculative decode, a short chunk against a long cache (at most
  // one 64-row block per head); or a split asked for.
  if (lq > 64 && options.splitKV == 0)
    return std::nullopt;
  return form;
}

bool gpu_lowering::wgmmaDecodePreferred(AttentionOp op, const ChipInfo &chip) {
  std::string why;
  if (!chip.hasWgmma() || !wgmmaKernelSupports(op, why))
    return false;
  std::optional<WgmmaDecodeForm> form = wgmmaDecodeForm(op, GPUKernelOptions());
  // Measured beside the split kernel on the decode table at D = 128 (bench/
  // NOTES run 39): 1.14-2.3x at 16 rows per query head, -6..+24 % at one;
  // with a score_mod that masks (chunks, windows, sinks over a 32k cache,
  // run 52) 0.84-0.98x its kernel time. Wider heads and decode under a
  // structured mask stay with the split kernel until measured.
  int64_t nb = op.getNumBatchDims();
  int64_t d = op.getQueryType().getDimSize(nb + 1);
  int64_t dv = op.getValueType().getDimSize(nb + 1);
  return form && form->group > 1 && std::max(d, dv) <= 128 &&
         op.getMaskOrNone().isNone();
}

/// `m` [b..., Hq, Lq, D] (a contiguous buffer, as the destination form's
/// are) viewed as [B·Hkv, G·Lq, D].
static Value packedRows(ImplicitLocOpBuilder &b, Value m, int64_t nb,
                        Value bh, Value rows) {
  auto t = cast<MemRefType>(m.getType());
  int64_t width = t.getDimSize(t.getRank() - 1);
  SmallVector<ReassociationIndices> all(1);
  for (int64_t i = 0; i <= nb; ++i)
    all[0].push_back(i);
  all.push_back({nb + 1});
  Value flat = memref::CollapseShapeOp::create(b, m, all);
  flat = memref::CastOp::create(
      b, MemRefType::get({ShapedType::kDynamic, width}, t.getElementType()),
      flat);
  auto view = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, width},
                              t.getElementType());
  return memref::ExpandShapeOp::create(
      b, view, flat, ArrayRef<ReassociationIndices>{{0, 1}, {2}},
      ArrayRef<OpFoldResult>{bh, rows, b.getIndexAttr(width)});
}

/// The combine kernel of the decode form, writing `o3` [rows, Dv] and
/// `lse2` (null without an LSE result).
static gpu::GPUFuncOp buildDecodeCombine(OpBuilder &ob, Location loc,
                                         gpu::GPUModuleOp gmod, Type outElem,
                                         int64_t dv, Value o3, Value lse2,
                                         Type sinksType = Type()) {
  MemrefKernelSpec cspec;
  cspec.dv = dv;
  cspec.hasLse = lse2 != nullptr;
  cspec.hasSinks = sinksType != nullptr;
  cspec.oElem = outElem;
  return buildSplitKVCombineKernel(
      ob, loc, gmod, cspec,
      splitCombineArgTypes(ob.getContext(), dv, o3.getType(),
                           lse2 ? lse2.getType() : Type(), sinksType));
}

/// Whether the decode form merges its splits in its last CTA (fused-combine).
/// That CTA merges its rows a warp per row once every split has arrived: a
/// chain of dependent loads per row and split, where the combine kernel
/// spreads rows and splits over many CTAs. So automatic fuses only at one row
/// per warp of the consumer warpgroup (G·Lq <= 4) and with at least 8 K/V
/// heads in all (B·Hkv, static), which keeps the run-time split count near or
/// below 33 on the H200. Measured there (bench/NOTES run 48): 0.8-4.3 us
/// saved at 4 rows and 8+ heads; 9 us lost at 8 rows and 128 splits, 20 us at
/// 64 rows and 16 splits.
static bool fusedCombine(const GPUKernelOptions &options, int64_t rows,
                         int64_t kvHeads) {
  constexpr int64_t kMaxFusedRows = 4, kMinFusedKVHeads = 8;
  if (options.fusedCombine >= 0)
    return options.fusedCombine == 1;
  return rows <= kMaxFusedRows && !ShapedType::isDynamic(kvHeads) &&
         kvHeads >= kMinFusedKVHeads;
}

/// Launches the decode form: `gx` query blocks of `kBh` heads of `kLq` rows,
/// times the splits of `keyTiles` key tiles (chosen as the split-KV
/// strategy chooses them, with the CTAs this kernel keeps resident per SM),
/// then the combine of the f32 partials into `o3` and `lse2` (`combine`), or
/// with spec.fusedCombine (no `combine`) the kernel's last CTA per row block
/// merges them, counting arrivals in the runtime's counters.
static void launchDecodeForm(ImplicitLocOpBuilder &b, Operation *op,
                             gpu::GPUFuncOp kernel, gpu::GPUFuncOp combine,
                             const KernelConfig &cfg, const KernelSpec &spec,
                             const GPUKernelOptions &options,
                             const ChipInfo &chip, SmallVector<Value> args,
                             Value gx, Value kBh, Value kLq, Value keyTiles,
                             Value o3, Value lse2, Value sinks, Value stream) {
  SmemLayout layout(cfg, spec);
  int64_t resident =
      std::clamp<int64_t>(chip.residentCTAs(layout.total), 1, cfg.ctasPerSM);
  Value splits = options.splitKV > 0
                     ? constIdx(b, options.splitKV)
                     : splitCount(b, op, arith::MulIOp::create(b, gx, kBh),
                                  resident, keyTiles);
  SplitPlan plan = planSplits(b, splits, keyTiles);
  Value rowsTotal = arith::MulIOp::create(b, kBh, kLq);
  SplitPartials parts = allocSplitPartials(b, stream, plan.splits, plan.multi,
                                           rowsTotal, spec.valueDim);
  args.append({dataPointer(b, parts.out), dataPointer(b, parts.lse),
               plan.splits, plan.tilesPerSplit});
  if (spec.fusedCombine)
    args.push_back(
        splitCounters(b, op, stream, arith::MulIOp::create(b, gx, kBh)));
  launchOnStream(b, kernel, arith::MulIOp::create(b, gx, plan.splits), kBh,
                 cfg.threads(), layout.total, args, stream);
  if (spec.fusedCombine)
    freeSplitPartials(b, parts);
  else
    combineAndFreePartials(b, combine, parts, o3, lse2, sinks, plan.splits,
                           plan.multi, rowsTotal, stream);
}

static LogicalResult lowerToWgmmaLaunch(RewriterBase &rewriter, AttentionOp op,
                                        const OperandBuffers &bufs,
                                        const GPUKernelOptions &options,
                                        const ChipInfo &chip) {
  Location loc = op.getLoc();
  int64_t nb = op.getNumBatchDims();
  Type elem = op.getQueryType().getElementType();
  Value stream = streamArgument(op);
  int64_t d = op.getQueryType().getDimSize(nb + 1);
  int64_t dv = op.getValueType().getDimSize(nb + 1);
  Value q = bufs.q, k = bufs.k, v = bufs.v, o = bufs.out, lse = bufs.lse;
  ArrayRef<Value> captures = bufs.captures;

  KernelSpec spec;
  spec.elemType = elem;
  spec.outElemType = op.getOutputType().getElementType();
  spec.headDim = d;
  spec.valueDim = dv;
  spec.queryLen = op.getQueryType().getDimSize(nb);
  spec.keyLen = op.getKeyType().getDimSize(nb);
  ArrayRef<int64_t> qBatch = op.getQueryType().getShape().take_front(nb);
  if (!llvm::any_of(qBatch, ShapedType::isDynamic))
    spec.batchHeads = computeProduct(qBatch);
  spec.numBatchDims = nb;
  spec.mask = op.getMaskOrNone();
  spec.hasLse = op.hasLse();
  spec.scale = op.getScale().convertToDouble();
  if (op.hasScoreMod())
    spec.scoreMod = &op.getScoreMod();
  for (Value c : captures)
    spec.captureTypes.push_back(cast<MemRefType>(c.getType()));
  if (bufs.sinks)
    spec.sinksType = sinksArgType(bufs.sinks);
  std::optional<WgmmaDecodeForm> decode = wgmmaDecodeForm(op, options);
  spec.splitKV = decode.has_value();
  spec.decodeRows = decode ? decode->rows : 0;
  ArrayRef<int64_t> kvBatch = op.getKeyType().getShape().take_front(nb);
  int64_t kvHeads = llvm::any_of(kvBatch, ShapedType::isDynamic)
                        ? ShapedType::kDynamic
                        : computeProduct(kvBatch);
  spec.fusedCombine =
      spec.splitKV && fusedCombine(options, spec.decodeRows, kvHeads);
  int64_t group = decode ? decode->group : 1;
  spec.packedGroup = group;

  KernelConfig cfg = resolveWgmmaConfig(options, chip, spec);
  if (failed(checkSharedMemory(op, cfg, spec, chip)))
    return failure();
  stageCaptures(options, chip, cfg, spec);
  // A staged read is a shared-memory load: issued early it only holds
  // registers (a boolean mask measured 0.06-0.13 of the plain kernel's
  // speed slower with it, a bias within ±0.03; bench/NOTES run 57).
  if (!spec.staged.empty() && options.scorePrefetch == -1)
    cfg.scorePrefetch = false;

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(loc, rewriter);
  // The combine's out and lse as [batch·heads, Lq, Dv] and [batch·heads, Lq].
  Value o3 = spec.splitKV ? collapseBatchDims(b, o, nb) : Value();
  Value lse2 = spec.splitKV && lse ? collapseBatchDims(b, lse, nb) : Value();
  gpu::GPUModuleOp gmod = newKernelModule(rewriter, op);
  gpu::GPUFuncOp kernel = buildWgmmaKernel(rewriter, loc, gmod, cfg, spec);
  gpu::GPUFuncOp combine =
      spec.splitKV && !spec.fusedCombine
          ? buildDecodeCombine(rewriter, loc, gmod, spec.outElemType, dv, o3,
                               lse2, spec.sinksType)
          : gpu::GPUFuncOp();

  // Host side.
  rewriter.setInsertionPoint(op);
  Value lq = memref::DimOp::create(b, q, nb);
  Value lk = memref::DimOp::create(b, k, nb);
  Value hkv = nb > 0 ? memref::DimOp::create(b, k, nb - 1).getResult()
                     : constIdx(b, 1);
  Value bhCount = constIdx(b, 1);
  SmallVector<Value> batchSizes;
  for (int64_t i = 0; i < nb; ++i) {
    batchSizes.push_back(memref::DimOp::create(b, q, i));
    bhCount = arith::MulIOp::create(b, bhCount, batchSizes.back());
  }

  // No query row or no head: nothing to write. No key (Lk = 0) still
  // launches, so that every row writes 0 and lse = -inf; a TMA descriptor
  // needs a non-empty tensor, so K and V are then described by Q and O,
  // which have the same inner dims and are never read (no tile is visible).
  Value zero = constIdx(b, 0);
  Value nonEmpty = arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, lq, zero),
      arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, bhCount, zero));
  auto ifLaunch = scf::IfOp::create(b, nonEmpty, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifLaunch.thenBlock());
    // The kernel's view: with GQA rows packed, one head of G·Lq rows per
    // K/V head (the kernel's batch sizes end in Hkv, so it pairs head h
    // with K/V head h).
    Value kLq = lq, kBh = bhCount;
    SmallVector<Value> kBatch(batchSizes);
    Value q3;
    if (group > 1) {
      kLq = arith::MulIOp::create(b, lq, constIdx(b, group));
      kBh = arith::DivUIOp::create(b, bhCount, constIdx(b, group));
      kBatch.back() = hkv;
      q3 = packedRows(b, q, nb, kBh, kLq);
    } else {
      q3 = collapseBatchDims(b, q, nb);
    }
    auto [k3, v3] = tensorsOrStandIns(b, lk, q3, collapseBatchDims(b, k, nb),
                                      collapseBatchDims(b, v, nb));
    SmallVector<Value> args = {tmaDescriptor(b, q3, cfg.blockM),
                               tmaDescriptor(b, k3, cfg.blockN),
                               tmaDescriptor(b, v3, cfg.blockN), dataPointer(b, o)};
    if (op.hasLse())
      args.push_back(dataPointer(b, lse));
    args.append({kLq, lk, hkv});
    args.append(kBatch.begin(), kBatch.end());
    args.append(captures.begin(), captures.end());
    for (const StagedCapture &c : spec.staged) {
      int64_t rank = cast<MemRefType>(captures[c.capture].getType()).getRank();
      SmallVector<int64_t> box(rank - 2, 1);
      box.append({cfg.blockM, c.panelKeys()});
      args.push_back(tmaDescriptor(b, captures[c.capture], box));
    }
    Value sinks;
    if (bufs.sinks) {
      sinks = memref::CastOp::create(b, spec.sinksType, bufs.sinks);
      args.push_back(sinks);
    }
    Value gx = arith::CeilDivSIOp::create(b, kLq, constIdx(b, cfg.blockM));
    if (cfg.persistent) {
      // As many CTAs as are resident at once, none without a work item.
      Value items = arith::MulIOp::create(b, gx, kBh);
      Value resident = arith::MulIOp::create(
          b, multiprocessorCount(b, op), constIdx(b, cfg.ctasPerSM));
      // The work counter and the CTAs' exit count: two i32 of the stream's
      // counters, zero at the launch; the last CTA to finish zeroes them
      // again, so a launch costs no memset.
      args.push_back(splitCounters(b, op, stream, constIdx(b, 2)));
      launchOnStream(b, kernel, arith::MinSIOp::create(b, items, resident),
                     constIdx(b, 1), cfg.threads(),
                     SmemLayout(cfg, spec).total, args, stream);
    } else if (!spec.splitKV) {
      launchOnStream(b, kernel, gx, kBh, cfg.threads(),
                     SmemLayout(cfg, spec).total, args, stream);
    } else {
      launchDecodeForm(
          b, op, kernel, combine, cfg, spec, options, chip, args, gx, kBh, kLq,
          arith::CeilDivSIOp::create(b, lk, constIdx(b, cfg.blockN)), o3, lse2,
          sinks, stream);
    }
  }

  replaceWithDestinations(rewriter, op, bufs);
  return success();
}

bool gpu_lowering::wgmmaSupportsVarlen(VarlenAttentionOp op,
                                       const ChipInfo &chip,
                                       std::string &why) {
  if (!chip.hasWgmma()) {
    why = "the wgmma kernel needs chip sm_90a";
    return false;
  }
  RankedTensorType q = op.getQueryType(), k = op.getKeyType();
  if (!wgmmaTypesSupported(q.getElementType(), k.getElementType(),
                           op.getValueType().getElementType(),
                           op.getOutputType().getElementType(), q.getDimSize(2),
                           op.getValueType().getDimSize(2), why))
    return false;
  // TMA coordinates are 32-bit signed (as wgmmaKernelSupports says).
  constexpr int64_t kTmaCoordLimit = int64_t(1) << 31;
  for (RankedTensorType t : {q, k})
    for (int64_t d = 0; d < 2; ++d)
      if (!ShapedType::isDynamic(t.getDimSize(d)) &&
          t.getDimSize(d) >= kTmaCoordLimit) {
        why = "the wgmma kernel's TMA coordinates are 32-bit: a packed "
              "batch of 2^31 tokens or heads or more";
        return false;
      }
  return true;
}

LogicalResult gpu_lowering::lowerVarlenToWgmmaLaunch(
    RewriterBase &rewriter, VarlenAttentionOp op, const OperandBuffers &bufs,
    const GPUKernelOptions &options, const ChipInfo &chip) {
  Location loc = op.getLoc();
  Value stream = streamArgument(op);
  KernelSpec spec;
  spec.elemType = op.getQueryType().getElementType();
  spec.outElemType = op.getOutputType().getElementType();
  spec.headDim = op.getQueryType().getDimSize(2);
  spec.valueDim = op.getValueType().getDimSize(2);
  spec.numBatchDims = 1;
  spec.mask = op.getMaskOrNone();
  spec.hasLse = op.hasLse();
  spec.scale = op.getScale().convertToDouble();
  spec.varlen = true;
  if (bufs.sinks)
    spec.sinksType = sinksArgType(bufs.sinks);
  KernelConfig cfg = resolveWgmmaConfig(options, chip, spec);
  if (failed(checkSharedMemory(op, cfg, spec, chip)))
    return failure();

  OpBuilder::InsertionGuard guard(rewriter);
  gpu::GPUModuleOp gmod = newKernelModule(rewriter, op);
  gpu::GPUFuncOp kernel = buildWgmmaKernel(rewriter, loc, gmod, cfg, spec);

  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(loc, rewriter);
  Value tq = memref::DimOp::create(b, bufs.q, 0);
  Value tk = memref::DimOp::create(b, bufs.k, 0);
  Value hq = memref::DimOp::create(b, bufs.q, 1);
  Value hkv = memref::DimOp::create(b, bufs.k, 1);
  Value sequences = arith::MaxSIOp::create(
      b,
      arith::SubIOp::create(b, memref::DimOp::create(b, bufs.cuSeqlensQ, 0),
                            constIdx(b, 1)),
      constIdx(b, 0));
  Value zero = constIdx(b, 0);
  Value nonEmpty = arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, tq, zero),
      arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, hq, zero));
  auto ifLaunch = scf::IfOp::create(b, nonEmpty, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifLaunch.thenBlock());
    auto dynamic1 = [&](Value m) {
      return memref::CastOp::create(
                 b, MemRefType::get({ShapedType::kDynamic}, b.getI32Type()), m)
          .getResult();
    };
    // No key token at all: every sequence has Lk = 0.
    auto [k3, v3] = tensorsOrStandIns(b, tk, bufs.q, bufs.k, bufs.v);
    SmallVector<Value> args = {
        tmaDescriptor(b, bufs.q, cfg.blockM, /*packed=*/true),
        tmaDescriptor(b, k3, cfg.blockN, /*packed=*/true),
        tmaDescriptor(b, v3, cfg.blockN, /*packed=*/true), dataPointer(b, bufs.out)};
    if (bufs.lse)
      args.push_back(dataPointer(b, bufs.lse));
    args.append({tq, tk, hkv, hq});
    // The kernel's order: the sinks after the batch sizes (the heads), the
    // offsets last.
    if (bufs.sinks)
      args.push_back(memref::CastOp::create(b, spec.sinksType, bufs.sinks));
    args.append({dynamic1(bufs.cuSeqlensQ), dynamic1(bufs.cuSeqlensK)});
    // Each sequence ends in at most one partial block.
    Value gx = arith::AddIOp::create(
        b, arith::CeilDivSIOp::create(b, tq, constIdx(b, cfg.blockM)),
        sequences);
    SmemLayout layout(cfg, spec);
    launchOnStream(b, kernel, gx, hq, cfg.threads(), layout.total, args,
                   stream);
  }
  replaceWithDestinations(rewriter, op, bufs);
  return success();
}

bool gpu_lowering::wgmmaSupportsPaged(PagedAttentionOp op,
                                      const ChipInfo &chip, std::string &why) {
  if (!chip.hasWgmma()) {
    why = "the wgmma kernel needs chip sm_90a";
    return false;
  }
  RankedTensorType q = op.getQueryType(), kc = op.getKeyCacheType(),
                   vc = op.getValueCacheType();
  if (!wgmmaTypesSupported(q.getElementType(), kc.getElementType(),
                           vc.getElementType(),
                           op.getOutputType().getElementType(), q.getDimSize(3),
                           vc.getDimSize(3), why))
    return false;
  std::string s;
  llvm::raw_string_ostream os(s);
  // The packed view [B·Hkv, G·Lq, D] of Q is fixed when the kernel is built.
  if (q.isDynamicDim(1) || q.isDynamicDim(2) || kc.isDynamicDim(2)) {
    why = "the wgmma kernel reads a paged cache with static query heads, "
          "query length and K/V heads";
    return false;
  }
  int64_t pageSize = op.getPageSize();
  if (ShapedType::isDynamic(pageSize) || pageSize % 16 != 0) {
    os << "the wgmma kernel reads pages of a multiple of 16 keys (whole "
          "swizzle atoms per TMA box), got page size "
       << (ShapedType::isDynamic(pageSize) ? std::string("?")
                                           : std::to_string(pageSize));
    why = s;
    return false;
  }
  // TMA coordinates are 32-bit signed (as wgmmaKernelSupports says): the
  // pool's token rows and the packed query heads.
  constexpr int64_t kTmaCoordLimit = int64_t(1) << 31;
  int64_t pages = kc.getDimSize(0);
  int64_t batch = q.getDimSize(0);
  if ((!ShapedType::isDynamic(pages) &&
       pages * pageSize >= kTmaCoordLimit) ||
      (!ShapedType::isDynamic(batch) &&
       batch * kc.getDimSize(2) >= kTmaCoordLimit)) {
    why = "the wgmma kernel's TMA coordinates are 32-bit: a page pool of "
          "2^31 keys or more, or 2^31 sequence·heads";
    return false;
  }
  return true;
}

bool gpu_lowering::wgmmaPagedPreferred(PagedAttentionOp op,
                                       const ChipInfo &chip) {
  std::string why;
  if (!wgmmaSupportsPaged(op, chip, why))
    return false;
  // As wgmmaDecodePreferred: heads that pack, D <= 128, no mask.
  RankedTensorType q = op.getQueryType();
  int64_t hkv = op.getKeyCacheType().getDimSize(2);
  return q.getDimSize(1) > hkv &&
         std::max(q.getDimSize(3), op.getValueCacheType().getDimSize(3)) <=
             128 &&
         op.getMaskOrNone().isNone();
}

LogicalResult gpu_lowering::lowerPagedToWgmmaLaunch(
    RewriterBase &rewriter, PagedAttentionOp op, const OperandBuffers &bufs,
    const GPUKernelOptions &options, const ChipInfo &chip) {
  Location loc = op.getLoc();
  Value stream = streamArgument(op);
  RankedTensorType qType = op.getQueryType();
  Type elem = qType.getElementType();
  int64_t hq = qType.getDimSize(1), lqStatic = qType.getDimSize(2);
  int64_t hkvStatic = op.getKeyCacheType().getDimSize(2);
  int64_t group = hq / hkvStatic;
  int64_t dv = op.getValueCacheType().getDimSize(3);
  KernelSpec spec;
  spec.elemType = elem;
  spec.outElemType = op.getOutputType().getElementType();
  spec.headDim = qType.getDimSize(3);
  spec.valueDim = dv;
  spec.numBatchDims = 2;
  spec.mask = op.getMaskOrNone();
  spec.hasLse = op.hasLse();
  spec.scale = op.getScale().convertToDouble();
  spec.splitKV = true;
  spec.packedGroup = group;
  spec.decodeRows = group * lqStatic;
  int64_t batchStatic = qType.getDimSize(0);
  spec.fusedCombine = fusedCombine(
      options, spec.decodeRows,
      ShapedType::isDynamic(batchStatic) ? ShapedType::kDynamic
                                         : batchStatic * hkvStatic);
  spec.pageSize = op.getPageSize();
  if (op.hasScoreMod())
    spec.scoreMod = &op.getScoreMod();
  for (Value c : bufs.captures)
    spec.captureTypes.push_back(cast<MemRefType>(c.getType()));
  if (bufs.sinks)
    spec.sinksType = sinksArgType(bufs.sinks);
  KernelConfig cfg = resolveWgmmaConfig(options, chip, spec);
  if (failed(checkSharedMemory(op, cfg, spec, chip)))
    return failure();

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(loc, rewriter);
  Value o3 = collapseBatchDims(b, bufs.out, 2);
  Value lse2 = bufs.lse ? collapseBatchDims(b, bufs.lse, 2) : Value();
  gpu::GPUModuleOp gmod = newKernelModule(rewriter, op);
  gpu::GPUFuncOp kernel = buildWgmmaKernel(rewriter, loc, gmod, cfg, spec);
  gpu::GPUFuncOp combine =
      spec.fusedCombine
          ? gpu::GPUFuncOp()
          : buildDecodeCombine(rewriter, loc, gmod, spec.outElemType, dv, o3,
                               lse2, spec.sinksType);

  rewriter.setInsertionPoint(op);
  Value zero = constIdx(b, 0);
  Value batch = memref::DimOp::create(b, bufs.q, 0);
  Value hkv = constIdx(b, hkvStatic);
  Value kBh = arith::MulIOp::create(b, batch, hkv);
  Value kLq = constIdx(b, group * lqStatic);
  Value numPages = memref::DimOp::create(b, bufs.k, 0);
  Value capacity = arith::MulIOp::create(
      b, memref::DimOp::create(b, bufs.blockTable, 1),
      constIdx(b, spec.pageSize));
  Value nonEmpty = arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, kLq, zero),
      arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, kBh, zero));
  auto ifLaunch = scf::IfOp::create(b, nonEmpty, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifLaunch.thenBlock());
    Value q3 = packedRows(b, bufs.q, 2, kBh, kLq);
    // The pools as [pages·page_size, Hkv, D] token rows; an empty pool
    // (nothing is read: every length counts as 0) is described by Q.
    auto pool = [&](Value m) {
      return memref::CollapseShapeOp::create(
                 b, m, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}})
          .getResult();
    };
    auto [k3, v3] =
        tensorsOrStandIns(b, numPages, q3, pool(bufs.k), pool(bufs.v));
    int64_t box = pagedBoxRows(cfg, spec);
    SmallVector<Value> args = {
        tmaDescriptor(b, q3, cfg.blockM),
        tmaDescriptor(b, k3, box, /*packed=*/true),
        tmaDescriptor(b, v3, box, /*packed=*/true), dataPointer(b, bufs.out)};
    if (bufs.lse)
      args.push_back(dataPointer(b, bufs.lse));
    args.append({kLq, capacity, hkv, batch, hkv});
    // The kernel's order: the captures and the sinks after the batch sizes,
    // the pages last.
    args.append(bufs.captures.begin(), bufs.captures.end());
    Value sinks;
    if (bufs.sinks) {
      sinks = memref::CastOp::create(b, spec.sinksType, bufs.sinks);
      args.push_back(sinks);
    }
    args.push_back(memref::CastOp::create(
        b,
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                        b.getI32Type()),
        bufs.blockTable));
    args.push_back(memref::CastOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getI32Type()),
        bufs.seqLens));
    args.push_back(numPages);
    Value gx = arith::CeilDivSIOp::create(b, kLq, constIdx(b, cfg.blockM));
    launchDecodeForm(
        b, op, kernel, combine, cfg, spec, options, chip, args, gx, kBh, kLq,
        arith::CeilDivSIOp::create(b, capacity, constIdx(b, cfg.blockN)), o3,
        lse2, sinks, stream);
  }
  replaceWithDestinations(rewriter, op, bufs);
  return success();
}

namespace {
class WgmmaStrategy final : public KernelStrategy {
public:
  StringRef name() const override { return "wgmma"; }
  bool supports(AttentionOp op, const ChipInfo &chip,
                std::string &why) const override {
    if (!chip.hasWgmma()) {
      why = "the wgmma kernel needs chip sm_90a";
      return false;
    }
    return wgmmaKernelSupports(op, why);
  }
  LogicalResult lower(RewriterBase &rewriter, AttentionOp op,
                      const OperandBuffers &bufs,
                      const GPUKernelOptions &options,
                      const ChipInfo &chip) const override {
    return lowerToWgmmaLaunch(rewriter, op, bufs, options, chip);
  }
};
} // namespace

const KernelStrategy &gpu_lowering::wgmmaStrategy() {
  static const WgmmaStrategy strategy;
  return strategy;
}
