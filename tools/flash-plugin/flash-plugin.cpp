//===- flash-plugin.cpp - the flash dialect and passes for upstream mlir-opt ===//
//
// One shared object serving both plugin entry points, so a stock mlir-opt
// (`--load-dialect-plugin` / `--load-pass-plugin`) sees exactly what flash-opt
// sees. It links the shared libMLIR that mlir-opt itself uses: a second,
// static copy would carry its own dialect and pass registries.
//
//===----------------------------------------------------------------------===//
#include "flash/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

using namespace mlir;

extern "C" LLVM_ATTRIBUTE_WEAK DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "FlashPlugin", LLVM_VERSION_STRING,
          [](DialectRegistry *registry) {
            flash::registerFlashDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "FlashPlugin", LLVM_VERSION_STRING,
          []() { flash::registerFlashPasses(); }};
}
