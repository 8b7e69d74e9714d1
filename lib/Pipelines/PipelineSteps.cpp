//===- PipelineSteps.cpp - steps both flash pipelines take ----------------===//
#include "PipelineSteps.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

void flash::addTextualPipeline(OpPassManager &pm, StringRef pipeline) {
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine("flash pipeline: ") + error);
}

void flash::addFrontendToLinalg(OpPassManager &pm) {
  addTextualPipeline(pm, "func.func(tosa-to-linalg-named,tosa-to-linalg,"
                         "tosa-to-arith,tosa-to-tensor),"
                         "convert-elementwise-to-linalg");
}
