//===- StreamOrder.cpp - a device function's work on the caller's stream --===//
//
// The attention kernels of a function launch asynchronously on its stream
// argument. Everything else the function does on the device must be ordered
// on the same stream, or an elementwise kernel could read an attention
// output before it is written: its buffers (memref.alloc / dealloc, from
// bufferization) become stream-ordered gpu.alloc / gpu.dealloc, and its
// synchronous launches asynchronous ones on the stream. Nothing is
// synchronized, so the function returns as soon as its work is queued, as
// the attention alone does. Bufferization's buffers, which no deallocation
// pass frees, are freed at the end of their block, after (in stream order)
// every kernel that uses them. What is left on the host must not touch the
// buffers, which live in device memory: a load or store there is an error.
//
//===----------------------------------------------------------------------===//
#include "flash/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHGPUSTREAMORDERPASS
#include "flash/Conversion/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

static Value streamArgument(func::FuncOp func) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, "flash.stream"))
      return func.getArgument(i);
  return Value();
}

namespace {
struct FlashGPUStreamOrderPass
    : flash::impl::FlashGPUStreamOrderPassBase<FlashGPUStreamOrderPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    Value stream = streamArgument(func);
    if (!stream)
      return;
    MLIRContext *ctx = &getContext();
    Type tokenType = gpu::AsyncTokenType::get(ctx);
    IRRewriter rewriter(ctx);
    // The stream stands in for a token (as in the attention launches): the
    // runtime calls take it as their stream.
    rewriter.setInsertionPointToStart(&func.getBody().front());
    Value token = UnrealizedConversionCastOp::create(
                      rewriter, func.getLoc(), TypeRange{tokenType},
                      ValueRange{stream})
                      .getResult(0);

    bool bad = false;
    func.walk([&](Operation *op) {
      rewriter.setInsertionPoint(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        bool freed = llvm::any_of(alloc->getUsers(), [](Operation *u) {
          return isa<memref::DeallocOp>(u);
        });
        // Bufferization leaves its buffers to a deallocation pass; a buffer
        // that does not leave its block is freed at the block's end, which
        // in stream order is after every kernel that uses it.
        if (!freed && llvm::any_of(alloc->getUsers(), [](Operation *u) {
              return u->hasTrait<OpTrait::IsTerminator>();
            })) {
          op->emitOpError("flash-gpu-stream-order: a device buffer that "
                          "leaves its block is not supported");
          bad = true;
          return;
        }
        auto a = gpu::AllocOp::create(
            rewriter, op->getLoc(), alloc.getType(), tokenType,
            ValueRange{token}, alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/false);
        if (!freed) {
          rewriter.setInsertionPoint(op->getBlock()->getTerminator());
          gpu::DeallocOp::create(rewriter, op->getLoc(), tokenType,
                                 ValueRange{token}, a.getMemref());
        }
        rewriter.replaceOp(op, a.getMemref());
      } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        // A constant the function reads (bufferization puts dense
        // constants in globals) lives in host memory: the kernels read a
        // device copy, made in stream order and freed at the block's end.
        auto type = cast<MemRefType>(global.getType());
        auto copy = gpu::AllocOp::create(
            rewriter, op->getLoc(), type, tokenType, ValueRange{token},
            ValueRange{}, ValueRange{}, /*hostShared=*/false);
        rewriter.setInsertionPointAfter(op);
        auto memcpy =
            gpu::MemcpyOp::create(rewriter, op->getLoc(), tokenType,
                                  ValueRange{token}, copy.getMemref(), global);
        rewriter.replaceAllUsesExcept(global, copy.getMemref(), memcpy);
        rewriter.setInsertionPoint(op->getBlock()->getTerminator());
        gpu::DeallocOp::create(rewriter, op->getLoc(), tokenType,
                               ValueRange{token}, copy.getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(rewriter, op->getLoc(), tokenType,
                               ValueRange{token}, dealloc.getMemref());
        rewriter.eraseOp(op);
      } else if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        if (launch.getAsyncToken())
          return;
        auto async = gpu::LaunchFuncOp::create(
            rewriter, op->getLoc(), launch.getKernelAttr(),
            launch.getGridSizeOperandValues(),
            launch.getBlockSizeOperandValues(),
            launch.getDynamicSharedMemorySize(), launch.getKernelOperands(),
            tokenType, ValueRange{token},
            launch.hasClusterSize()
                ? std::optional(launch.getClusterSizeOperandValues())
                : std::nullopt);
        (void)async;
        rewriter.eraseOp(op);
      } else if (isa<memref::LoadOp, memref::StoreOp, memref::CopyOp,
                     affine::AffineLoadOp, affine::AffineStoreOp,
                     vector::LoadOp, vector::StoreOp,
                     vector::TransferReadOp, vector::TransferWriteOp>(op)) {
        op->emitOpError("flash-gpu-stream-order: accesses a device buffer "
                        "on the host; only parallel loops (elementwise and "
                        "row-wise ops) around the attention run on the GPU");
        bad = true;
      }
    });
    if (bad)
      signalPassFailure();
  }
};
} // namespace
