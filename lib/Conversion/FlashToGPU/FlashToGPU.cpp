//===- FlashToGPU.cpp - the convert-flash-to-gpu pass ---------------------===//
#include "flash/Conversion/Passes.h"

#include "FlashToGPU.h"
#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::flash {
#define GEN_PASS_DEF_CONVERTFLASHTOGPUPASS
#include "flash/Conversion/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
struct ConvertFlashToGPUPass
    : public flash::impl::ConvertFlashToGPUPassBase<ConvertFlashToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    KernelConfig cfg;
    cfg.blockM = blockM;
    cfg.blockN = blockN;
    cfg.consumerWarpgroups = warpgroups;
    cfg.stages = stages;
    cfg.splitPV = splitPV;
    cfg.overlap = overlap;
    cfg.deferPV = deferPV;
    cfg.pingpong = pingpong;
    cfg.producerRegs = producerRegs;
    cfg.consumerRegs = consumerRegs;
    cfg.ctasPerSM = ctasPerSM;
    if (kernel != "auto" && kernel != "wgmma" && kernel != "mma" &&
        kernel != "portable") {
      module.emitError("convert-flash-to-gpu: kernel must be auto, wgmma, mma "
                       "or portable, got '")
          << kernel << "'";
      return signalPassFailure();
    }
    // sm_XY[a]: the portable kernel needs nothing newer than sm_70.
    unsigned smVersion = 0;
    StringRef chipRef(chip);
    if (!chipRef.consume_front("sm_") ||
        chipRef.take_while(llvm::isDigit).getAsInteger(10, smVersion) ||
        smVersion < 70) {
      module.emitError("convert-flash-to-gpu: chip '")
          << chip << "' is not an NVIDIA chip this lowering knows (sm_70 or "
                     "newer, e.g. sm_80, sm_90a)";
      return signalPassFailure();
    }
    bool hopper = chip == "sm_90a";
    if (kernel == "wgmma" && !hopper) {
      module.emitError("convert-flash-to-gpu: the wgmma kernel needs chip "
                       "sm_90a, got '")
          << chip << "'";
      return signalPassFailure();
    }
    if (kernel == "mma" && smVersion < 80) {
      module.emitError("convert-flash-to-gpu: the mma kernel needs sm_80 or "
                       "newer, got '")
          << chip << "'";
      return signalPassFailure();
    }
    if (cfg.blockM < 0 || cfg.consumerWarpgroups < 0 || cfg.ctasPerSM < 0 ||
        (cfg.blockM > 0 && cfg.consumerWarpgroups > 0 &&
         cfg.blockM != 64 * cfg.consumerWarpgroups) ||
        cfg.blockN < 16 || cfg.blockN > 256 || cfg.blockN % 16 != 0 ||
        cfg.stages < 0 || cfg.deferPV < -1 || cfg.deferPV > 1 ||
        ((cfg.overlap || cfg.deferPV == 1) && cfg.stages > 0 &&
         cfg.stages < 3) ||
        (cfg.overlap && (cfg.deferPV == 1 || cfg.pingpong))) {
      module.emitError("convert-flash-to-gpu: need block-m = 64 * warpgroups (0: automatic), "
                       "block-n a multiple of 16 in [16, 256], stages >= 1 "
                       "(>= 3 with overlap or defer-pv; 0: automatic), defer-pv "
                       "in {-1, 0, 1}, and overlap without defer-pv or pingpong");
      return signalPassFailure();
    }

    SmallVector<AttentionOp> ops;
    module.walk([&](AttentionOp op) { ops.push_back(op); });
    DenseMap<Operation *, Value> streams;
    int64_t index = 0;
    for (AttentionOp op : ops) {
      auto func = op->getParentOfType<func::FuncOp>();
      if (!func) {
        op.emitOpError("convert-flash-to-gpu: must be inside a func.func");
        return signalPassFailure();
      }
      Value &stream = streams[func];
      if (!stream) {
        unsigned n = func.getNumArguments();
        auto ptrTy = LLVM::LLVMPointerType::get(&getContext());
        if (failed(func.insertArgument(
                n, ptrTy,
                DictionaryAttr::get(&getContext(),
                                    {NamedAttribute(
                                        StringAttr::get(&getContext(),
                                                        "flash.stream"),
                                        UnitAttr::get(&getContext()))}),
                func.getLoc())))
          return signalPassFailure();
        stream = func.getArgument(n);
      }
      FailureOr<OperandBuffers> bufs = operandBuffers(op);
      if (failed(bufs))
        return signalPassFailure();
      LogicalResult lowered = failure();
      if (kernel == "wgmma" ||
          (kernel == "auto" && hopper && wgmmaKernelSupports(op)))
        lowered = lowerToLaunch(op, *bufs, cfg, stream, index++);
      else if (kernel == "mma" ||
               (kernel == "auto" && smVersion >= 80 && mmaKernelSupports(op)))
        lowered = lowerToMmaLaunch(op, *bufs, stream, index++);
      else
        lowered = lowerToPortableLaunch(op, *bufs, stream, index++);
      if (failed(lowered))
        return signalPassFailure();
    }

    // The result already lives in its destination: drop the copy into it and
    // the tensor views nothing reads any more.
    module.walk([](bufferization::MaterializeInDestinationOp m) {
      auto src = m.getSource().getDefiningOp<bufferization::ToTensorOp>();
      if (src && src.getBuffer() == m.getDest())
        m->erase();
    });
    module.walk([](bufferization::ToTensorOp t) {
      if (t->use_empty())
        t->erase();
    });
  }
};
} // namespace
