//===- ConvertFlashToGPU.cpp - the convert-flash-to-gpu pass --------------===//
//
// A thin pass around populateFlashToGPUPatterns: it checks the options,
// gives every function that holds a flash.attention a stream argument,
// checks each op's operands, and applies one pattern per kernel strategy.
//
//===----------------------------------------------------------------------===//
#include "flash/Conversion/Passes.h"

#include "KernelStrategies.h"
#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::flash {
#define GEN_PASS_DEF_CONVERTFLASHTOGPUPASS
#include "flash/Conversion/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

ArrayRef<const KernelStrategy *> gpu_lowering::kernelStrategies() {
  static const KernelStrategy *const strategies[] = {
      &splitKVStrategy(), &wgmmaStrategy(), &mmaStrategy(),
      &portableStrategy()};
  return strategies;
}

/// The strategy `options` pick for `op`: the named one, or under
/// kernel=auto the first that supports it. Null, with the reason in `why`,
/// when there is none.
static const KernelStrategy *selectStrategy(AttentionOp op,
                                            const GPUKernelOptions &options,
                                            const ChipInfo &chip,
                                            std::string &why) {
  for (const KernelStrategy *s : kernelStrategies()) {
    bool automatic = options.kernel == "auto";
    if (!automatic && options.kernel != s->name())
      continue;
    if (automatic && !s->autoSelects(op, chip))
      continue;
    why.clear();
    if (s->supports(op, chip, why))
      return s;
  }
  return nullptr;
}

namespace {
/// Lowers a flash.attention with the given strategy when it is the one the
/// options select. One instance per strategy, the earlier ones first.
struct LowerAttentionWithStrategy : OpRewritePattern<AttentionOp> {
  LowerAttentionWithStrategy(MLIRContext *ctx, const KernelStrategy &strategy,
                             const GPUKernelOptions &options, ChipInfo chip,
                             PatternBenefit benefit)
      : OpRewritePattern(ctx, benefit), strategy(strategy), options(options),
        chip(chip) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    std::string why;
    if (selectStrategy(op, options, chip, why) != &strategy)
      return rewriter.notifyMatchFailure(op, "another strategy applies");
    if (!streamArgument(op))
      return rewriter.notifyMatchFailure(op, "no stream argument");
    FailureOr<OperandBuffers> bufs = operandBuffers(op);
    if (failed(bufs))
      return failure();
    return strategy.lower(rewriter, op, *bufs, options, chip);
  }

  const KernelStrategy &strategy;
  GPUKernelOptions options;
  ChipInfo chip;
};

/// Lowers a flash.attention_grad to the backward kernels.
struct LowerAttentionGrad : OpRewritePattern<AttentionGradOp> {
  LowerAttentionGrad(MLIRContext *ctx, const GPUKernelOptions &options,
                     ChipInfo chip)
      : OpRewritePattern(ctx), options(options), chip(chip) {}

  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    std::string why;
    FailureOr<GradKernelConfig> cfg =
        gradKernelConfig(op, options, chip, why);
    if (failed(cfg))
      return rewriter.notifyMatchFailure(op, why);
    if (!streamArgument(op))
      return rewriter.notifyMatchFailure(op, "no stream argument");
    FailureOr<GradOperandBuffers> bufs = gradOperandBuffers(op);
    if (failed(bufs))
      return failure();
    return lowerAttentionGrad(rewriter, op, *bufs, *cfg);
  }

  GPUKernelOptions options;
  ChipInfo chip;
};

/// Lowers a serving op (flash.paged_attention, flash.varlen_attention) with
/// its rule and its lowering: the paged op to the split-KV or the wgmma
/// kernel reading through the block table, the varlen op to the prefill kernels, each block
/// finding its sequence through the offsets.
template <typename OpTy,
          bool (*Supported)(OpTy, const GPUKernelOptions &, const ChipInfo &,
                            std::string &),
          LogicalResult (*Lower)(RewriterBase &, OpTy, const OperandBuffers &,
                                 const GPUKernelOptions &, const ChipInfo &)>
struct LowerServingOp : OpRewritePattern<OpTy> {
  LowerServingOp(MLIRContext *ctx, const GPUKernelOptions &options,
                 ChipInfo chip)
      : OpRewritePattern<OpTy>(ctx), options(options), chip(chip) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    std::string why;
    if (!Supported(op, options, chip, why))
      return rewriter.notifyMatchFailure(op, why);
    if (!streamArgument(op))
      return rewriter.notifyMatchFailure(op, "no stream argument");
    FailureOr<OperandBuffers> bufs = operandBuffers(op);
    if (failed(bufs))
      return failure();
    return Lower(rewriter, op, *bufs, options, chip);
  }

  GPUKernelOptions options;
  ChipInfo chip;
};
using LowerPagedAttention =
    LowerServingOp<PagedAttentionOp, pagedAttentionSupported,
                   lowerPagedAttention>;
using LowerVarlenAttention =
    LowerServingOp<VarlenAttentionOp, varlenAttentionSupported,
                   lowerVarlenAttention>;

template <typename T>
using PassOption = Pass::Option<T>;

struct ConvertFlashToGPUPass
    : public flash::impl::ConvertFlashToGPUPassBase<ConvertFlashToGPUPass> {
  ConvertFlashToGPUPass() = default;
  ConvertFlashToGPUPass(const ConvertFlashToGPUPass &other) : Base(other) {}
  explicit ConvertFlashToGPUPass(const GPUKernelOptions &values) {
#define FLASH_GPU_KERNEL_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)              \
  options.FIELD = values.FIELD;
#include "flash/Conversion/GPUKernelOptions.def"
  }

  GPUKernelOptionDecls<Pass, PassOption> options{*this};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    GPUKernelOptions opts = options.values();
    std::string message;
    if (failed(verifyKernelOptions(opts, message))) {
      module.emitError("convert-flash-to-gpu: ") << message;
      return signalPassFailure();
    }

    // Each function that launches gets the caller's stream as its last
    // argument; operands that are not views of device buffers are refused
    // before anything is rewritten.
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionGradOp, PagedAttentionOp,
              VarlenAttentionOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      auto func = op->getParentOfType<func::FuncOp>();
      if (!func) {
        op->emitOpError("convert-flash-to-gpu: must be inside a func.func");
        return signalPassFailure();
      }
      if (auto fwd = dyn_cast<AttentionOp>(op);
          fwd && failed(operandBuffers(fwd)))
        return signalPassFailure();
      if (auto grad = dyn_cast<AttentionGradOp>(op);
          grad && failed(gradOperandBuffers(grad)))
        return signalPassFailure();
      if (auto paged = dyn_cast<PagedAttentionOp>(op);
          paged && failed(operandBuffers(paged)))
        return signalPassFailure();
      if (auto varlen = dyn_cast<VarlenAttentionOp>(op);
          varlen && failed(operandBuffers(varlen)))
        return signalPassFailure();
      if (streamArgument(op))
        continue;
      unsigned n = func.getNumArguments();
      MLIRContext *ctx = &getContext();
      if (failed(func.insertArgument(
              n, LLVM::LLVMPointerType::get(ctx),
              DictionaryAttr::get(ctx, {NamedAttribute(
                                           StringAttr::get(ctx, "flash.stream"),
                                           UnitAttr::get(ctx))}),
              func.getLoc())))
        return signalPassFailure();
    }

    RewritePatternSet patterns(&getContext());
    populateFlashToGPUPatterns(patterns, opts);
    walkAndApplyPatterns(module, std::move(patterns));

    // What is left had no strategy, or its lowering failed and said why.
    bool failedAny = false;
    std::optional<ChipInfo> chip = lookupChip(opts.chip);
    module.walk([&](AttentionOp op) {
      std::string why;
      if (!selectStrategy(op, opts, *chip, why))
        op.emitOpError("convert-flash-to-gpu: ") << why;
      failedAny = true;
    });
    module.walk([&](AttentionGradOp op) {
      std::string why;
      if (failed(gradKernelConfig(op, opts, *chip, why)))
        op.emitOpError("convert-flash-to-gpu: ") << why;
      failedAny = true;
    });
    module.walk([&](PagedAttentionOp op) {
      std::string why;
      if (!pagedAttentionSupported(op, opts, *chip, why))
        op.emitOpError("convert-flash-to-gpu: ") << why;
      failedAny = true;
    });
    module.walk([&](VarlenAttentionOp op) {
      std::string why;
      if (!varlenAttentionSupported(op, opts, *chip, why))
        op.emitOpError("convert-flash-to-gpu: ") << why;
      failedAny = true;
    });
    if (failedAny)
      return signalPassFailure();

    module.walk([](gpu::GPUModuleOp gmod) {
      if (gmod.getName().starts_with("flash_attention_")) {
        approximateKernelMath(gmod);
        contractKernelMath(gmod);
      }
    });

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

void flash::populateFlashToGPUPatterns(RewritePatternSet &patterns,
                                       const GPUKernelOptions &options) {
  std::optional<ChipInfo> chip = lookupChip(options.chip);
  if (!chip)
    return;
  ArrayRef<const KernelStrategy *> strategies = kernelStrategies();
  for (auto [i, s] : llvm::enumerate(strategies))
    patterns.add<LowerAttentionWithStrategy>(
        patterns.getContext(), *s, options, *chip,
        PatternBenefit(strategies.size() - i));
  patterns.add<LowerAttentionGrad>(patterns.getContext(), options, *chip);
  patterns.add<LowerPagedAttention>(patterns.getContext(), options, *chip);
  patterns.add<LowerVarlenAttention>(patterns.getContext(), options, *chip);
}

std::unique_ptr<Pass>
flash::createConvertFlashToGPUPass(const GPUKernelOptions &options) {
  return std::make_unique<ConvertFlashToGPUPass>(options);
}
