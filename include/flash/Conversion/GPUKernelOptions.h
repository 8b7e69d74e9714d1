//===- GPUKernelOptions.h - options of the flash.attention GPU lowering ---===//
//
// Generated from GPUKernelOptions.def: the values (GPUKernelOptions) that
// populateFlashToGPUPatterns takes, and the command-line declarations that
// convert-flash-to-gpu and flash-gpu-pipeline both register through
// GPUKernelOptionDecls.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_CONVERSION_GPUKERNELOPTIONS_H
#define FLASH_CONVERSION_GPUKERNELOPTIONS_H

#include "mlir/Pass/PassOptions.h"

#include <cstdint>
#include <string>

namespace mlir::flash {

/// The option values, with their defaults.
struct GPUKernelOptions {
#define FLASH_GPU_KERNEL_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)              \
  TYPE FIELD = DEFAULT;
#include "flash/Conversion/GPUKernelOptions.def"
};

/// The options declared on `owner`, a pass (OptionT = Pass::Option) or a
/// pipeline's PassOptions (OptionT = PassOptions::Option); `values()` reads
/// them back.
template <typename Owner, template <typename> class OptionT>
struct GPUKernelOptionDecls {
  explicit GPUKernelOptionDecls(Owner &owner) : owner(owner) {}
  GPUKernelOptionDecls(const GPUKernelOptionDecls &) = delete;

  Owner &owner;
#define FLASH_GPU_KERNEL_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)              \
  OptionT<TYPE> FIELD{owner, FLAG, llvm::cl::desc(DESC),                       \
                      llvm::cl::init(TYPE(DEFAULT))};
#include "flash/Conversion/GPUKernelOptions.def"

  GPUKernelOptions values() const {
    GPUKernelOptions v;
#define FLASH_GPU_KERNEL_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)              \
  v.FIELD = FIELD;
#include "flash/Conversion/GPUKernelOptions.def"
    return v;
  }
};

} // namespace mlir::flash

#endif // FLASH_CONVERSION_GPUKERNELOPTIONS_H
