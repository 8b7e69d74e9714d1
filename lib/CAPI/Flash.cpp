//===- Flash.cpp - the flash-mlir C API -----------------------------------===//
//
// Every entry point runs its work under a crash-recovery context with a fatal
// error handler, so report_fatal_error (and, if it happens, a crash) in MLIR
// or LLVM becomes an error string instead of taking the host process down.
// A context that saw such an error is marked unusable: its state is unknown.
//
//===----------------------------------------------------------------------===//
#include "flash-c/Flash.h"

#include "flash/InitAll.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#ifndef FLASH_VERSION_STRING
#define FLASH_VERSION_STRING "unknown"
#endif

using namespace mlir;

struct FlashModule {
  FlashContext *context;
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module;
};

struct FlashContext {
  MLIRContext mlir;
  bool poisoned = false;
  std::list<FlashModule> modules;

  explicit FlashContext(const DialectRegistry &registry)
      : mlir(registry, MLIRContext::Threading::DISABLED) {}
};

//===----------------------------------------------------------------------===//
// Strings and errors
//===----------------------------------------------------------------------===//

static void setString(FlashString *out, llvm::StringRef value) {
  if (!out)
    return;
  out->data = static_cast<char *>(std::malloc(value.size() + 1));
  if (!out->data) {
    out->size = 0;
    return;
  }
  std::memcpy(out->data, value.data(), value.size());
  out->data[value.size()] = '\0';
  out->size = value.size();
}

static void clearString(FlashString *s) {
  if (s) {
    s->data = nullptr;
    s->size = 0;
  }
}

namespace {
/// Collects what goes wrong in one API call: diagnostics (rendered with the
/// source line when the location is in the parsed buffer) and messages of
/// our own.
struct ErrorSink {
  std::string text;
  llvm::raw_string_ostream os{text};

  bool empty() const { return text.empty(); }
};

/// Routes the context's diagnostics into an ErrorSink for one call. Notes and
/// remarks are kept, warnings too: they explain a following error.
class ScopedCapture {
public:
  ScopedCapture(MLIRContext &ctx, llvm::SourceMgr &sourceMgr, ErrorSink &sink)
      : handler(sourceMgr, &ctx, sink.os) {}

private:
  SourceMgrDiagnosticHandler handler;
};
} // namespace

/// Pass-option parsing reports unknown or malformed options of registered
/// pipelines on llvm::errs(), not the error stream it is given; redirect
/// file descriptor 2 for that step so the message reaches the caller.
class ScopedStderrCapture {
public:
  ScopedStderrCapture() {
    llvm::errs().flush();
    std::fflush(stderr);
    file = std::tmpfile();
    saved = file ? ::dup(2) : -1;
    if (saved >= 0 && ::dup2(::fileno(file), 2) < 0) {
      ::close(saved);
      saved = -1;
    }
  }
  /// Restores stderr and returns what was written to it meanwhile.
  std::string finish() {
    std::string text;
    if (saved < 0)
      return text;
    llvm::errs().flush();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    saved = -1;
    std::rewind(file);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
      text.append(buffer, n);
    return text;
  }
  ~ScopedStderrCapture() {
    finish();
    if (file)
      std::fclose(file);
  }

private:
  std::FILE *file = nullptr;
  int saved = -1;
};

// Fatal errors inside a guarded call land here: keep the reason and unwind
// to the RunSafely of that call instead of exiting.
static thread_local std::string *fatalReason = nullptr;

static void onFatalError(void *, const char *reason, bool) {
  if (fatalReason)
    *fatalReason = reason ? reason : "";
  if (llvm::CrashRecoveryContext *crc = llvm::CrashRecoveryContext::GetCurrent())
    crc->HandleExit(1);
}

/// Runs `fn` so that neither a fatal error nor a crash escapes. Returns
/// failure with `error` set when `fn` fails or does not finish.
static FlashStatus guarded(FlashContext *context, FlashString *error,
                           llvm::function_ref<LogicalResult(ErrorSink &)> fn) {
  clearString(error);
  if (context && context->poisoned) {
    setString(error, "flash: this context hit an internal error earlier and "
                     "cannot be used any more; create a new one");
    return FLASH_FAILURE;
  }
  // Fatal-error handlers and crash recovery are process-wide in LLVM.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);

  ErrorSink sink;
  std::string reason;
  bool ok = false;
  bool finished;
  {
    fatalReason = &reason;
    llvm::ScopedFatalErrorHandler fatal(onFatalError);
    llvm::CrashRecoveryContext::Enable();
    llvm::CrashRecoveryContext crc;
    finished = crc.RunSafely([&] { ok = succeeded(fn(sink)); });
    llvm::CrashRecoveryContext::Disable();
    fatalReason = nullptr;
  }
  if (finished && ok)
    return FLASH_SUCCESS;
  if (!finished) {
    if (context)
      context->poisoned = true;
    sink.os << "flash: internal error"
            << (reason.empty() ? std::string(" (crash)") : ": " + reason)
            << "\n";
  }
  if (sink.empty())
    sink.os << "flash: failed without a diagnostic\n";
  setString(error, sink.text);
  return FLASH_FAILURE;
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void flashRegisterAllPasses(void) {
  static std::once_flag once;
  std::call_once(once, [] {
    registerAllPasses();
    flash::registerFlashPasses();
  });
}

int flashIsRegisteredPass(const char *name) {
  flashRegisterAllPasses();
  if (!name)
    return 0;
  return PassInfo::lookup(name) || PassPipelineInfo::lookup(name);
}

const char *flashVersion(void) {
  return "flash-mlir " FLASH_VERSION_STRING " (MLIR " LLVM_VERSION_STRING ")";
}

static void initNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

const char *flashHostTarget(void) {
  static std::string target = [] {
    initNativeTarget();
    auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!builder) {
      llvm::consumeError(builder.takeError());
      return std::string("unknown");
    }
    return builder->getTargetTriple().str() + "/" + builder->getCPU();
  }();
  return target.c_str();
}

FlashContext *flashContextCreate(void) {
  flashRegisterAllPasses();
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  flash::registerFlashDialects(registry);
  auto *context = new FlashContext(registry);
  // Keep diagnostics free of stack traces and with the op that failed.
  context->mlir.printOpOnDiagnostic(true);
  context->mlir.printStackTraceOnDiagnostic(false);
  return context;
}

void flashContextDestroy(FlashContext *context) { delete context; }

//===----------------------------------------------------------------------===//
// Modules
//===----------------------------------------------------------------------===//

FlashModule *flashModuleParse(FlashContext *context, const char *data,
                              size_t size, const char *name,
                              FlashString *error) {
  if (!context) {
    clearString(error);
    setString(error, "flash: null context");
    return nullptr;
  }
  FlashModule *result = nullptr;
  guarded(context, error, [&](ErrorSink &sink) -> LogicalResult {
    context->modules.emplace_back();
    FlashModule &module = context->modules.back();
    module.context = context;
    module.sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(
            llvm::StringRef(data ? data : "", data ? size : 0),
            name && *name ? name : "<input>"),
        llvm::SMLoc());
    ScopedCapture capture(context->mlir, module.sourceMgr, sink);
    // The op a verifier rejects at parse time prints as generic IR with
    // unknown operands: the source line shown with the error says more.
    context->mlir.printOpOnDiagnostic(false);
    ParserConfig config(&context->mlir);
    module.module = parseSourceFile<ModuleOp>(module.sourceMgr, config);
    context->mlir.printOpOnDiagnostic(true);
    if (!module.module) {
      context->modules.pop_back();
      return failure();
    }
    result = &module;
    return success();
  });
  return result;
}

void flashModuleDestroy(FlashModule *module) {
  if (!module)
    return;
  auto &modules = module->context->modules;
  for (auto it = modules.begin(); it != modules.end(); ++it)
    if (&*it == module) {
      modules.erase(it);
      return;
    }
}

/// The textual pipeline for a (name, options) pair or a pipeline string.
static std::string pipelineText(llvm::StringRef pipeline,
                                llvm::StringRef options) {
  pipeline = pipeline.trim();
  if (options.trim().empty())
    return pipeline.str();
  return (pipeline + "{" + options.trim() + "}").str();
}

FlashStatus flashModuleRunPipeline(FlashModule *module, const char *pipeline,
                                   const char *options, FlashString *error) {
  if (!module || !pipeline) {
    clearString(error);
    setString(error, "flash: null module or pipeline");
    return FLASH_FAILURE;
  }
  FlashContext *context = module->context;
  return guarded(context, error, [&](ErrorSink &sink) -> LogicalResult {
    std::string text = pipelineText(pipeline, options ? options : "");
    if (!options || !*options) {
      // A bare word that names nothing is the most common mistake; say so
      // before the pipeline parser's more general message.
      llvm::StringRef name(pipeline);
      name = name.trim();
      if (!name.contains('(') && !name.contains(',') && !name.contains('{') &&
          !flashIsRegisteredPass(name.str().c_str())) {
        sink.os << "flash: '" << name
                << "' is not a registered pass or pass pipeline\n";
        return failure();
      }
    }
    // Pipelines are anchored on builtin.module. A single pass restricted to
    // another op ("flash-raise-attention" runs on func.func) is nested into
    // that op, as one means when naming just the pass.
    if (!llvm::StringRef(text).starts_with("builtin.module("))
      text = "builtin.module(" + text + ")";
    auto parse = [&](const std::string &pipelineText, std::string &errors) {
      llvm::raw_string_ostream os(errors);
      ScopedStderrCapture capture;
      FailureOr<OpPassManager> result = parsePassPipeline(pipelineText, os);
      std::string printed = capture.finish();
      if (failed(result))
        os << printed;
      return result;
    };
    std::string parseErrors;
    FailureOr<OpPassManager> parsed = parse(text, parseErrors);
    llvm::StringRef marker = "' restricted to '";
    size_t at = parseErrors.find(marker.str());
    llvm::StringRef inner = llvm::StringRef(text).drop_front(
        llvm::StringRef("builtin.module(").size()).drop_back();
    if (failed(parsed) && at != std::string::npos &&
        !inner.contains(',') && !inner.contains('(')) {
      llvm::StringRef rest =
          llvm::StringRef(parseErrors).substr(at + marker.size());
      std::string opName = rest.take_until([](char c) { return c == '\''; }).str();
      std::string nested = "builtin.module(" + opName + "(" + inner.str() + "))";
      std::string nestedErrors;
      FailureOr<OpPassManager> retry = parse(nested, nestedErrors);
      if (succeeded(retry)) {
        parsed = std::move(retry);
        parseErrors.clear();
        text = nested;
      }
    }
    sink.os << parseErrors;
    if (failed(parsed)) {
      sink.os << "\nflash: could not parse the pass pipeline '" << text
              << "'\n";
      return failure();
    }
    PassManager pm(&context->mlir, parsed->getOpAnchorName());
    static_cast<OpPassManager &>(pm) = std::move(*parsed);
    ScopedCapture capture(context->mlir, module->sourceMgr, sink);
    if (failed(pm.run(*module->module))) {
      if (sink.empty())
        sink.os << "flash: pipeline '" << text << "' failed\n";
      return failure();
    }
    return success();
  });
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

static std::unique_ptr<llvm::TargetMachine> hostTargetMachine(int optLevel,
                                                              ErrorSink &sink) {
  initNativeTarget();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    sink.os << "flash: cannot detect the host target: "
            << llvm::toString(builder.takeError()) << "\n";
    return nullptr;
  }
  // Position-independent: callers link the object into a shared library.
  builder->setRelocationModel(llvm::Reloc::PIC_);
  builder->setCodeGenOptLevel(optLevel <= 0   ? llvm::CodeGenOptLevel::None
                              : optLevel == 1 ? llvm::CodeGenOptLevel::Less
                              : optLevel == 2 ? llvm::CodeGenOptLevel::Default
                                              : llvm::CodeGenOptLevel::Aggressive);
  auto tm = builder->createTargetMachine();
  if (!tm) {
    sink.os << "flash: cannot create the host target machine: "
            << llvm::toString(tm.takeError()) << "\n";
    return nullptr;
  }
  return std::move(*tm);
}

static LogicalResult emitLLVM(FlashModule &module, FlashOutputKind kind,
                              int optLevel, std::string &out,
                              ErrorSink &sink) {
  optLevel = std::clamp(optLevel, 0, 3);
  std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(optLevel, sink);
  if (!tm)
    return failure();
  llvm::LLVMContext llvmContext;
  ScopedCapture capture(module.context->mlir, module.sourceMgr, sink);
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module.module, llvmContext);
  if (!llvmModule) {
    sink.os << "flash: translation to LLVM IR failed (is the module fully "
               "lowered to the llvm dialect?)\n";
    return failure();
  }
  llvmModule->setTargetTriple(tm->getTargetTriple());
  llvmModule->setDataLayout(tm->createDataLayout());
  if (optLevel > 0) {
    auto optimize = makeOptimizingTransformer(optLevel, /*sizeLevel=*/0,
                                              tm.get());
    if (llvm::Error err = optimize(llvmModule.get())) {
      sink.os << "flash: LLVM optimization failed: "
              << llvm::toString(std::move(err)) << "\n";
      return failure();
    }
  }
  llvm::raw_string_ostream os(out);
  if (kind == FLASH_OUTPUT_LLVM_IR) {
    llvmModule->print(os, nullptr);
    return success();
  }
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream bufferStream(buffer);
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, bufferStream, nullptr,
                              kind == FLASH_OUTPUT_OBJECT
                                  ? llvm::CodeGenFileType::ObjectFile
                                  : llvm::CodeGenFileType::AssemblyFile)) {
    sink.os << "flash: the host target cannot emit this file type\n";
    return failure();
  }
  codegen.run(*llvmModule);
  out.assign(buffer.begin(), buffer.end());
  return success();
}

static LogicalResult emitGPUObject(FlashModule &module, FlashOutputKind kind,
                                   std::string &out, ErrorSink &sink) {
  gpu::CompilationTarget want = kind == FLASH_OUTPUT_PTX
                                    ? gpu::CompilationTarget::Assembly
                                    : gpu::CompilationTarget::Binary;
  const char *what = kind == FLASH_OUTPUT_PTX ? "PTX" : "cubin";
  bool sawBinary = false;
  WalkResult found = module.module->walk([&](gpu::BinaryOp binary) {
    sawBinary = true;
    for (Attribute attr : binary.getObjects()) {
      auto object = dyn_cast<gpu::ObjectAttr>(attr);
      if (object && object.getFormat() == want) {
        out = object.getObject().getValue().str();
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  if (found.wasInterrupted())
    return success();
  if (sawBinary)
    sink.os << "flash: no gpu.binary object holds " << what
            << "; run gpu-module-to-binary{format="
            << (kind == FLASH_OUTPUT_PTX ? "isa" : "bin") << "}\n";
  else
    sink.os << "flash: the module has no gpu.binary to take " << what
            << " from; run a GPU pipeline (gpu-module-to-binary) first\n";
  return failure();
}

FlashStatus flashModuleEmit(FlashModule *module, FlashOutputKind kind,
                            int optLevel, FlashString *out,
                            FlashString *error) {
  clearString(out);
  if (!module) {
    clearString(error);
    setString(error, "flash: null module");
    return FLASH_FAILURE;
  }
  std::string result;
  FlashStatus status =
      guarded(module->context, error, [&](ErrorSink &sink) -> LogicalResult {
        switch (kind) {
        case FLASH_OUTPUT_MLIR: {
          llvm::raw_string_ostream os(result);
          module->module->print(os);
          return success();
        }
        case FLASH_OUTPUT_BYTECODE: {
          llvm::raw_string_ostream os(result);
          return writeBytecodeToFile(*module->module, os);
        }
        case FLASH_OUTPUT_LLVM_IR:
        case FLASH_OUTPUT_OBJECT:
        case FLASH_OUTPUT_ASSEMBLY:
          return emitLLVM(*module, kind, optLevel, result, sink);
        case FLASH_OUTPUT_PTX:
        case FLASH_OUTPUT_CUBIN:
          return emitGPUObject(*module, kind, result, sink);
        }
        sink.os << "flash: unknown output kind " << static_cast<int>(kind)
                << "\n";
        return failure();
      });
  if (status == FLASH_SUCCESS)
    setString(out, result);
  return status;
}

FlashStatus flashCompile(FlashContext *context, const char *data, size_t size,
                         const char *name, const char *pipeline,
                         const char *options, FlashOutputKind kind,
                         int optLevel, FlashString *out, FlashString *error) {
  clearString(out);
  FlashModule *module = flashModuleParse(context, data, size, name, error);
  if (!module)
    return FLASH_FAILURE;
  FlashStatus status = FLASH_SUCCESS;
  if (pipeline && *pipeline)
    status = flashModuleRunPipeline(module, pipeline, options, error);
  if (status == FLASH_SUCCESS)
    status = flashModuleEmit(module, kind, optLevel, out, error);
  flashModuleDestroy(module);
  return status;
}

void flashStringDestroy(FlashString *string) {
  if (!string)
    return;
  std::free(string->data);
  clearString(string);
}
