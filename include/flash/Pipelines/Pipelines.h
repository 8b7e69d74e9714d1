//===- Pipelines.h - registered flash pass pipelines ----------*- C++ -*-===//
#ifndef FLASH_PIPELINES_PIPELINES_H
#define FLASH_PIPELINES_PIPELINES_H

#include "flash/Conversion/GPUKernelOptions.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace flash {

/// Options of `flash-cpu-pipeline`.
struct FlashCPUPipelineOptions
    : public PassPipelineOptions<FlashCPUPipelineOptions> {
  PassOptions::Option<bool> raise{
      *this, "raise",
      llvm::cl::desc("First rewrite matmul-softmax-matmul chains into "
                     "flash.attention (flash-raise-attention); off by default "
                     "so the unfused original of a test can be lowered as is"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> reference{
      *this, "reference",
      llvm::cl::desc("Lower flash.attention through flash-decompose-attention "
                     "(unfused, O(L^2) memory) instead of the tiled loop nest"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> blockQ{
      *this, "block-q", llvm::cl::desc("Query rows per tile"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> blockKv{
      *this, "block-kv", llvm::cl::desc("Key/value rows per tile"),
      llvm::cl::init(64)};
  PassOptions::Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run the scf.forall over query blocks on OpenMP threads "
                     "(the module then needs libomp at run time)"),
      llvm::cl::init(true)};
};

/// flash.attention on tensors (in func.func) down to the LLVM dialect:
/// tile (or decompose), bufferize, lower linalg to loops, map the parallel
/// loop to OpenMP, and convert everything to LLVM.
void buildFlashCPUPipeline(OpPassManager &pm,
                           const FlashCPUPipelineOptions &options);

template <typename T>
using PipelineOption = detail::PassOptions::Option<T>;

/// Options of `flash-gpu-pipeline`: the kernel knobs of convert-flash-to-gpu
/// and the code-generation target.
struct FlashGPUPipelineOptions
    : public PassPipelineOptions<FlashGPUPipelineOptions> {
  Option<bool> raise{*this, "raise",
                     llvm::cl::desc("First rewrite matmul-softmax-matmul "
                                    "chains into flash.attention"),
                     llvm::cl::init(true)};
  // Measured 1-8 % faster on the prefill kernels (bench/NOTES runs 73, 74).
  Option<bool> specializeConstants{
      *this, "specialize-constants",
      llvm::cl::desc("Fold a kernel's constant launch sizes into it "
                     "(flash-specialize-kernel-constants)"),
      llvm::cl::init(true)};
#define FLASH_NVVM_TARGET_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)              \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::init(TYPE(DEFAULT))};
#include "flash/Pipelines/NVVMTargetOptions.def"
  /// The kernel options of convert-flash-to-gpu, declared once.
  GPUKernelOptionDecls<detail::PassOptions, PipelineOption> kernel{*this};
};

/// Options of `flash-lower-to-nvvm`: the target of the kernels' binary.
struct FlashNVVMPipelineOptions
    : public PassPipelineOptions<FlashNVVMPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("Target SM architecture"),
                           llvm::cl::init("sm_90a")};
#define FLASH_NVVM_TARGET_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)              \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::init(TYPE(DEFAULT))};
#include "flash/Pipelines/NVVMTargetOptions.def"
};

/// Upstream's gpu-lower-to-nvvm-pipeline (MLIR 22: kernels to NVVM, host
/// code and launches to LLVM, kernels serialized into a gpu.binary) with
/// flash-tensormap-kernel-params (unless tensormap-params=false) between the
/// kernels' lowering and their serialization, so TMA descriptors travel in
/// the launch by value.
void buildFlashLowerToNVVMPipeline(OpPassManager &pm,
                                   const FlashNVVMPipelineOptions &options);

/// flash.attention (destination-passing style on memrefs) -> gpu.binary with
/// a cubin (or PTX) and host code in the LLVM dialect, ready for
/// mlir-translate --mlir-to-llvmir.
void buildFlashGPUPipeline(OpPassManager &pm,
                           const FlashGPUPipelineOptions &options);

/// Registers `flash-gpu-pipeline` (called by registerFlashPipelines).
void registerFlashGPUPipeline();

/// Registers `flash-cpu-pipeline` (and every later flash pipeline).
void registerFlashPipelines();

} // namespace flash
} // namespace mlir

#endif // FLASH_PIPELINES_PIPELINES_H
