//===- AttentionMath.cpp - softmax steps the CPU lowerings share ----------===//
#include "AttentionMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;

static Value f32Constant(OpBuilder &b, Location loc, float v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

static Value isEqual(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, y);
}

Value mlir::flash::buildRowExp(OpBuilder &b, Location loc, Value s, Value m) {
  Value dead = isEqual(
      b, loc, m,
      f32Constant(b, loc, -std::numeric_limits<float>::infinity()));
  Value e = math::ExpOp::create(
      b, loc, arith::SubFOp::create(b, loc, s, m).getResult());
  return arith::SelectOp::create(b, loc, dead, f32Constant(b, loc, 0.0f), e);
}

Value mlir::flash::buildNormalize(OpBuilder &b, Location loc, Value acc,
                                  Value l, Type elemType) {
  Value zero = f32Constant(b, loc, 0.0f);
  Value dead = isEqual(b, loc, l, zero);
  Value q = arith::DivFOp::create(b, loc, acc, l);
  Value r = arith::SelectOp::create(b, loc, dead, zero, q);
  if (!elemType.isF32())
    r = arith::TruncFOp::create(b, loc, elemType, r);
  return r;
}

Value mlir::flash::buildLogSumExp(OpBuilder &b, Location loc, Value m,
                                  Value l) {
  Value ninf = f32Constant(b, loc, -std::numeric_limits<float>::infinity());
  Value dead = isEqual(b, loc, m, ninf);
  Value sum =
      arith::AddFOp::create(b, loc, m, math::LogOp::create(b, loc, l));
  return arith::SelectOp::create(b, loc, dead, ninf, sum);
}
