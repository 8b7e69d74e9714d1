//===- flash-pipeline-fuzzer.cpp - libFuzzer over parse → raise → lower --===//
//
// Each input is parsed and verified as a module; what parses goes through
// flash-raise-attention, and the result through each lowering on its own copy:
// flash-tile-attention, flash-decompose-attention, flash-attention-into-
// destination + convert-flash-to-gpu (the GPU IR, no ptxas), and
// flash-unpage-attention + flash-tile-attention (paged caches). Every pass runs
// with the verifier after it. Diagnostics are the expected outcome for most
// inputs and are dropped; a crash or a sanitizer report is a finding.
//
//===----------------------------------------------------------------------===//
#include "flash/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cctype>
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <memory>
#include <string>

using namespace mlir;

static DialectRegistry *registry;

static constexpr const char *kRaise =
    "builtin.module(func.func(flash-raise-attention))";
static constexpr const char *kLowerings[] = {
    "builtin.module(flash-tile-attention)",
    "builtin.module(flash-decompose-attention)",
    "builtin.module(func.func(flash-attention-into-destination),"
    "convert-flash-to-gpu)",
    "builtin.module(flash-unpage-attention,flash-tile-attention)",
};

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  flash::registerFlashPasses();
  registry = new DialectRegistry();
  registerAllDialects(*registry);
  registerAllExtensions(*registry);
  flash::registerFlashDialects(*registry);
  return 0;
}

static LogicalResult run(ModuleOp module, const char *pipeline) {
  PassManager pm(module->getContext());
  if (failed(parsePassPipeline(pipeline, pm)))
    return failure();
  return pm.run(module);
}

/// MLIR 22.1.8's parsers of linalg.reduce, linalg.broadcast and
/// linalg.transpose store DenseI64ArrayAttr::parse's result unchecked, so a
/// malformed `dimensions = [...]` or `permutation = [...]` is a null attribute
/// and a segfault in NamedAttrList::set (bench/NOTES.md has the reproducer).
/// Inputs where such a list is anything but integers are not ours to fuzz.
static bool hitsUpstreamIndexListCrash(StringRef text) {
  for (StringRef keyword : {"dimensions", "permutation"}) {
    for (size_t at = text.find(keyword); at != StringRef::npos;
         at = text.find(keyword, at + 1)) {
      StringRef rest = text.drop_front(at + keyword.size()).ltrim();
      if (!rest.consume_front("="))
        continue;
      rest = rest.ltrim();
      if (!rest.consume_front("["))
        return true;
      // The list DenseI64ArrayAttr parses: `]`, or integers (an optional
      // sign, then digits) separated by commas. `[1- 0]` has only list
      // characters and still yields the null attribute.
      rest = rest.ltrim();
      if (rest.consume_front("]"))
        continue;
      for (;;) {
        rest.consume_front("-");
        size_t digits = rest.find_first_not_of("0123456789");
        // Past 18 digits the value may not fit in 64 bits: also a null.
        if (digits == 0 || digits == StringRef::npos || digits > 18)
          return true;
        rest = rest.drop_front(digits).ltrim();
        if (rest.consume_front("]"))
          break;
        if (!rest.consume_front(","))
          return true;
        rest = rest.ltrim();
      }
    }
  }
  return false;
}

/// MLIR 22.1.8's parseDenseArrayAttr asks any element type for its bit
/// width, so `array<index: 1>` (or any type that is neither an integer nor
/// a float) is a segfault in FloatType::getWidth (bench/NOTES.md has the
/// reproducer). Inputs where `array<` names another type are not ours.
static bool hitsUpstreamDenseArrayCrash(StringRef text) {
  for (size_t at = text.find("array<"); at != StringRef::npos;
       at = text.find("array<", at + 1)) {
    StringRef rest = text.drop_front(at + 6).ltrim();
    StringRef type = rest.take_while([](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; });
    StringRef bits = type;
    bool isInt = (bits.consume_front("si") || bits.consume_front("ui") ||
                  bits.consume_front("i")) &&
                 !bits.empty() &&
                 bits.find_first_not_of("0123456789") == StringRef::npos;
    bool isFloat = type == "f16" || type == "bf16" || type == "f32" ||
                   type == "f64";
    if (!isInt && !isFloat)
      return true;
  }
  return false;
}

/// MLIR 22.1.8's linalg.generic parser casts each `iterator_types` entry to
/// a string unchecked, so `iterator_types = [1.0]` reads garbage and aborts
/// ("LLVM ERROR: out of memory"; bench/NOTES.md has the reproducer). Inputs
/// whose list holds anything but strings are not ours to fuzz.
static bool hitsUpstreamIteratorTypesCrash(StringRef text) {
  for (size_t at = text.find("iterator_types"); at != StringRef::npos;
       at = text.find("iterator_types", at + 1)) {
    StringRef rest = text.drop_front(at + 14).ltrim();
    if (!rest.consume_front("="))
      continue;
    rest = rest.ltrim();
    if (!rest.consume_front("["))
      return true;
    while (true) {
      rest = rest.ltrim();
      if (rest.consume_front("]"))
        break;
      if (!rest.consume_front("\""))
        return true;
      size_t close = rest.find('"');
      if (close == StringRef::npos)
        return true;
      rest = rest.drop_front(close + 1).ltrim();
      if (rest.consume_front("]"))
        break;
      if (!rest.consume_front(","))
        return true;
    }
  }
  return false;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StringRef text(reinterpret_cast<const char *>(data), size);
  if (hitsUpstreamIndexListCrash(text) || hitsUpstreamDenseArrayCrash(text) ||
      hitsUpstreamIteratorTypesCrash(text))
    return -1; // and kept out of the corpus
  MLIRContext context(*registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
  // MLIR's lexer stops at a NUL after the buffer; libFuzzer's data has none.
  std::string source = text.str();
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  sourceMgr->AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(source, "input",
                                       /*RequiresNullTerminator=*/true),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    return 0;
  if (failed(run(*module, kRaise)))
    return 0;
  for (const char *lowering : kLowerings) {
    OwningOpRef<ModuleOp> copy = cast<ModuleOp>((*module)->clone());
    (void)run(*copy, lowering);
  }
  return 0;
}
