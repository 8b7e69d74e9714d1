//===- CPUPipeline.cpp - flash.attention to LLVM for the host CPU ---------===//
//
// The same pipeline serves the fused path and its unfused reference (the
// `reference` option swaps the first pass only), so benchmarks and tests
// compare the algorithms, not two different code generators.
//
//===----------------------------------------------------------------------===//
#include "flash/Pipelines/Pipelines.h"

#include "PipelineSteps.h"
#include "flash/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using flash::addFrontendToLinalg;

static void addTextual(OpPassManager &pm, StringRef pipeline) {
  flash::addTextualPipeline(pm, pipeline);
}

void mlir::flash::buildFlashCPUPipeline(
    OpPassManager &pm, const FlashCPUPipelineOptions &options) {
  if (options.raise) {
    pm.addNestedPass<func::FuncOp>(createFlashRaiseAttentionPass());
    addTextual(pm, "canonicalize");
  }
  // What a frontend put around the attention becomes linalg, which
  // bufferizes.
  addFrontendToLinalg(pm);
  // A paged KV cache is gathered into the contiguous form first, a packed
  // varlen batch split into one attention per sequence.
  pm.addPass(createFlashUnpageAttentionPass());
  pm.addPass(createFlashUnpackVarlenAttentionPass());
  if (options.reference) {
    pm.addPass(createFlashDecomposeAttentionPass());
  } else {
    FlashTileAttentionPassOptions tile;
    tile.blockQ = options.blockQ;
    tile.blockKv = options.blockKv;
    pm.addPass(createFlashTileAttentionPass(tile));
    // Gradients the tiled lowering does not take (float-capture gradients)
    // get their reference decomposition.
    pm.addPass(createFlashDecomposeAttentionPass());
  }
  pm.addPass(createFlashDecomposeAggregatedOpsPass());
  addTextual(pm, "canonicalize,cse");
  // Function boundaries take plain memrefs so that C callers (ctypes,
  // mlir-runner) pass ordinary strided descriptors; their tensor inputs are
  // never written.
  pm.addPass(createFlashReadOnlyTensorArgumentsPass());
  addTextual(pm, "one-shot-bufferize{bufferize-function-boundaries "
                 "function-boundary-type-conversion=identity-layout-map},"
                 "buffer-deallocation-pipeline,convert-bufferization-to-memref,"
                 "canonicalize");
  // Copies the bufferization left become loops, not runner-utils calls.
  pm.addPass(createFlashMemrefCopyToLinalgPass());
  addTextual(pm, "func.func(convert-linalg-to-loops),scf-forall-to-parallel");
  // Arithmetic on bf16/f16 is done in f32 (exactly what LLVM would do) and
  // the conversions that are left are expanded into integer ops, so the
  // object calls no compiler-runtime builtin (__truncsfbf2, __extendhfsf2)
  // that the loading machine's C runtime may not have.
  addTextual(pm, "arith-emulate-unsupported-floats{source-types=bf16,f16 "
                 "target-type=f32},math-extend-to-supported-types{target-type="
                 "f32}");
  pm.addPass(createFlashExpandFloatConversionsPass());
  if (options.parallel)
    addTextual(pm, "convert-scf-to-openmp");
  // finalize-memref-to-llvm runs before scf-to-cf: the OpenMP conversion wraps
  // each iteration in a memref.alloca_scope, which must be lowered while its
  // body is still a single block.
  addTextual(pm, "expand-strided-metadata,lower-affine,finalize-memref-to-llvm,"
                 "convert-scf-to-cf,convert-math-to-llvm,convert-to-llvm,"
                 "reconcile-unrealized-casts");
}

void mlir::flash::registerFlashPipelines() {
  PassPipelineRegistration<FlashCPUPipelineOptions>(
      "flash-cpu-pipeline",
      "Lower flash.attention on tensors to the LLVM dialect for the host CPU "
      "(fused online-softmax loop nest, or the unfused reference)",
      buildFlashCPUPipeline);
  registerFlashGPUPipeline();
}
