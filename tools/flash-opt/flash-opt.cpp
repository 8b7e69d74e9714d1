//===- flash-opt.cpp - mlir-opt with the flash dialect and passes ---------===//
#include "flash/InitAll.h"

#include "TestPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cstdlib>

using namespace mlir;

// Upstream's --verify-roundtrip re-reads the generic form only, which never
// runs a custom parser or printer; this checks the custom form, of the input
// and of what the passes made.
static llvm::cl::opt<bool> verifyRoundTrip(
    "verify-custom-roundtrip",
    llvm::cl::desc("Check that the input and the output of the passes print, "
                   "parse and print again identically (test-flash-round-trip "
                   "before and after the pipeline)"),
    llvm::cl::init(false));

/// The flag, or FLASH_VERIFY_ROUNDTRIP=1 in the environment: the lit suite
/// sets it, so flash-opt started by the tests' own scripts checks too.
static bool shouldVerifyRoundTrip() {
  if (verifyRoundTrip)
    return true;
  const char *env = std::getenv("FLASH_VERIFY_ROUNDTRIP");
  return env && *env && llvm::StringRef(env) != "0";
}

int main(int argc, char **argv) {
  registerAllPasses();
  flash::registerFlashPasses();
  flash::test::registerTestPasses();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  flash::registerFlashDialects(registry);

  llvm::InitLLVM init(argc, argv);
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "flash-mlir optimizer driver\n", registry);
  if (!shouldVerifyRoundTrip())
    return asMainReturnCode(
        MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  MlirOptMainConfig inner = config;
  config.setPassPipelineSetupFn([inner](PassManager &pm) -> LogicalResult {
    pm.addPass(flash::test::createTestRoundTripPass());
    if (failed(inner.setupPassPipeline(pm)))
      return failure();
    pm.addPass(flash::test::createTestRoundTripPass());
    return success();
  });
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return EXIT_FAILURE;
  output->keep();
  return EXIT_SUCCESS;
}
