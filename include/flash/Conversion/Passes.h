//===- Passes.h - flash conversion passes ---------------------*- C++ -*-===//
#ifndef FLASH_CONVERSION_PASSES_H
#define FLASH_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "flash/Conversion/GPUKernelOptions.h"

namespace mlir::flash {

#define GEN_PASS_DECL
#include "flash/Conversion/Passes.h.inc"

/// One pattern per kernel strategy (wgmma, mma, portable), each lowering a
/// flash.attention in destination-passing style on memrefs to a kernel and
/// its launch on the stream argument of the enclosing function (marked
/// `flash.stream`) when it is the strategy `options` select for the op.
void populateFlashToGPUPatterns(RewritePatternSet &patterns,
                                const GPUKernelOptions &options);

/// convert-flash-to-gpu with these option values.
std::unique_ptr<Pass>
createConvertFlashToGPUPass(const GPUKernelOptions &options);

#define GEN_PASS_REGISTRATION
#include "flash/Conversion/Passes.h.inc"

} // namespace mlir::flash

#endif // FLASH_CONVERSION_PASSES_H
