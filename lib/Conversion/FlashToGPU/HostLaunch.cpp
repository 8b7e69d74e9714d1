//===- HostLaunch.cpp - the host side every GPU strategy shares -----------===//
//
// The caller's buffers behind the op's tensors, the kernel's own gpu.module,
// the asynchronous launch on the caller's stream, and the op's results as
// views of the buffers the kernel wrote.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

FailureOr<Value> gpu_lowering::deviceBuffer(Operation *op, Value tensor,
                                            StringRef what) {
  auto tt = tensor.getDefiningOp<bufferization::ToTensorOp>();
  if (!tt)
    return op->emitOpError("convert-flash-to-gpu: ")
           << what
           << " must be a bufferization.to_tensor of a device memref "
              "(write the function in destination-passing style)";
  Value m = tt.getBuffer();
  if (!cast<MemRefType>(m.getType()).getLayout().isIdentity())
    return op->emitOpError("convert-flash-to-gpu: ")
           << what << " must have the identity (row-major) layout";
  return m;
}

/// The captures' buffers into `bufs`, and the score_mod's reads of them
/// checked (an empty region has none).
static LogicalResult readCaptures(Operation *op, ValueRange captures,
                                  Region &scoreMod, int64_t numBatchDims,
                                  OperandBuffers &bufs) {
  for (Value c : captures) {
    FailureOr<Value> m = gpu_lowering::deviceBuffer(op, c, "capture");
    if (failed(m))
      return failure();
    bufs.captures.push_back(*m);
  }
  if (scoreMod.empty())
    return success();
  return gpu_lowering::checkCaptureReads(scoreMod, numBatchDims);
}

FailureOr<OperandBuffers> gpu_lowering::operandBuffers(AttentionOp op) {
  // A tile of a larger attention (offsets from TilingInterface) needs its
  // absolute indices in the kernels' masks and score_mod, which they do not
  // take yet; lowering it as an untiled op would be silently wrong.
  if (op.hasOffsets())
    return op.emitOpError(
        "convert-flash-to-gpu: a tile of a larger attention (offsets / "
        "query_len) is not supported by the GPU kernels; lower the untiled "
        "op, or tile for the CPU path");
  // Destination-passing style: every tensor is a view of a device buffer.
  auto need = [&](Value t, StringRef what) {
    return deviceBuffer(op, t, what);
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
  if (Value sinks = op.getSinks()) {
    FailureOr<Value> m = need(sinks, "sinks");
    if (failed(m))
      return failure();
    bufs.sinks = *m;
  }
  if (failed(readCaptures(op, op.getCaptures(), op.getScoreMod(),
                          op.getNumBatchDims(), bufs)))
    return failure();
  return bufs;
}

LogicalResult gpu_lowering::checkCaptureReads(Region &scoreMod,
                                              int64_t numBatchDims) {
  // The kernels load a capture element by element (loadCapture).
  Block &body = scoreMod.front();
  for (BlockArgument arg : body.getArguments().drop_front(3 + numBatchDims))
    for (Operation *user : arg.getUsers())
      if (!isa<tensor::ExtractOp>(user) || user->getBlock() != &body)
        return user->emitOpError(
            "convert-flash-to-gpu: a score_mod capture may only be read "
            "with tensor.extract at the top level of the region");
  return success();
}

/// The buffer behind each named tensor operand (skipping null ones), into
/// its field of `bufs`.
static LogicalResult
readBuffers(Operation *op,
            ArrayRef<std::tuple<Value, StringRef, Value *>> operands) {
  for (auto [t, what, dst] : operands) {
    if (!t)
      continue;
    FailureOr<Value> m = deviceBuffer(op, t, what);
    if (failed(m))
      return failure();
    *dst = *m;
  }
  return success();
}

FailureOr<OperandBuffers> gpu_lowering::operandBuffers(PagedAttentionOp op) {
  OperandBuffers bufs;
  if (failed(readBuffers(op,
                         {{op.getQuery(), "query", &bufs.q},
                          {op.getKeyCache(), "key cache", &bufs.k},
                          {op.getValueCache(), "value cache", &bufs.v},
                          {op.getBlockTable(), "block table", &bufs.blockTable},
                          {op.getSeqLens(), "sequence lengths", &bufs.seqLens},
                          {op.getOutputInit(), "output init", &bufs.out},
                          {op.getLseInit(), "lse init", &bufs.lse},
                          {op.getSinks(), "sinks", &bufs.sinks}})))
    return failure();
  if (failed(readCaptures(op, op.getCaptures(), op.getScoreMod(),
                          /*numBatchDims=*/2, bufs)))
    return failure();
  return bufs;
}

FailureOr<OperandBuffers> gpu_lowering::operandBuffers(VarlenAttentionOp op) {
  OperandBuffers bufs;
  if (failed(readBuffers(
          op, {{op.getQuery(), "query", &bufs.q},
               {op.getKey(), "key", &bufs.k},
               {op.getValue(), "value", &bufs.v},
               {op.getCuSeqlensQ(), "query offsets", &bufs.cuSeqlensQ},
               {op.getCuSeqlensK(), "key offsets", &bufs.cuSeqlensK},
               {op.getOutputInit(), "output init", &bufs.out},
               {op.getLseInit(), "lse init", &bufs.lse},
               {op.getSinks(), "sinks", &bufs.sinks}})))
    return failure();
  return bufs;
}

void gpu_lowering::replaceWithDestinations(RewriterBase &rewriter,
                                           Operation *op,
                                           const OperandBuffers &bufs) {
  OpBuilder::InsertionGuard g(rewriter);
  rewriter.setInsertionPoint(op);
  SmallVector<Value> results;
  SmallVector<Value, 2> buffers = {bufs.out, bufs.lse};
  for (auto [result, buffer] : llvm::zip(op->getResults(), buffers))
    results.push_back(bufferization::ToTensorOp::create(
        rewriter, op->getLoc(), result.getType(), buffer, /*restrict=*/true,
        /*writable=*/true));
  rewriter.replaceOp(op, results);
}

gpu::GPUModuleOp gpu_lowering::newKernelModule(OpBuilder &mb, Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(op->getContext()));
  int64_t index = 0;
  std::string name;
  do
    name = "flash_attention_" + std::to_string(index++);
  while (module.lookupSymbol(name));
  mb.setInsertionPointToEnd(module.getBody());
  auto gmod = gpu::GPUModuleOp::create(mb, op->getLoc(), name);
  // The query's element type bounds the precision the kernel's math needs
  // (approximateKernelMath).
  Type elem = getElementTypeOrSelf(op->getOperand(0).getType());
  if (elem.isIntOrFloat() && elem.getIntOrFloatBitWidth() <= 16)
    gmod->setAttr(kLowPrecisionOperandsAttr, UnitAttr::get(op->getContext()));
  return gmod;
}

Value gpu_lowering::streamArgument(Operation *op) {
  auto func = op->getParentOfType<FunctionOpInterface>();
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, "flash.stream"))
      return func.getArgument(i);
  return Value();
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
  // grid.y stops at 65535: the rest of the axis goes to grid.z, and the
  // kernel reads its index back with batchHeadBlock.
  Value maxY = constIdx(b, kMaxGridY);
  Value gy = arith::MinSIOp::create(b, gridY, maxY);
  Value gz = arith::CeilDivSIOp::create(b, gridY, maxY);
  gpu::LaunchFuncOp::create(
      b, kernel, gpu::KernelDim3{gridX, gy, gz},
      gpu::KernelDim3{constIdx(b, threads), one, one},
      constI32(b, dynamicSmemBytes), args, gpu::AsyncTokenType::get(ctx),
      ValueRange{token});
}

// The runtime entry point that reports the current device's SM count (0
// when there is no device).
static constexpr StringLiteral kSMCountFn = "flashRuntimeMultiprocessorCount";

Value gpu_lowering::multiprocessorCount(ImplicitLocOpBuilder &b, Operation *anchor) {
  auto module = anchor->getParentOfType<ModuleOp>();
  Type i32 = b.getI32Type();
  if (!module.lookupSymbol(kSMCountFn)) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(b, kSMCountFn,
                                     b.getFunctionType({}, {i32}));
    decl.setPrivate();
  }
  Value n = func::CallOp::create(b, kSMCountFn, TypeRange{i32}, ValueRange{})
                .getResult(0);
  Value idx = arith::IndexCastOp::create(b, b.getIndexType(), n);
  return arith::MaxSIOp::create(b, idx, constIdx(b, 1));
}

Value gpu_lowering::splitCounters(ImplicitLocOpBuilder &b, Operation *anchor,
                                  Value stream, Value n) {
  constexpr StringLiteral fn = "flashRuntimeSplitCounters";
  auto module = anchor->getParentOfType<ModuleOp>();
  Type ptr = LLVM::LLVMPointerType::get(b.getContext());
  Type i64 = b.getI64Type();
  if (!module.lookupSymbol(fn)) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(module.getBody());
    func::FuncOp::create(b, fn, b.getFunctionType({ptr, i64}, {ptr}))
        .setPrivate();
  }
  return func::CallOp::create(
             b, fn, TypeRange{ptr},
             ValueRange{stream, arith::IndexCastOp::create(b, i64, n)})
      .getResult(0);
}
