//===- ReadOnlyTensorArguments.cpp - a function's tensor inputs stay intact ===//
//
// A function on tensors has value semantics: its caller's arrays are inputs,
// never outputs. One-shot bufferization with function boundaries treats a
// tensor argument as writable unless told otherwise, so an elementwise op
// lowered to a linalg.generic whose init is its operand (as
// convert-elementwise-to-linalg writes them) would overwrite the caller's
// buffer in place. Marking the arguments `bufferization.writable = false`
// makes such a write go to a new buffer instead.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHREADONLYTENSORARGUMENTSPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

namespace {
struct FlashReadOnlyTensorArgumentsPass
    : flash::impl::FlashReadOnlyTensorArgumentsPassBase<
          FlashReadOnlyTensorArgumentsPass> {
  void runOnOperation() override {
    StringRef name = bufferization::BufferizationDialect::kWritableAttrName;
    getOperation()->walk([&](FunctionOpInterface func) {
      if (func.isExternal())
        return;
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        // An explicit choice (a caller that hands over a buffer to reuse)
        // is kept.
        if (isa<TensorType>(func.getArgument(i).getType()) &&
            !func.getArgAttr(i, name))
          func.setArgAttr(i, name, BoolAttr::get(&getContext(), false));
    });
  }
};
} // namespace
