//===- VarlenLaunch.cpp - which kernel runs a packed varlen batch ---------===//
//
// A flash.varlen_attention runs the tile program of the prefill kernels with
// another work decomposition (each block finds its sequence and query block
// through the offsets, varlenSequenceBlock) and rows at the sequences'
// token offsets: the wgmma kernel on sm_90a (TMA boxes of the packed
// [tokens, heads, D] tensors), the mma.sync kernel elsewhere and for the
// head dims wgmma does not take. kernel=auto takes the first that applies;
// kernel=wgmma or kernel=mma insists on one.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

namespace {
enum class VarlenKernel { Wgmma, Mma };
} // namespace

static FailureOr<VarlenKernel> selectVarlenKernel(VarlenAttentionOp op,
                                                  const GPUKernelOptions &options,
                                                  const ChipInfo &chip,
                                                  std::string &why) {
  const std::string &k = options.kernel;
  if (k != "auto" && k != "wgmma" && k != "mma") {
    why = "a packed varlen batch is run by the wgmma or the mma kernel "
          "(kernel=auto, wgmma or mma), got kernel=" +
          k;
    return failure();
  }
  std::string wgmmaWhy;
  if (k != "mma" && wgmmaSupportsVarlen(op, chip, wgmmaWhy))
    return VarlenKernel::Wgmma;
  if (k == "wgmma") {
    why = wgmmaWhy;
    return failure();
  }
  if (mmaSupportsVarlen(op, chip, why))
    return VarlenKernel::Mma;
  return failure();
}

bool gpu_lowering::varlenAttentionSupported(VarlenAttentionOp op,
                                            const GPUKernelOptions &options,
                                            const ChipInfo &chip,
                                            std::string &why) {
  return succeeded(selectVarlenKernel(op, options, chip, why));
}

LogicalResult gpu_lowering::lowerVarlenAttention(
    RewriterBase &rewriter, VarlenAttentionOp op, const OperandBuffers &bufs,
    const GPUKernelOptions &options, const ChipInfo &chip) {
  std::string why;
  FailureOr<VarlenKernel> kernel = selectVarlenKernel(op, options, chip, why);
  if (failed(kernel))
    return op.emitOpError("convert-flash-to-gpu: ") << why;
  if (*kernel == VarlenKernel::Wgmma)
    return lowerVarlenToWgmmaLaunch(rewriter, op, bufs, options, chip);
  return lowerVarlenToMmaLaunch(rewriter, op, bufs);
}
