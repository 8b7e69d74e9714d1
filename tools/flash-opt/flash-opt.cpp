//===- flash-opt.cpp - mlir-opt with the flash dialect and passes ---------===//
#include "flash/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::flash::registerFlashPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::flash::registerFlashDialects(registry);

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "flash-mlir optimizer driver\n", registry));
}
