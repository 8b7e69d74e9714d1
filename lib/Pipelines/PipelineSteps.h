//===- PipelineSteps.h - steps both flash pipelines take ------*- C++ -*-===//
#ifndef FLASH_LIB_PIPELINES_PIPELINESTEPS_H
#define FLASH_LIB_PIPELINES_PIPELINESTEPS_H

#include "llvm/ADT/StringRef.h"

namespace mlir {
class OpPassManager;
namespace flash {

/// Appends a textual pipeline; a pipeline that does not parse is a bug here,
/// so it aborts with the parser's message.
void addTextualPipeline(OpPassManager &pm, llvm::StringRef pipeline);

/// What a frontend put around the attention, lowered to linalg: TOSA (which
/// the raise normalises only inside a function it rewrites) and elementwise
/// arith/math ops on tensors.
void addFrontendToLinalg(OpPassManager &pm);

} // namespace flash
} // namespace mlir

#endif // FLASH_LIB_PIPELINES_PIPELINESTEPS_H
