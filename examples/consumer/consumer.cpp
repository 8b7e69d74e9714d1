//===- consumer.cpp - embedding the flash passes in another MLIR tool ----===//
//
// What an ML compiler does with an installed flash-mlir: put the dialect in
// its context, then run flash passes inside its own pass manager, either by
// C++ constructor or by textual pipeline.
//
//===----------------------------------------------------------------------===//
#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "flash/InitAll.h"
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

static const char *kInput = R"mlir(
func.func @attn(%q: tensor<2x100x64xf32>, %k: tensor<2x70x64xf32>,
                %v: tensor<2x70x48xf32>, %o: tensor<2x100x48xf32>)
    -> tensor<2x100x48xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x100x64xf32>,
           tensor<2x70x64xf32>, tensor<2x70x48xf32>)
         outs(%o : tensor<2x100x48xf32>) scale(0.125) mask(causal, top_left)
         -> tensor<2x100x48xf32>
  return %r : tensor<2x100x48xf32>
}
)mlir";

static int countAttention(mlir::ModuleOp module) {
  int n = 0;
  module.walk([&](mlir::flash::AttentionOp) { ++n; });
  return n;
}

int main() {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect>();
  mlir::flash::registerFlashDialects(registry);
  mlir::flash::registerFlashPasses();
  mlir::MLIRContext context(registry);

  for (bool textual : {false, true}) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(kInput, &context);
    if (!module || countAttention(*module) != 1) {
      llvm::errs() << "consumer: failed to parse flash.attention\n";
      return 1;
    }
    mlir::PassManager pm(&context);
    if (textual) {
      if (mlir::failed(mlir::parsePassPipeline(
              "flash-decompose-attention", pm))) {
        llvm::errs() << "consumer: flash pipeline not registered\n";
        return 1;
      }
    } else {
      pm.addPass(mlir::flash::createFlashDecomposeAttentionPass());
    }
    if (mlir::failed(pm.run(*module)) || countAttention(*module) != 0) {
      llvm::errs() << "consumer: decomposition failed\n";
      return 1;
    }
    llvm::outs() << (textual ? "textual" : "c++") << " pipeline: ok\n";
  }
  return 0;
}
