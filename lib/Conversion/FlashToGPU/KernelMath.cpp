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
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

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
  for (math::TanhOp t : tanhs) {
    ImplicitLocOpBuilder b(t.getLoc(), t);
    Value e = exp2Approx(
        b, arith::MulFOp::create(b, t.getOperand(), constF32(b, 2.0 * M_LOG2E)));
    Value r = arith::DivFOp::create(
        b, constF32(b, 2.0), arith::AddFOp::create(b, e, constF32(b, 1.0)),
        approx);
    t.replaceAllUsesWith(arith::SubFOp::create(b, constF32(b, 1.0), r).getResult());
    t.erase();
  }
}
