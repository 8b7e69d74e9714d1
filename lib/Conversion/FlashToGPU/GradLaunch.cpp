//===- GradLaunch.cpp - host side of the flash.attention_grad kernels -----===//
//
// Which ops the backward kernels take, their layout, and the launch
// sequence on the caller's stream: the row buffers and the f32 dQ
// accumulator allocated stream-ordered, `prep` (delta, lse·log2 e, a zeroed
// accumulator), the key-block kernel, `dq` (scale and round), and the
// buffers freed, so the backward holds O(L·D) memory beyond its operands.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"
#include "MmaSyncPrimitives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

FailureOr<GradOperandBuffers>
gpu_lowering::gradOperandBuffers(AttentionGradOp op) {
  GradOperandBuffers bufs;
  std::tuple<Value, StringRef, Value *> operands[] = {
      {op.getQuery(), "query", &bufs.q},
      {op.getKey(), "key", &bufs.k},
      {op.getValue(), "value", &bufs.v},
      {op.getOut(), "out", &bufs.o},
      {op.getGradOut(), "grad_out", &bufs.dO},
      {op.getLse(), "lse", &bufs.lse},
      {op.getGradQueryInit(), "dq init", &bufs.dq},
      {op.getGradKeyInit(), "dk init", &bufs.dk},
      {op.getGradValueInit(), "dv init", &bufs.dv}};
  for (auto [t, what, dst] : operands) {
    FailureOr<Value> m = deviceBuffer(op, t, what);
    if (failed(m))
      return failure();
    *dst = *m;
  }
  for (Value c : op.getCaptures()) {
    FailureOr<Value> m = deviceBuffer(op, c, "capture");
    if (failed(m))
      return failure();
    bufs.captures.push_back(*m);
  }
  // A capture gradient nobody reads is not computed: no buffer behind it.
  for (auto [n, init] : llvm::enumerate(op.getInits().drop_front(3))) {
    if (op->getResult(3 + n).use_empty()) {
      bufs.captureGrads.push_back(Value());
      continue;
    }
    FailureOr<Value> m = deviceBuffer(op, init, "capture gradient init");
    if (failed(m))
      return failure();
    bufs.captureGrads.push_back(*m);
  }
  if (op.hasScoreMod() &&
      failed(checkCaptureReads(op.getScoreMod(), op.getNumBatchDims())))
    return failure();
  return bufs;
}

/// `m` (contiguous) as a 1-D memref<?x...>.
static Value flatView(ImplicitLocOpBuilder &b, Value m) {
  auto t = cast<MemRefType>(m.getType());
  Value flat = m;
  if (t.getRank() == 0) {
    flat = memref::ExpandShapeOp::create(
        b, MemRefType::get({1}, t.getElementType()), m,
        ArrayRef<ReassociationIndices>{}, ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  } else if (t.getRank() > 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < t.getRank(); ++d)
      all.push_back(d);
    flat = memref::CollapseShapeOp::create(b, m, ArrayRef<ReassociationIndices>{all});
  }
  return memref::CastOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, t.getElementType()), flat);
}

/// Whether the sm_90a kernel takes `cfg` (element type and head dims read)
/// under `options`; otherwise `why` says why.
static bool gradWgmmaFits(const GradKernelConfig &cfg,
                          const GPUKernelOptions &options, const ChipInfo &chip,
                          std::string &why) {
  auto fail = [&](const Twine &msg) {
    why = ("the wgmma flash.attention_grad kernel " + msg).str();
    return false;
  };
  if (!chip.hasWgmma())
    return fail("needs chip sm_90a");
  // Whole 64-column panels; dK, dV, Sᵀ and dPᵀ of 64 keys in registers.
  if (!((cfg.d == 64 && cfg.dv == 64) || (cfg.d == 128 && cfg.dv == 128) ||
        (cfg.d == 128 && cfg.dv == 64)))
    return fail("takes D = Dv = 64, D = Dv = 128 or D = 128 with Dv = 64, "
                "got D = " +
                Twine(cfg.d) + ", Dv = " + Twine(cfg.dv));
  if (options.gradDeterministic)
    return fail("has no grad-deterministic order yet (kernel=mma has)");
  if (options.gradDq == "atomic")
    return fail("adds dQ by bulk reductions only (grad-dq=auto or bulk)");
  if (options.gradBlockK > 0 || options.gradBlockQ > 0)
    return fail("chooses its own blocks (grad-block-k and grad-block-q are "
                "the mma kernel's)");
  return true;
}

FailureOr<GradKernelConfig>
gpu_lowering::gradKernelConfig(AttentionGradOp op,
                               const GPUKernelOptions &options,
                               const ChipInfo &chip, std::string &why) {
  auto fail = [&](const Twine &msg) {
    why = msg.str();
    return failure();
  };
  if (options.kernel != "auto" && options.kernel != "mma" &&
      options.kernel != "wgmma")
    return fail("flash.attention_grad has the wgmma and mma kernels "
                "(kernel=auto, wgmma or mma), got kernel=" +
                options.kernel);
  if (!chip.hasMmaSync())
    return fail("the flash.attention_grad kernel needs sm_80 or newer");
  int64_t nb = op.getNumBatchDims();
  GradKernelConfig cfg;
  if (op.hasScoreMod()) {
    cfg.scoreMod = &op.getScoreMod();
    // Float captures whose gradient is read (the results after dq, dk, dv).
    unsigned result = 3;
    for (Value c : op.getCaptures()) {
      bool isFloat =
          isa<FloatType>(cast<ShapedType>(c.getType()).getElementType());
      cfg.captureHasGrad.push_back(isFloat &&
                                   !op->getResult(result).use_empty());
      result += isFloat;
    }
  }
  cfg.elem = op.getQueryType().getElementType();
  if (!cfg.elem.isBF16() && !cfg.elem.isF16())
    return fail("the flash.attention_grad kernel needs bf16 or f16 operands");
  Value sameType[] = {op.getKey(),           op.getValue(),
                      op.getOut(),           op.getGradOut(),
                      op.getGradQueryInit(), op.getGradKeyInit(),
                      op.getGradValueInit()};
  for (Value t : sameType)
    if (cast<ShapedType>(t.getType()).getElementType() != cfg.elem)
      return fail("query, key, value, out, grad_out, dq, dk and dv must have "
                  "one element type");
  cfg.d = op.getQueryType().getDimSize(nb + 1);
  cfg.dv = op.getValueType().getDimSize(nb + 1);
  // D and Dv are the k of Sᵀ = K Qᵀ and dPᵀ = V dOᵀ (steps of 16); dK and
  // dV live in registers for the whole walk, which bounds a CTA's share of
  // their columns at 128: wider heads split them over two CTAs per key
  // block (both recompute S and dP), each a multiple of 16.
  if (ShapedType::isDynamic(cfg.d) || ShapedType::isDynamic(cfg.dv) ||
      cfg.d % 16 || cfg.dv % 16 || cfg.d > 256 || cfg.dv > 256 ||
      ((cfg.d > 128 || cfg.dv > 128) && (cfg.d % 32 || cfg.dv % 32)))
    return fail("the flash.attention_grad kernel needs static head dims D "
                "and Dv that are multiples of 16 up to 128, or of 32 up to "
                "256, got D = " +
                Twine(cfg.d) + ", Dv = " + Twine(cfg.dv));
  if (cfg.d > 128 || cfg.dv > 128)
    cfg.colSplit = 2;
  cfg.mask = op.getMaskOrNone();
  cfg.scale = op.getScale().convertToDouble();
  int64_t lqStatic = op.getQueryType().getDimSize(nb),
          lkStatic = op.getKeyType().getDimSize(nb);
  if (!ShapedType::isDynamic(lqStatic) && !ShapedType::isDynamic(lkStatic))
    cfg.indexBound = std::max(lqStatic, lkStatic);
  std::string wgmmaWhy;
  bool wgmmaFits = gradWgmmaFits(cfg, options, chip, wgmmaWhy);
  if (options.kernel == "wgmma" && !wgmmaFits)
    return fail(wgmmaWhy);
  if (wgmmaFits && options.kernel != "mma") {
    cfg.wgmma = true;
    cfg.blockKeys = 128;
    // 64 query rows at D = 128 keep Sᵀ, dPᵀ, dK and dV in the consumers'
    // registers; at D = 64 there is room for 128.
    cfg.blockQueries = cfg.d == 64 ? 128 : 64;
    cfg.bulkReduceDq = true;
    cfg.stageCaptures = options.stageCaptures != 0;
    return cfg;
  }
  // Wide heads hold full-width K, V, Q and dO tiles in shared memory: 64
  // keys and 32 query rows per step keep them within it.
  bool wide = cfg.colSplit > 1;
  cfg.blockKeys =
      options.gradBlockK > 0 ? options.gradBlockK : (wide ? 64 : 128);
  cfg.blockQueries =
      options.gradBlockQ > 0 ? options.gradBlockQ : (wide ? 32 : 64);
  // dQ of a block is split over the warps in 16-row tiles and equal column
  // shares of whole pairs of m16n8 fragments.
  int64_t colSplits = cfg.warps() / (cfg.blockQueries / 16);
  int64_t dqWidth = cfg.d / cfg.colSplit;
  if (colSplits < 1 || dqWidth % (16 * colSplits))
    return fail("grad-block-k = " + Twine(cfg.blockKeys) +
                " with grad-block-q = " + Twine(cfg.blockQueries) +
                " splits dQ's " + Twine(dqWidth) + " columns over " +
                Twine(colSplits) + " warps, which needs them a multiple of " +
                Twine(16 * colSplits));
  if (wide && options.gradDeterministic)
    return fail("grad-deterministic takes D and Dv up to 128, got D = " +
                Twine(cfg.d) + ", Dv = " + Twine(cfg.dv));
  if (options.gradDq == "bulk" && chip.sm < 90)
    return fail("grad-dq=bulk needs sm_90 (cp.reduce.async.bulk)");
  cfg.bulkReduceDq = options.gradDq == "bulk" ||
                     (options.gradDq == "auto" && chip.sm >= 90);
  cfg.deterministic = options.gradDeterministic;
  if (cfg.deterministic && !cfg.bulkReduceDq)
    return fail("grad-deterministic needs dQ by bulk reductions (sm_90, "
                "grad-dq=auto or bulk)");
  if (cfg.smemBytes() > chip.maxDynamicSmemPerBlock)
    return fail("the flash.attention_grad kernel's tiles need " +
                Twine(cfg.smemBytes()) + " bytes of shared memory, more than " +
                Twine(chip.maxDynamicSmemPerBlock));
  return cfg;
}

LogicalResult gpu_lowering::lowerAttentionGrad(RewriterBase &rewriter,
                                               AttentionGradOp op,
                                               const GradOperandBuffers &bufs,
                                               const GradKernelConfig &layout) {
  GradKernelConfig cfg = layout;
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  {
    SmallVector<MemRefType> captureTypes;
    for (Value c : bufs.captures)
      captureTypes.push_back(cast<MemRefType>(c.getType()));
    cfg.staged = gradStageableCaptures(cfg, op.getNumBatchDims(), captureTypes);
  }
  Value stream = streamArgument(op);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(loc, rewriter);
  int64_t nb = op.getNumBatchDims();
  Value q = dynamicOuterView(b, bufs.q, nb), k = dynamicOuterView(b, bufs.k, nb),
        v = dynamicOuterView(b, bufs.v, nb), o = dynamicOuterView(b, bufs.o, nb),
        dO = dynamicOuterView(b, bufs.dO, nb), lse = dynamicOuterView(b, bufs.lse, nb),
        dq = dynamicOuterView(b, bufs.dq, nb), dk = dynamicOuterView(b, bufs.dk, nb),
        dv = dynamicOuterView(b, bufs.dv, nb);
  Value zero = constIdx(b, 0), one = constIdx(b, 1);
  Value bhCount = memref::DimOp::create(b, q, 0);
  Value kvbhCount = memref::DimOp::create(b, k, 0);
  Value lq = memref::DimOp::create(b, q, 1);
  Value lk = memref::DimOp::create(b, k, 1);
  Value group = arith::DivUIOp::create(
      b, bhCount, arith::MaxUIOp::create(b, kvbhCount, one));
  Value pad = constIdx(b, GradKernelConfig::kRowPad);
  Value lqPad =
      arith::MulIOp::create(b, arith::CeilDivSIOp::create(b, lq, pad), pad);

  // The side buffers, stream-ordered on the caller's stream.
  Value token = UnrealizedConversionCastOp::create(
                    b, TypeRange{gpu::AsyncTokenType::get(ctx)},
                    ValueRange{stream})
                    .getResult(0);
  Type f32 = b.getF32Type();
  auto alloc = [&](MemRefType t, ValueRange sizes) {
    return gpu::AllocOp::create(b, t, gpu::AsyncTokenType::get(ctx),
                                ValueRange{token}, sizes, ValueRange{},
                                /*hostShared=*/false)
        .getMemref();
  };
  int64_t dyn = ShapedType::kDynamic;
  Value lse2 = alloc(MemRefType::get({dyn, dyn}, f32), {bhCount, lqPad});
  Value delta = alloc(MemRefType::get({dyn, dyn}, f32), {bhCount, lqPad});
  Value dqAcc =
      alloc(MemRefType::get({dyn, dyn, cfg.d}, f32), {bhCount, lqPad});

  SmallVector<Value> prepArgs = {o, dO, lse, lse2, delta, dqAcc, bhCount};
  SmallVector<Value> mainArgs = {q,     k,  v,  dO,    lse2,     delta,
                                 dqAcc, dk, dv, group, kvbhCount};
  SmallVector<Value> sideBuffers = {lse2, delta, dqAcc};
  if (cfg.deterministic) {
    // One turn counter per (batch·head, query block).
    Value locks = alloc(MemRefType::get({dyn, dyn}, b.getI32Type()),
                        {bhCount, lqPad});
    prepArgs.push_back(locks);
    mainArgs.push_back(locks);
    sideBuffers.push_back(locks);
  }
  // A score_mod's operands (GradScoreModArgs): the captures, an f32
  // gradient accumulator per float capture (its destination when that is
  // f32, else a side buffer rounded into it after the key blocks), zeroed
  // on the stream, and the query's batch sizes.
  SmallVector<Value> scoreModArgs, roundedGrads;
  if (cfg.scoreMod) {
    scoreModArgs.append(bufs.captures.begin(), bufs.captures.end());
    for (Value dst : bufs.captureGrads) {
      if (!dst)
        continue;
      auto t = cast<MemRefType>(dst.getType());
      Value acc = dst;
      if (!t.getElementType().isF32()) {
        SmallVector<Value> sizes;
        for (int64_t d = 0; d < t.getRank(); ++d)
          if (t.isDynamicDim(d))
            sizes.push_back(memref::DimOp::create(b, dst, d));
        acc = alloc(MemRefType::get(t.getShape(), f32), sizes);
        roundedGrads.push_back(acc);
        sideBuffers.push_back(acc);
      }
      gpu::MemsetOp::create(b, gpu::AsyncTokenType::get(ctx),
                            ValueRange{token}, acc, constF32(b, 0.0));
      scoreModArgs.push_back(acc);
    }
    for (int64_t d = 0; d < nb; ++d)
      scoreModArgs.push_back(memref::DimOp::create(b, bufs.q, d));
    for (Value x : scoreModArgs)
      cfg.scoreModArgTypes.push_back(x.getType());
    mainArgs.append(scoreModArgs);
  }
  SmallVector<Value> dqArgs = {dqAcc, dq, bhCount};
  auto typesOf = [](ArrayRef<Value> vs) {
    SmallVector<Type> ts;
    for (Value x : vs)
      ts.push_back(x.getType());
    return ts;
  };
  // The rounded capture gradients, flat.
  SmallVector<std::pair<Value, Value>> rounds;
  {
    size_t r = 0;
    for (Value dst : bufs.captureGrads) {
      if (!dst || cast<MemRefType>(dst.getType()).getElementType().isF32())
        continue;
      rounds.push_back({flatView(b, roundedGrads[r++]), flatView(b, dst)});
    }
  }
  gpu::GPUFuncOp prep, keyBlocks, dqKernel;
  SmallVector<gpu::GPUFuncOp> roundKernels;
  {
    OpBuilder::InsertionGuard g(rewriter);
    gpu::GPUModuleOp gmod = newKernelModule(rewriter, op);
    prep = buildGradPrepKernel(rewriter, loc, gmod, typesOf(prepArgs));
    keyBlocks = cfg.wgmma ? buildGradWgmmaKernel(rewriter, loc, gmod, cfg)
                          : buildGradKernel(rewriter, loc, gmod, cfg,
                                            typesOf(mainArgs));
    dqKernel = buildGradDqKernel(rewriter, loc, gmod, cfg.scale,
                                 typesOf(dqArgs));
    for (auto [src, dst] : rounds)
      roundKernels.push_back(
          buildRoundKernel(rewriter, loc, gmod, {src.getType(), dst.getType()}));
  }

  auto ifPositive = [&](Value x, Value y) {
    Value c = arith::AndIOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, x, zero),
        arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, y, zero));
    return scf::IfOp::create(b, c, /*withElse=*/false);
  };
  // Queries: the row statistics and the accumulator; with no key they are
  // all the kernels see, and dq comes out 0.
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifPositive(bhCount, lq).thenBlock());
    launchOnStream(b, prep, arith::CeilDivSIOp::create(b, lqPad, constIdx(b, 4)),
                   bhCount, 128, 0, prepArgs, stream);
  }
  // Keys: every key block writes its dK and dV, 0 when no query sees it.
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifPositive(kvbhCount, lk).thenBlock());
    if (cfg.wgmma) {
      // TMA descriptors of the operands; with no query row, Q and dO are
      // described by K (never read: no query block is visible).
      auto [q3, do3] = tensorsOrStandIns(b, lq, k, q, dO);
      mainArgs = {tmaDescriptor(b, q3, cfg.blockQueries),
                  tmaDescriptor(b, k, cfg.blockKeys),
                  tmaDescriptor(b, v, cfg.blockKeys),
                  tmaDescriptor(b, do3, cfg.blockQueries)};
      for (Value m : {lse2, delta, dqAcc, dk, dv})
        mainArgs.push_back(dataPointer(b, m));
      mainArgs.append({lq, lk, lqPad, group, kvbhCount});
      mainArgs.append(scoreModArgs);
      for (const GradStagedCapture &c : cfg.staged) {
        Value m = bufs.captures[c.read.capture];
        SmallVector<int64_t> box(cast<MemRefType>(m.getType()).getRank() - 2,
                                 1);
        box.append({kGradWgKeys, kGradWgKeys});
        mainArgs.push_back(tmaDescriptor(b, m, box, c.rowBytes()));
      }
    }
    Value ctas = arith::CeilDivSIOp::create(b, lk, constIdx(b, cfg.blockKeys));
    if (cfg.colSplit > 1)
      ctas = arith::MulIOp::create(b, ctas, constIdx(b, cfg.colSplit));
    launchOnStream(b, keyBlocks, ctas,
                   kvbhCount, cfg.threads(), cfg.smemBytes(), mainArgs, stream);
  }
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifPositive(bhCount, lq).thenBlock());
    Value elems = arith::MulIOp::create(b, lq, constIdx(b, cfg.d));
    launchOnStream(
        b, dqKernel,
        arith::CeilDivSIOp::create(b, elems, constIdx(b, kGradDqPerBlock)),
        bhCount, kGradDqPerBlock / 4, 0, dqArgs, stream);
  }
  for (auto [kernel, bufPair] : llvm::zip(roundKernels, rounds)) {
    Value n = memref::DimOp::create(b, bufPair.first, 0);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifPositive(n, one).thenBlock());
    launchOnStream(b, kernel,
                   arith::CeilDivSIOp::create(b, n, constIdx(b, kRoundThreads)),
                   one, kRoundThreads, 0, {bufPair.first, bufPair.second},
                   stream);
  }
  for (Value m : sideBuffers)
    gpu::DeallocOp::create(b, gpu::AsyncTokenType::get(ctx), ValueRange{token},
                           m);

  SmallVector<Value> results;
  SmallVector<Value> dests = {bufs.dq, bufs.dk, bufs.dv};
  dests.append(bufs.captureGrads);
  for (auto [m, t, init] : llvm::zip(dests, op->getResultTypes(), op.getInits()))
    // An unread gradient stands for its init (never computed, never read).
    results.push_back(m ? bufferization::ToTensorOp::create(
                              b, t, m, /*restrict=*/true, /*writable=*/true)
                              .getResult()
                        : init);
  rewriter.replaceOp(op, results);
  return success();
}
