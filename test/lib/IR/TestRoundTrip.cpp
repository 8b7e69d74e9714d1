//===- TestRoundTrip.cpp - print, parse, print again, and compare --------===//
//
// `test-flash-round-trip` prints the module in its custom form, parses that
// text into a fresh context and prints it again: the two texts must be
// identical, and each flash op must read back with the same attributes
// (compared in their generic spelling, which catches a custom printer that
// loses information the same way twice, a rounded float). flash-opt runs it on the
// input and the output of every invocation with --verify-custom-roundtrip,
// which the lit suite turns on for every RUN line.
//
//===----------------------------------------------------------------------===//
#include "TestPasses.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace {

std::string print(Operation *op, OpPrintingFlags flags) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os, flags);
  return text;
}

/// Properties and discardable attributes in their generic spelling, which
/// prints every float exactly.
std::string printAttributes(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (Attribute props = op->getPropertiesAsAttribute())
    os << props;
  os << " " << op->getDiscardableAttrDictionary();
  return text;
}

/// The first line where `a` and `b` differ, 1-based, with both versions.
std::tuple<size_t, StringRef, StringRef> firstDifference(StringRef a,
                                                         StringRef b) {
  size_t line = 1;
  while (true) {
    auto [lineA, restA] = a.split('\n');
    auto [lineB, restB] = b.split('\n');
    if (lineA != lineB || (restA.empty() && restB.empty()))
      return {line, lineA, lineB};
    a = restA;
    b = restB;
    ++line;
  }
}

struct TestRoundTripPass
    : public PassWrapper<TestRoundTripPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestRoundTripPass)

  StringRef getArgument() const final { return "test-flash-round-trip"; }
  StringRef getDescription() const final {
    return "Check that the module prints, parses and prints again "
           "identically (custom and generic form)";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpPrintingFlags custom;
    std::string printed = print(module, custom);

    // A fresh context, so nothing (attribute storage, resource names) is
    // shared with the original.
    MLIRContext context(getContext().getDialectRegistry(),
                        MLIRContext::Threading::DISABLED);
    context.allowUnregisteredDialects(
        getContext().allowsUnregisteredDialects());
    std::string parseErrors;
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBuffer(printed, "printed", false),
        llvm::SMLoc());
    llvm::raw_string_ostream errors(parseErrors);
    SourceMgrDiagnosticHandler handler(sourceMgr, &context, errors);
    OwningOpRef<ModuleOp> reparsed =
        parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
    if (!reparsed) {
      module.emitError("the printed module does not parse back:\n")
          << parseErrors;
      return signalPassFailure();
    }

    std::string reprinted = print(*reparsed, custom);
    if (reprinted != printed) {
      auto [line, was, now] = firstDifference(printed, reprinted);
      module.emitError("the printed module reads back differently (custom "
                       "form), first at line ")
          << line << ":\n  printed:   " << was << "\n  reprinted: " << now;
      return signalPassFailure();
    }
    // The custom form is the same twice; the flash ops must also hold the
    // same attributes, or the printer lost something the same way twice (a
    // rounded float). Upstream ops are left to the text comparison: their
    // parsers fill in default-valued properties that a builder left unset.
    SmallVector<Operation *> before, after;
    module->walk([&](Operation *op) { before.push_back(op); });
    (*reparsed)->walk([&](Operation *op) { after.push_back(op); });
    if (before.size() != after.size()) {
      module.emitError("the printed module reads back with ")
          << after.size() << " ops instead of " << before.size();
      return signalPassFailure();
    }
    for (auto [was, now] : llvm::zip(before, after)) {
      if (was->getName().getDialectNamespace() != "flash")
        continue;
      std::string wasAttrs = printAttributes(was);
      std::string nowAttrs = printAttributes(now);
      if (wasAttrs != nowAttrs) {
        was->emitError("reads back with different attributes:\n  original: ")
            << wasAttrs << "\n  re-read:  " << nowAttrs;
        return signalPassFailure();
      }
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::flash::test::createTestRoundTripPass() {
  return std::make_unique<TestRoundTripPass>();
}

void mlir::flash::test::registerTestRoundTripPass() {
  PassRegistration<TestRoundTripPass>();
}
