//===- ExpandFloatConversions.cpp - bf16/f16 conversions as integer ops ---===//
//
// LLVM turns an fptrunc to bf16, and f16 conversions on an x86 CPU without
// F16C, into calls of compiler-runtime builtins (__truncsfbf2,
// __truncsfhf2, __extendhfsf2, ...). Whether the C runtime of the machine
// that loads our code has them is outside our control, so the CPU path
// performs the conversions itself, in integer arithmetic that LLVM lowers to
// a handful of vectorizable instructions.
//
// The rounding is IEEE round-to-nearest-even, correctly rounded for every
// finite input including subnormal sources and results; overflow gives
// infinity; NaN stays NaN with its sign, the quiet bit set and the high bits
// of its payload (the rule of compiler-rt's __truncXfYf2 and of x86's
// vcvtps2ph). Extension is exact and keeps a NaN's payload bits.
//
//===----------------------------------------------------------------------===//
#include "flash/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHEXPANDFLOATCONVERSIONSPASS
#include "flash/Transforms/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;

namespace {

/// The fields of an IEEE-754 binary interchange format.
struct FloatLayout {
  unsigned bits;    // total width
  unsigned sigBits; // stored significand bits (no implicit bit)
  unsigned expBits;

  static std::optional<FloatLayout> of(Type type) {
    auto f = dyn_cast<FloatType>(type);
    if (!f || !(f.isF16() || f.isBF16() || f.isF32() || f.isF64()))
      return std::nullopt;
    unsigned sig = f.getFPMantissaWidth() - 1;
    return FloatLayout{f.getWidth(), sig, f.getWidth() - sig - 1};
  }
  uint64_t bias() const { return (uint64_t(1) << (expBits - 1)) - 1; }
  uint64_t infExp() const { return (uint64_t(1) << expBits) - 1; }
  uint64_t sigMask() const { return (uint64_t(1) << sigBits) - 1; }
  uint64_t minNormal() const { return uint64_t(1) << sigBits; }
  uint64_t infinity() const { return infExp() << sigBits; }
  uint64_t quietBit() const { return uint64_t(1) << (sigBits - 1); }
  uint64_t signBit() const { return uint64_t(1) << (bits - 1); }
  uint64_t absMask() const { return signBit() - 1; }
};

/// `like`'s shape (scalar or vector) with element type `elem`.
static Type withElement(Type like, Type elem) {
  if (auto shaped = dyn_cast<ShapedType>(like))
    return shaped.clone(elem);
  return elem;
}

/// Integer arithmetic on one integer type (scalar or vector), unsigned.
class IntMath {
public:
  IntMath(ImplicitLocOpBuilder &b, Type type) : b(b), type(type) {
    width = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
  }
  Value c(uint64_t v) {
    IntegerType elem = b.getIntegerType(width);
    TypedAttr attr = b.getIntegerAttr(elem, APInt(width, v));
    if (auto shaped = dyn_cast<ShapedType>(type))
      attr = SplatElementsAttr::get(shaped, attr);
    return arith::ConstantOp::create(b, attr);
  }
  Value band(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value bor(Value x, Value y) { return arith::OrIOp::create(b, x, y); }
  Value bxor(Value x, Value y) { return arith::XOrIOp::create(b, x, y); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value shl(Value x, Value y) { return arith::ShLIOp::create(b, x, y); }
  Value shr(Value x, Value y) { return arith::ShRUIOp::create(b, x, y); }
  Value umin(Value x, Value y) { return arith::MinUIOp::create(b, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, p, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, cond, x, y);
  }
  Value fromBool(Value cond) { return arith::ExtUIOp::create(b, type, cond); }

  /// x rounded up by one ulp when the discarded bits `rest` are above half
  /// of `half * 2`, or exactly half and x is odd (ties to even).
  Value roundNearestEven(Value x, Value rest, uint64_t half) {
    Value above = cmp(arith::CmpIPredicate::ugt, rest, c(half));
    Value tie = cmp(arith::CmpIPredicate::eq, rest, c(half));
    Value odd = cmp(arith::CmpIPredicate::ne, band(x, c(1)), c(0));
    Value up = arith::OrIOp::create(b, above, arith::AndIOp::create(b, tie, odd));
    return add(x, fromBool(up));
  }

private:
  ImplicitLocOpBuilder &b;
  Type type;
  unsigned width;
};

static bool expandable(Type narrow, ArrayRef<Type> narrowTypes) {
  return llvm::is_contained(narrowTypes, narrow);
}

/// f32/f64 -> bf16/f16: the source bits are classified (normal result,
/// subnormal or zero result, overflow, NaN) and each class computed in the
/// source's integer width; selects pick the class.
struct ExpandTruncF : OpRewritePattern<arith::TruncFOp> {
  ExpandTruncF(MLIRContext *ctx, ArrayRef<Type> narrowTypes)
      : OpRewritePattern(ctx), narrowTypes(narrowTypes) {}

  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type srcElem = getElementTypeOrSelf(op.getIn().getType());
    Type dstElem = getElementTypeOrSelf(op.getType());
    std::optional<FloatLayout> src = FloatLayout::of(srcElem);
    std::optional<FloatLayout> dst = FloatLayout::of(dstElem);
    if (!src || !dst || !expandable(dstElem, narrowTypes) ||
        expandable(srcElem, narrowTypes))
      return rewriter.notifyMatchFailure(op, "not a conversion to expand");
    if (std::optional<arith::RoundingMode> mode = op.getRoundingmode();
        mode && *mode != arith::RoundingMode::to_nearest_even)
      return rewriter.notifyMatchFailure(op, "rounding mode is not RNE");

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Type srcInt = withElement(op.getIn().getType(), b.getIntegerType(src->bits));
    Type dstInt = withElement(op.getType(), b.getIntegerType(dst->bits));
    IntMath m(b, srcInt);
    using P = arith::CmpIPredicate;

    const unsigned drop = src->sigBits - dst->sigBits;
    const uint64_t roundMask = (uint64_t(1) << drop) - 1;
    const uint64_t half = uint64_t(1) << (drop - 1);
    // The source exponent below which the result is subnormal, and the one
    // from which it overflows (both as biased source exponents).
    const uint64_t underflowExp = src->bias() + 1 - dst->bias();
    const uint64_t overflowExp = src->bias() + dst->infExp() - dst->bias();

    Value rep = arith::BitcastOp::create(b, srcInt, op.getIn());
    Value abs = m.band(rep, m.c(src->absMask()));
    Value sign = m.band(rep, m.c(src->signBit()));
    Value aExp = m.shr(abs, m.c(src->sigBits));

    // Normal result: rebias the exponent, drop the low significand bits.
    Value normal = m.sub(m.shr(abs, m.c(drop)),
                         m.c((src->bias() - dst->bias()) << dst->sigBits));
    normal = m.roundNearestEven(normal, m.band(abs, m.c(roundMask)), half);

    // Subnormal or zero result: the significand (with its implicit bit when
    // the source is normal) shifted right by the distance to the smallest
    // normal exponent, the shifted-out bits folded into a sticky bit.
    // shift = underflowExp - max(aExp, 1), clamped to [0, sigBits + 1]
    // (more than sigBits shifts everything out).
    Value srcIsNormal = m.cmp(P::ne, aExp, m.c(0));
    Value significand = m.bor(m.band(rep, m.c(src->sigMask())),
                              m.select(srcIsNormal, m.c(src->minNormal()), m.c(0)));
    Value effExp = m.select(srcIsNormal, aExp, m.c(1));
    Value tooSmall = m.cmp(P::ugt, effExp, m.c(underflowExp));
    Value shift = m.select(tooSmall, m.c(0), m.sub(m.c(underflowExp), effExp));
    shift = m.umin(shift, m.c(src->sigBits + 1));
    Value lost = m.band(significand, m.sub(m.shl(m.c(1), shift), m.c(1)));
    Value sticky = m.fromBool(m.cmp(P::ne, lost, m.c(0)));
    Value denorm = m.bor(m.shr(significand, shift), sticky);
    Value subnormal = m.roundNearestEven(m.shr(denorm, m.c(drop)),
                                         m.band(denorm, m.c(roundMask)), half);

    // NaN: quiet bit set, high payload bits kept.
    Value payload = m.band(m.shr(m.band(abs, m.c(src->quietBit() - 1)), m.c(drop)),
                           m.c(dst->quietBit() - 1));
    Value nan = m.bor(m.c(dst->infinity() | dst->quietBit()), payload);

    Value isNormal = m.cmp(P::ult, m.sub(abs, m.c(underflowExp << src->sigBits)),
                           m.sub(abs, m.c(overflowExp << src->sigBits)));
    Value isNan = m.cmp(P::ugt, abs, m.c(src->infinity()));
    Value isOverflow = m.cmp(P::uge, abs, m.c(overflowExp << src->sigBits));
    Value result = m.select(
        isNormal, normal,
        m.select(isNan, nan,
                 m.select(isOverflow, m.c(dst->infinity()), subnormal)));
    result = m.bor(result, m.shr(sign, m.c(src->bits - dst->bits)));
    result = arith::TruncIOp::create(b, dstInt, result);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(), result);
    return success();
  }

  SmallVector<Type> narrowTypes;
};

/// bf16/f16 -> f32/f64, exact.
struct ExpandExtF : OpRewritePattern<arith::ExtFOp> {
  ExpandExtF(MLIRContext *ctx, ArrayRef<Type> narrowTypes)
      : OpRewritePattern(ctx), narrowTypes(narrowTypes) {}

  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    Type srcElem = getElementTypeOrSelf(op.getIn().getType());
    Type dstElem = getElementTypeOrSelf(op.getType());
    std::optional<FloatLayout> src = FloatLayout::of(srcElem);
    std::optional<FloatLayout> dst = FloatLayout::of(dstElem);
    if (!src || !dst || !expandable(srcElem, narrowTypes) ||
        expandable(dstElem, narrowTypes))
      return rewriter.notifyMatchFailure(op, "not a conversion to expand");

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Type srcInt = withElement(op.getIn().getType(), b.getIntegerType(src->bits));
    Type dstInt = withElement(op.getType(), b.getIntegerType(dst->bits));
    IntMath n(b, srcInt), w(b, dstInt);
    using P = arith::CmpIPredicate;
    const unsigned grow = dst->sigBits - src->sigBits;

    Value rep = arith::BitcastOp::create(b, srcInt, op.getIn());
    Value wide = arith::ExtUIOp::create(b, dstInt, rep);
    Value result;
    if (src->expBits == dst->expBits) {
      // Same exponent field (bf16 -> f32): the value is the bits, widened.
      result = w.shl(wide, w.c(dst->bits - src->bits));
    } else {
      Value abs = n.band(rep, n.c(src->absMask()));
      Value wideAbs = arith::ExtUIOp::create(b, dstInt, abs);
      Value normal = w.add(w.shl(wideAbs, w.c(grow)),
                           w.c((dst->bias() - src->bias()) << dst->sigBits));
      Value infNan = w.bor(w.c(dst->infinity()),
                           w.shl(w.band(wideAbs, w.c(src->sigMask())), w.c(grow)));
      // Subnormal source: normalise by the leading-zero count.
      Value lz = math::CountLeadingZerosOp::create(b, abs);
      Value scale = n.sub(lz, n.c(src->bits - 1 - src->sigBits));
      Value wideScale = arith::ExtUIOp::create(b, dstInt, scale);
      Value sub = w.bxor(w.shl(wideAbs, w.add(w.c(grow), wideScale)),
                         w.c(dst->minNormal()));
      Value exp = w.sub(w.c(dst->bias() - src->bias() + 1), wideScale);
      sub = w.bor(sub, w.shl(exp, w.c(dst->sigBits)));

      Value isNormal =
          n.cmp(P::ult, n.sub(abs, n.c(src->minNormal())),
                n.c(src->infinity() - src->minNormal()));
      Value isInfNan = n.cmp(P::uge, abs, n.c(src->infinity()));
      Value isZero = n.cmp(P::eq, abs, n.c(0));
      result = w.select(isNormal, normal,
                        w.select(isInfNan, infNan,
                                 w.select(isZero, w.c(0), sub)));
      Value sign = arith::ExtUIOp::create(b, dstInt, n.band(rep, n.c(src->signBit())));
      result = w.bor(result, w.shl(sign, w.c(dst->bits - src->bits)));
    }
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(), result);
    return success();
  }

  SmallVector<Type> narrowTypes;
};

struct FlashExpandFloatConversionsPass
    : flash::impl::FlashExpandFloatConversionsPassBase<
          FlashExpandFloatConversionsPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    SmallVector<Type> narrow;
    for (const std::string &name : types) {
      Type t = llvm::StringSwitch<Type>(name)
                   .Case("bf16", BFloat16Type::get(ctx))
                   .Case("f16", Float16Type::get(ctx))
                   .Default(Type());
      if (!t) {
        getOperation()->emitError("flash-expand-float-conversions: unsupported "
                                  "type '")
            << name << "' in types= (expected bf16 or f16)";
        return signalPassFailure();
      }
      narrow.push_back(t);
    }
    if (types.empty())
      narrow = {BFloat16Type::get(ctx), Float16Type::get(ctx)};
    RewritePatternSet patterns(ctx);
    flash::populateExpandFloatConversionsPatterns(patterns, narrow);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::flash::populateExpandFloatConversionsPatterns(
    RewritePatternSet &patterns, ArrayRef<Type> narrowTypes) {
  patterns.add<ExpandTruncF, ExpandExtF>(patterns.getContext(), narrowTypes);
}
