//===- KernelMath.cpp - the approximate f32 math of the kernels -----------===//
//
// A score_mod region is whatever the frontend wrote, cloned into the kernels'
// inner loop per score, and its arithmetic is lowered as written: an f32
// `arith.divf` becomes PTX's IEEE division (a dozen instructions with a slow
// path) and `math.tanh` an expansion through exp with another division.
// Per score, beside a handful of tensor-core cycles, that doubled the time of
// a soft-capped backward. The kernels already take their exponentials from
// ex2.approx; their divisions and tanh take the same road: divf by a constant
// becomes a multiply by its reciprocal, any other divf is marked approximate
// (div.approx: ≤ 2 ulp), and tanh(x) = 1 − 2 / (2^(2x·log2 e)
// + 1), exact in its limits (±1 for ±inf, NaN for NaN) and within a few
// 1e-7 of tanh everywhere. The forward and the backward kernels are
// rewritten alike, so the backward recomputes the forward's probabilities.
//
// That tanh costs two multi-function-unit instructions (ex2, rcp) beside
// the softmax's one ex2 per score, and that unit, not the tensor cores,
// then bounds a soft-capped kernel. Where the operands have 16 bits or
// fewer, P is rounded to them (2^-9 relative for bf16) before it meets V,
// and the hardware's tanh.approx.f32 (one instruction, 2^-11 relative)
// is well inside that rounding: those kernels take it, as FlashAttention's
// soft-capping does. f32 kernels keep the expansion.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

/// tanh.approx.f32: ±1 at ±inf, NaN for NaN.
static Value tanhApprox(ImplicitLocOpBuilder &b, Value x) {
  return LLVM::InlineAsmOp::create(
             b, b.getF32Type(), ValueRange{x}, "tanh.approx.f32 $0, $1;",
             "=f,f", /*has_side_effects=*/false, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             ArrayAttr())
      .getResult(0);
}

void gpu_lowering::approximateKernelMath(gpu::GPUModuleOp module) {
  auto approx = arith::FastMathFlagsAttr::get(module.getContext(),
                                              arith::FastMathFlags::afn);
  SmallVector<math::TanhOp> tanhs;
  SmallVector<arith::DivFOp> byConstant;
  module.walk([&](Operation *op) {
    if (auto t = dyn_cast<math::TanhOp>(op); t && t.getType().isF32()) {
      tanhs.push_back(t);
    } else if (auto d = dyn_cast<arith::DivFOp>(op); d && d.getType().isF32()) {
      FloatAttr c;
      if (matchPattern(d.getRhs(), m_Constant(&c)) &&
          std::isnormal(c.getValueAsDouble()))
        byConstant.push_back(d);
      else
        d.setFastmathAttr(arith::FastMathFlagsAttr::get(
            module.getContext(), d.getFastmath() | arith::FastMathFlags::afn));
    }
  });
  // x / c = x · (1 / c) to within an ulp: a multiply instead of a reciprocal.
  for (arith::DivFOp d : byConstant) {
    ImplicitLocOpBuilder b(d.getLoc(), d);
    FloatAttr c;
    (void)matchPattern(d.getRhs(), m_Constant(&c));
    d.replaceAllUsesWith(
        arith::MulFOp::create(b, d.getLhs(),
                              constF32(b, 1.0 / c.getValueAsDouble()))
            .getResult());
    d.erase();
  }
  bool hardwareTanh = module->hasAttr(kLowPrecisionOperandsAttr);
  for (math::TanhOp t : tanhs) {
    ImplicitLocOpBuilder b(t.getLoc(), t);
    if (hardwareTanh) {
      t.replaceAllUsesWith(tanhApprox(b, t.getOperand()));
      t.erase();
      continue;
    }
    Value e = exp2Approx(
        b, arith::MulFOp::create(b, t.getOperand(), constF32(b, 2.0 * M_LOG2E)));
    Value r = arith::DivFOp::create(
        b, constF32(b, 2.0), arith::AddFOp::create(b, e, constF32(b, 1.0)),
        approx);
    t.replaceAllUsesWith(arith::SubFOp::create(b, constF32(b, 1.0), r).getResult());
    t.erase();
  }
}

/// The f32 constant `x` is multiplied by in `mul` (the other operand into
/// `other`), or nothing.
static std::optional<double> constantFactor(arith::MulFOp mul, Value &other) {
  for (int i = 0; i < 2; ++i) {
    FloatAttr c;
    if (matchPattern(mul->getOperand(i), m_Constant(&c))) {
      other = mul->getOperand(1 - i);
      return c.getValueAsDouble();
    }
  }
  return std::nullopt;
}

/// Without `contract`, NVPTX emits mul.rn / add.rn, which ptxas may not
/// fuse: the softmax's scale-and-subtract (s·c - m), the rescale of the
/// running sum (l·α + Σp) and a score_mod's affine steps would each be two
/// instructions on the pipe the softmax shares with every conversion. For
/// the same reason a product by constants in a row (the scale and a
/// score_mod's 1/cap before soft-capping's tanh) is one multiply by their
/// product. Either rounds once where the pair rounds
/// twice, well inside the scores' 16-bit (or ex2.approx's) error.
void gpu_lowering::contractKernelMath(gpu::GPUModuleOp module) {
  MLIRContext *ctx = module.getContext();
  SmallVector<arith::MulFOp> muls;
  module.walk([&](arith::MulFOp m) {
    if (m.getType().isF32())
      muls.push_back(m);
  });
  // In program order, so that a chain folds into its last product.
  for (arith::MulFOp outer : muls) {
    Value x;
    std::optional<double> c2 = constantFactor(outer, x);
    auto inner = c2 ? x.getDefiningOp<arith::MulFOp>() : arith::MulFOp();
    Value y;
    std::optional<double> c1 =
        inner && inner->hasOneUse() ? constantFactor(inner, y) : std::nullopt;
    if (!c1)
      continue;
    ImplicitLocOpBuilder b(outer.getLoc(), outer);
    outer.getLhsMutable().assign(y);
    outer.getRhsMutable().assign(constF32(b, *c1 * *c2));
    inner.erase();
  }
  module.walk([&](arith::ArithFastMathInterface op) {
    if (!isa<arith::MulFOp, arith::AddFOp, arith::SubFOp>(op))
      return;
    op->setAttr(op.getFastMathAttrName(),
                arith::FastMathFlagsAttr::get(
                    ctx, op.getFastMathFlagsAttr().getValue() |
                             arith::FastMathFlags::contract));
  });
}
