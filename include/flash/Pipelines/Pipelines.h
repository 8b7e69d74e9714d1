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

/// Options of `flash-gpu-pipeline`: the kernel knobs of convert-flash-to-gpu
/// and the code-generation target.
struct FlashGPUPipelineOptions
    : public PassPipelineOptions<FlashGPUPipelineOptions> {
  Option<bool> raise{*this, "raise",
                     llvm::cl::desc("First rewrite matmul-softmax-matmul "
                                    "chains into flash.attention"),
                     llvm::cl::init(true)};
  Option<std::string> chip{*this, "chip", llvm::cl::desc("Target chip"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> kernel{
      *this, "kernel",
      llvm::cl::desc("wgmma, portable, or auto (wgmma where it applies)"),
      llvm::cl::init("auto")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX features (ISA version)"),
                               llvm::cl::init("+ptx80")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Binary format: bin (cubin), isa (PTX), fatbin"),
      llvm::cl::init("bin")};
  Option<int> optLevel{*this, "opt-level",
                       llvm::cl::desc("NVVM optimisation level"),
                       llvm::cl::init(3)};
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("Query rows per CTA (0: by head dim)"),
                         llvm::cl::init(0)};
  Option<int64_t> blockN{*this, "block-n",
                         llvm::cl::desc("Key/value rows per tile"),
                         llvm::cl::init(128)};
  Option<int64_t> warpgroups{*this, "warpgroups",
                             llvm::cl::desc("Consumer warpgroups per CTA (0: block-m / 64)"),
                             llvm::cl::init(0)};
  Option<int64_t> stages{*this, "stages",
                         llvm::cl::desc("K/V shared-memory ring depth (0: auto)"),
                         llvm::cl::init(0)};
  Option<bool> overlap{*this, "overlap",
                       llvm::cl::desc("Software-pipelined tile loop"),
                       llvm::cl::init(false)};
  Option<int64_t> deferPV{*this, "defer-pv",
                          llvm::cl::desc("PV of the previous tile behind QK of this one "
                                         "(1 on, 0 off, -1 auto)"),
                          llvm::cl::init(-1)};
  Option<bool> pingpong{*this, "pingpong",
                        llvm::cl::desc("Consumer warpgroups take turns on the tensor cores"),
                        llvm::cl::init(false)};
  Option<bool> splitPV{*this, "split-pv",
                       llvm::cl::desc("64-column PV wgmmas"),
                       llvm::cl::init(false)};
  Option<int64_t> producerRegs{*this, "producer-regs",
                               llvm::cl::desc("setmaxnreg of the producer"),
                               llvm::cl::init(24)};
  Option<int64_t> ctasPerSM{*this, "ctas-per-sm",
                            llvm::cl::desc("CTAs per SM for the register cap (0: auto)"),
                            llvm::cl::init(0)};
  Option<int64_t> consumerRegs{*this, "consumer-regs",
                               llvm::cl::desc("setmaxnreg of the consumers"),
                               llvm::cl::init(240)};
};

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
