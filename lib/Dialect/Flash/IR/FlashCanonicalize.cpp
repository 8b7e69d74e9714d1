//===- FlashCanonicalize.cpp - canonical forms of flash.attention ---------===//
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::flash;

/// Whether `user` rounds every element of `value` to a narrower float type and
/// nothing else: `arith.truncf` on the tensor, or an all-parallel identity
/// linalg.generic whose body is one truncf (its init is never read).
static bool isElementwiseTruncation(Operation *user, Value value) {
  if (auto trunc = dyn_cast<arith::TruncFOp>(user))
    return !trunc.getRoundingmodeAttr() && !trunc.getFastmathAttr();
  auto generic = dyn_cast<linalg::GenericOp>(user);
  if (!generic || generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getDpsInputs()[0] != value || generic.getNumResults() != 1)
    return false;
  if (generic.getNumReductionLoops() != 0 ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = generic.getRegion().front();
  if (body.getOperations().size() != 2)
    return false;
  auto trunc = dyn_cast<arith::TruncFOp>(body.front());
  if (!trunc || trunc.getIn() != body.getArgument(0) ||
      trunc.getRoundingmodeAttr() || trunc.getFastmathAttr())
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getValues().size() != 1 || yield.getValues()[0] != trunc.getOut())
    return false;
  return true;
}

/// Whether `len` is the op's own query length: the static Lq, or tensor.dim
/// of the query or output init along the query axis.
static bool isOwnQueryLength(AttentionOp op, Value len) {
  int64_t nb = op.getNumBatchDims();
  int64_t lq = op.getQueryType().getDimSize(nb);
  if (!ShapedType::isDynamic(lq))
    return isConstantIntValue(len, lq);
  auto dim = len.getDefiningOp<tensor::DimOp>();
  std::optional<int64_t> index = dim ? dim.getConstantIndex() : std::nullopt;
  return index && *index == nb &&
         (dim.getSource() == op.getQuery() ||
          dim.getSource() == op.getOutputInit());
}

namespace {
/// flash.attention computes in f32 and rounds once to its output type, so an
/// f32 result that is only rounded to bf16/f16 afterwards is the same as
/// asking for the narrow type directly. Kernels want the narrow output: it
/// halves the stores and lets one element type run through the whole kernel.
struct FoldOutputTruncation : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Value out = op.getOutput();
    if (!out.hasOneUse() || !op.getOutputType().getElementType().isF32())
      return failure();
    Operation *user = *out.getUsers().begin();
    if (!isElementwiseTruncation(user, out))
      return failure();
    auto narrow = cast<RankedTensorType>(user->getResult(0).getType());
    Type elem = narrow.getElementType();
    if (!elem.isBF16() && !elem.isF16())
      return failure();
    // The truncation overwrites every element of its init, and so does the
    // op: a fresh empty tensor of the narrow type is all the op needs.
    rewriter.setInsertionPoint(op);
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(rewriter, op.getLoc(), op.getOutputInit());
    Value narrowInit = tensor::EmptyOp::create(rewriter, op.getLoc(), sizes, elem);
    SmallVector<Value> inits(op.getInits());
    inits[0] = narrowInit;
    auto fused = AttentionOp::create(
        rewriter, op.getLoc(), TypeRange(ValueRange(inits)), op.getQuery(),
        op.getKey(), op.getValue(), inits, op.getCaptures(), op.getSinks(),
        op.getOffsets(),
        op.getQueryLen(), op.getScaleAttr(), op.getMaskAttr());
    rewriter.inlineRegionBefore(op.getScoreMod(), fused.getScoreMod(),
                                fused.getScoreMod().end());
    rewriter.replaceOp(user, fused.getOutput());
    if (op.hasLse())
      rewriter.replaceAllUsesWith(op.getLse(), fused.getLse());
    rewriter.eraseOp(op);
    return success();
  }
};

/// Offsets that change nothing are dropped, so that a tile that is the whole
/// op, or a tile without mask and score_mod, is an ordinary op again (which
/// every lowering takes): they only move the indices the mask and score_mod
/// see, and only the bottom-right alignment reads `query_len`.
struct DropIdentityOffsets : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasOffsets())
      return failure();
    // Sinks are read at the absolute head: the offsets matter unless the
    // tile holds all of their heads.
    Value sinks = op.getSinks();
    bool allSinks =
        !sinks || cast<RankedTensorType>(sinks.getType()).getDimSize(0) ==
                      op.getQueryType().getDimSize(op.getNumBatchDims() - 1);
    bool unused = op.getMaskOrNone().isNone() && !op.hasScoreMod() && !sinks;
    bool identity =
        llvm::all_of(op.getOffsets(),
                     [](Value v) { return isConstantIntValue(v, 0); }) &&
        isOwnQueryLength(op, op.getQueryLen()) && allSinks;
    if (!unused && !identity)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.getOffsetsMutable().clear();
      op.getQueryLenMutable().clear();
    });
    return success();
  }
};
} // namespace

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<DropIdentityOffsets, FoldOutputTruncation>(context);
}
