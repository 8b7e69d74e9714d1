//===- TensorMapKernelParams.cpp - TMA descriptors as kernel parameters ---===//
//
// A TMA instruction reads its CUtensorMap through a generic address of
// global, constant or kernel-parameter memory. Passed as a pointer, the map
// must first be copied to device memory: a copy per distinct map (every new
// buffer address, every new sequence length), synchronous on the host, and
// kept alive as long as a CUDA graph might replay it. Passed by value as a
// grid-constant parameter (what CUDA's `__grid_constant__ const CUtensorMap`
// and CUTLASS do), the map travels in the launch itself. NVPTX gives such a
// parameter a generic address (cvta.param) that the TMA ops accept.
//
//===----------------------------------------------------------------------===//
#include "flash/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHTENSORMAPKERNELPARAMSPASS
#include "flash/Conversion/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

/// Whether `use` is the tensor-map operand of a TMA instruction.
static bool isTensorMapOperand(OpOperand &use) {
  Operation *op = use.getOwner();
  Value v = use.get();
  if (auto load = dyn_cast<NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp>(op))
    return load.getTmaDescriptor() == v;
  if (auto store = dyn_cast<NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp>(op))
    return store.getTmaDescriptor() == v;
  if (auto prefetch = dyn_cast<NVVM::CpAsyncBulkTensorPrefetchOp>(op))
    return prefetch.getTmaDescriptor() == v;
  if (auto reduce = dyn_cast<NVVM::CpAsyncBulkTensorReduceOp>(op))
    return reduce.getTmaDescriptor() == v;
  if (auto prefetch = dyn_cast<NVVM::PrefetchOp>(op))
    return prefetch.getTensormap() && prefetch.getAddr() == v;
  return false;
}

namespace {
struct FlashTensorMapKernelParamsPass
    : flash::impl::FlashTensorMapKernelParamsPassBase<
          FlashTensorMapKernelParamsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    auto mapType = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 64), 16);
    for (auto fn : getOperation().getOps<LLVM::LLVMFuncOp>()) {
      if (!fn->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()) ||
          fn.isExternal())
        continue;
      for (BlockArgument arg : fn.getArguments()) {
        auto ptr = dyn_cast<LLVM::LLVMPointerType>(arg.getType());
        if (!ptr || ptr.getAddressSpace() != 0 || arg.use_empty() ||
            fn.getArgAttr(arg.getArgNumber(),
                          LLVM::LLVMDialect::getByValAttrName()) ||
            !llvm::all_of(arg.getUses(), isTensorMapOperand))
          continue;
        unsigned i = arg.getArgNumber();
        fn.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                      TypeAttr::get(mapType));
        fn.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                      IntegerAttr::get(IntegerType::get(ctx, 64), 64));
        fn.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                      UnitAttr::get(ctx));
      }
    }
  }
};
} // namespace
