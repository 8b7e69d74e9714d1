//===- HostLaunch.cpp - host side of the flash.attention GPU lowering -----===//
//
// Builds, at the op's place in the host function, the TMA descriptors of Q,
// K and V (viewed as [batch·heads, L, D]), the run-time sizes and the
// asynchronous launch on the caller's stream; puts the kernel in its own
// gpu.module.
//
//===----------------------------------------------------------------------===//
#include "FlashToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

/// The memref a tensor operand was read from, or null.
static Value bufferOf(Value tensor) {
  if (auto tt = tensor.getDefiningOp<bufferization::ToTensorOp>())
    return tt.getBuffer();
  return Value();
}

/// A TMA descriptor (device pointer) for boxes of `rows` x 64 elements.
static Value makeTma(ImplicitLocOpBuilder &b, Value m3, int64_t rows) {
  MLIRContext *ctx = b.getContext();
  auto t = cast<MemRefType>(m3.getType());
  Type elem = t.getElementType();
  Value unranked = memref::CastOp::create(
      b, UnrankedMemRefType::get(elem, Attribute()), m3);
  auto box = MemRefType::get({1, rows, 64}, elem, MemRefLayoutAttrInterface(),
                             b.getI64IntegerAttr(3));
  auto descTy = nvgpu::TensorMapDescriptorType::get(
      ctx, box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  Value desc = nvgpu::TmaCreateDescriptorOp::create(
      b, descTy, unranked,
      ValueRange{constIdx(b, 1), constIdx(b, rows), constIdx(b, 64)});
  // Kernels cannot take the descriptor type itself; pass the pointer.
  return UnrealizedConversionCastOp::create(
             b, TypeRange{LLVM::LLVMPointerType::get(ctx)}, ValueRange{desc})
      .getResult(0);
}

static Value dataPointer(ImplicitLocOpBuilder &b, Value m) {
  Value p = memref::ExtractAlignedPointerAsIndexOp::create(b, m);
  return LLVM::IntToPtrOp::create(b, LLVM::LLVMPointerType::get(b.getContext()),
                                  toI64(b, p));
}

static bool isSupportedHeadDim(int64_t d) { return d == 64 || d == 128; }

/// Fills in the automatic (0 / -1) knobs for one op; measured in
/// bench/NOTES.md. Small head dims make the softmax the larger share of the
/// work. D, Dv <= 64 with a causal/window mask take one consumer warpgroup per
/// CTA and two CTAs per SM (one CTA's prologue and epilogue overlap the
/// other's tiles, and 64-row query blocks waste little of the diagonal tiles);
/// the register split is then capped so that both CTAs fit in the 64K-register
/// file. Without such a mask they take FA3's tile: 192 query rows on three
/// consumer warpgroups (+6-16 % from N = 2k, -5 % at N = 1k, run 13; with a
/// causal mask it lost up to 20 % below N = 8k). A score_mod keeps the older
/// tiles: its index arithmetic and capture loads make the 192-row tile (160
/// registers per thread) and the deferred PV spill, and neither was measured.
static KernelConfig resolveConfig(KernelConfig cfg, int64_t d, int64_t dv,
                                  bool structuredMask, bool scoreMod) {
  bool small = d <= 64 && dv <= 64;
  if (cfg.blockM == 0)
    cfg.blockM = cfg.consumerWarpgroups > 0 ? 64 * cfg.consumerWarpgroups
                 : !small                   ? 128
                 : structuredMask || scoreMod ? 64
                                              : 192;
  if (cfg.consumerWarpgroups == 0)
    cfg.consumerWarpgroups = cfg.blockM / 64;
  if (cfg.ctasPerSM == 0)
    cfg.ctasPerSM = cfg.consumerWarpgroups == 1 ? 2 : 1;
  if (cfg.consumerRegs > 0 && cfg.producerRegs > 0) {
    int64_t budget = 65536 / (128 * cfg.ctasPerSM) - cfg.producerRegs;
    int64_t cap = (budget / cfg.consumerWarpgroups) / 8 * 8;
    cfg.consumerRegs = std::min(cfg.consumerRegs, std::min<int64_t>(cap, 256));
  }
  // Deferred PV measured +7-24 % over the serial loop at D = 128 without a
  // mask and -2..+7 % with a causal one; at D = 64 (one consumer warpgroup,
  // two CTAs per SM) it was up to 6 % slower. It needs a third K/V stage, which
  // must fit next to Q in the 227 KB a CTA may have.
  if (cfg.deferPV < 0) {
    int64_t threeStages = 1024 + 2 * cfg.blockM * d +
                          3 * 2 * cfg.blockN * (d + dv) + 8 * 7;
    bool fits = threeStages * cfg.ctasPerSM <= 232448;
    cfg.deferPV = (d > 64 || dv > 64) && !scoreMod && !cfg.overlap && fits &&
                  (cfg.stages == 0 || cfg.stages >= 3);
  }
  if (cfg.stages == 0)
    cfg.stages = cfg.deferPV || cfg.overlap ? 3 : 2;
  return cfg;
}

bool gpu_lowering::wgmmaKernelSupports(AttentionOp op, std::string *why) {
  auto fail = [&](const Twine &msg) {
    if (why)
      *why = msg.str();
    return false;
  };
  int64_t nb = op.getNumBatchDims();
  Type elem = op.getQueryType().getElementType();
  std::string s;
  llvm::raw_string_ostream os(s);
  if (!elem.isBF16() && !elem.isF16()) {
    os << "element type '" << elem << "' is not supported (bf16 or f16)";
    return fail(s);
  }
  if (op.getKeyType().getElementType() != elem ||
      op.getValueType().getElementType() != elem ||
      op.getOutputType().getElementType() != elem)
    return fail("query, key, value and output must share one element type");
  int64_t d = op.getQueryType().getDimSize(nb + 1);
  int64_t dv = op.getValueType().getDimSize(nb + 1);
  if (!isSupportedHeadDim(d) || !isSupportedHeadDim(dv)) {
    os << "head dims must be 64 or 128, got D = " << d << ", Dv = " << dv;
    return fail(s);
  }
  return true;
}

FailureOr<OperandBuffers> gpu_lowering::operandBuffers(AttentionOp op) {
  // Destination-passing style: every tensor is a view of a device buffer.
  auto need = [&](Value t, StringRef what) -> FailureOr<Value> {
    Value m = bufferOf(t);
    if (!m)
      return op.emitOpError("convert-flash-to-gpu: ")
             << what
             << " must be a bufferization.to_tensor of a device memref "
                "(write the function in destination-passing style)";
    if (!cast<MemRefType>(m.getType()).getLayout().isIdentity())
      return op.emitOpError("convert-flash-to-gpu: ")
             << what << " must have the identity (row-major) layout";
    return m;
  };
  OperandBuffers bufs;
  std::tuple<Value, StringRef, Value *> operands[] = {
      {op.getQuery(), "query", &bufs.q},
      {op.getKey(), "key", &bufs.k},
      {op.getValue(), "value", &bufs.v},
      {op.getOutputInit(), "output init", &bufs.out}};
  for (auto [t, what, dst] : operands) {
    FailureOr<Value> m = need(t, what);
    if (failed(m))
      return failure();
    *dst = *m;
  }
  if (op.hasLse()) {
    FailureOr<Value> m = need(op.getLseInit(), "lse init");
    if (failed(m))
      return failure();
    bufs.lse = *m;
  }
  for (Value c : op.getCaptures()) {
    FailureOr<Value> m = need(c, "capture");
    if (failed(m))
      return failure();
    bufs.captures.push_back(*m);
  }
  if (op.hasScoreMod()) {
    // Captures may only be read element-wise, at the top of the region.
    Block &body = op.getScoreMod().front();
    for (BlockArgument arg :
         body.getArguments().drop_front(3 + op.getNumBatchDims()))
      for (Operation *user : arg.getUsers())
        if (!isa<tensor::ExtractOp>(user) || user->getBlock() != &body)
          return user->emitOpError(
              "convert-flash-to-gpu: a score_mod capture may only be read "
              "with tensor.extract at the top level of the region");
  }
  return bufs;
}

void gpu_lowering::replaceWithDestinations(AttentionOp op,
                                           const OperandBuffers &bufs) {
  OpBuilder b(op);
  SmallVector<Value> results = {bufferization::ToTensorOp::create(
      b, op.getLoc(), op.getOutputType(), bufs.out, /*restrict=*/true,
      /*writable=*/true)};
  if (op.hasLse())
    results.push_back(bufferization::ToTensorOp::create(
        b, op.getLoc(), cast<RankedTensorType>(op.getLseInit().getType()),
        bufs.lse, /*restrict=*/true, /*writable=*/true));
  op->replaceAllUsesWith(results);
  op->erase();
}

gpu::GPUModuleOp gpu_lowering::newKernelModule(OpBuilder &mb, AttentionOp op,
                                               int64_t kernelIndex) {
  auto module = op->getParentOfType<ModuleOp>();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(op.getContext()));
  mb.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(
      mb, op.getLoc(), "flash_attention_" + std::to_string(kernelIndex));
}

void gpu_lowering::launchOnStream(ImplicitLocOpBuilder &b,
                                  gpu::GPUFuncOp kernel, Value gridX,
                                  Value gridY, int64_t threads,
                                  int64_t dynamicSmemBytes,
                                  ArrayRef<Value> args, Value stream) {
  MLIRContext *ctx = b.getContext();
  Value one = constIdx(b, 1);
  // The caller's stream stands in for an async token, so the launch is
  // ordered on it (the runtime's mgpuLaunchKernel takes it as the stream).
  Value token = UnrealizedConversionCastOp::create(
                    b, TypeRange{gpu::AsyncTokenType::get(ctx)},
                    ValueRange{stream})
                    .getResult(0);
  gpu::LaunchFuncOp::create(
      b, kernel, gpu::KernelDim3{gridX, gridY, one},
      gpu::KernelDim3{constIdx(b, threads), one, one},
      constI32(b, dynamicSmemBytes), args, gpu::AsyncTokenType::get(ctx),
      ValueRange{token});
}

LogicalResult gpu_lowering::lowerToLaunch(AttentionOp op,
                                          const OperandBuffers &bufs,
                                          const KernelConfig &cfgIn,
                                          Value stream, int64_t kernelIndex) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  int64_t nb = op.getNumBatchDims();
  Type elem = op.getQueryType().getElementType();
  std::string why;
  if (!wgmmaKernelSupports(op, &why))
    return op.emitOpError("convert-flash-to-gpu: ") << why;
  int64_t d = op.getQueryType().getDimSize(nb + 1);
  int64_t dv = op.getValueType().getDimSize(nb + 1);
  Value q = bufs.q, k = bufs.k, v = bufs.v, o = bufs.out, lse = bufs.lse;
  ArrayRef<Value> captures = bufs.captures;

  KernelConfig cfg =
      resolveConfig(cfgIn, d, dv,
                    op.getMaskOrNone() && !op.getMaskOrNone().isNone(),
                    op.hasScoreMod());
  KernelSpec spec;
  spec.elemType = elem;
  spec.headDim = d;
  spec.valueDim = dv;
  spec.numBatchDims = nb;
  spec.mask = op.getMaskOrNone();
  spec.hasLse = op.hasLse();
  spec.scale = op.getScale().convertToDouble();
  if (op.hasScoreMod())
    spec.scoreMod = &op.getScoreMod();
  for (Value c : captures)
    spec.captureTypes.push_back(cast<MemRefType>(c.getType()));

  OpBuilder mb(ctx);
  gpu::GPUModuleOp gmod = newKernelModule(mb, op, kernelIndex);
  gpu::GPUFuncOp kernel = buildAttentionKernel(mb, loc, gmod, cfg, spec);

  // Host side.
  OpBuilder ob(op);
  ImplicitLocOpBuilder b(loc, ob);
  Value q3 = collapseBatchDims(b, q, nb), k3 = collapseBatchDims(b, k, nb),
        v3 = collapseBatchDims(b, v, nb);
  SmallVector<Value> args = {makeTma(b, q3, cfg.blockM),
                             makeTma(b, k3, cfg.blockN),
                             makeTma(b, v3, cfg.blockN), dataPointer(b, o)};
  if (op.hasLse())
    args.push_back(dataPointer(b, lse));
  Value lq = memref::DimOp::create(b, q, nb);
  Value lk = memref::DimOp::create(b, k, nb);
  Value hkv = nb > 0 ? memref::DimOp::create(b, k, nb - 1).getResult()
                     : constIdx(b, 1);
  args.append({lq, lk, hkv});
  Value bhCount = constIdx(b, 1);
  for (int64_t i = 0; i < nb; ++i) {
    Value s = memref::DimOp::create(b, q, i);
    args.push_back(s);
    bhCount = arith::MulIOp::create(b, bhCount, s);
  }
  args.append(captures.begin(), captures.end());

  Value zero = constIdx(b, 0);
  Value nonEmpty = arith::AndIOp::create(
      b,
      arith::AndIOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, lq, zero),
          arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, lk, zero)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, bhCount, zero));
  auto ifLaunch = scf::IfOp::create(b, nonEmpty, /*withElse=*/false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifLaunch.thenBlock());
    Value gx = arith::CeilDivSIOp::create(b, lq, constIdx(b, cfg.blockM));
    SmemLayout layout(cfg, spec);
    launchOnStream(b, kernel, gx, bhCount, cfg.threads(), layout.total, args,
                   stream);
  }

  replaceWithDestinations(op, bufs);
  return success();
}
