//===- Pipelines.h - registered flash pass pipelines ----------*- C++ -*-===//
#ifndef FLASH_PIPELINES_PIPELINES_H
#define FLASH_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace flash {

/// Options of `flash-cpu-pipeline`.
struct FlashCPUPipelineOptions
    : public PassPipelineOptions<FlashCPUPipelineOptions> {
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

/// Registers `flash-cpu-pipeline` (and every later flash pipeline).
void registerFlashPipelines();

} // namespace flash
} // namespace mlir

#endif // FLASH_PIPELINES_PIPELINES_H
