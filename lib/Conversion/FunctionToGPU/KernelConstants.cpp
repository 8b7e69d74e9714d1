//===- KernelConstants.cpp - a launch's constant sizes folded into its kernel
//-===//
//
// The kernels take their sizes as arguments; for a static shape the launch
// passes constants, which the kernel cannot see: every division by Lq, every
// bound and trip count stays run-time arithmetic, and values kept across the
// persistent grid's item loop are held in registers (or spilled). A kernel
// launched from one place only can be specialised on that launch's constants
// without changing its signature, as Triton specialises on constexpr
// arguments.
//
//===----------------------------------------------------------------------===//
#include "flash/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHSPECIALIZEKERNELCONSTANTSPASS
#include "flash/Conversion/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

namespace {
struct FlashSpecializeKernelConstantsPass
    : flash::impl::FlashSpecializeKernelConstantsPassBase<
          FlashSpecializeKernelConstantsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    // Each kernel's launches, in program order.
    llvm::MapVector<gpu::GPUFuncOp, SmallVector<gpu::LaunchFuncOp, 1>> sites;
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto fn = symbols.lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernel());
      if (fn)
        sites[fn].push_back(launch);
    });
    for (auto &[fn, launches] : sites) {
      if (launches.size() != 1 || !onlyLaunchedBy(fn, launches.front()))
        continue;
      gpu::LaunchFuncOp launch = launches.front();
      ValueRange operands = launch.getKernelOperands();
      if (operands.size() != fn.getNumArguments())
        continue;
      OpBuilder b = OpBuilder::atBlockBegin(&fn.getBody().front());
      for (auto [i, operand] : llvm::enumerate(operands)) {
        BlockArgument arg = fn.getArgument(i);
        IntegerAttr value;
        if (arg.use_empty() || !arg.getType().isIntOrIndex() ||
            operand.getType() != arg.getType() ||
            !matchPattern(operand, m_Constant(&value)))
          continue;
        arg.replaceAllUsesWith(
            arith::ConstantOp::create(b, fn.getLoc(), value));
      }
    }
  }

  /// Whether every use of `fn`'s symbol in the module is `launch`: a symbol
  /// named anywhere else (another launch, a reference from host code) may
  /// reach the kernel with other values.
  bool onlyLaunchedBy(gpu::GPUFuncOp fn, gpu::LaunchFuncOp launch) {
    auto module = fn->getParentOfType<gpu::GPUModuleOp>();
    if (!module)
      return false;
    std::optional<SymbolTable::UseRange> moduleUses =
        SymbolTable::getSymbolUses(module, getOperation());
    if (!moduleUses)
      return false;
    for (const SymbolTable::SymbolUse &use : *moduleUses) {
      Operation *user = use.getUser();
      if (user == launch.getOperation())
        continue;
      // Another op naming the kernel module: a different kernel of it is
      // harmless, this kernel is not.
      auto other = dyn_cast<gpu::LaunchFuncOp>(user);
      if (!other || other.getKernelName() == fn.getName())
        return false;
    }
    return true;
  }
};
} // namespace
