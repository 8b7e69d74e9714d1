//===- AttentionMath.h - softmax steps the CPU lowerings share --*- C++ -*-===//
//
// The scalar rules that keep a fully masked row finite (output 0, lse -inf,
// never NaN), written once for the tiled and the reference lowering.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_TRANSFORMS_ATTENTIONMATH_H
#define FLASH_TRANSFORMS_ATTENTIONMATH_H

#include "mlir/IR/Builders.h"

namespace mlir::flash {
/// p = exp(s - m) for a score `s` of a row whose max is `m` (f32); 0 when
/// m = -inf, where the row saw no finite score and exp(-inf - -inf) is NaN.
Value buildRowExp(OpBuilder &b, Location loc, Value s, Value m);

/// out = acc / l in `elemType` (truncated from f32); 0 when l = 0, a row that
/// attended nothing.
Value buildNormalize(OpBuilder &b, Location loc, Value acc, Value l,
                     Type elemType);

/// lse = m + log l (f32); -inf when m = -inf.
Value buildLogSumExp(OpBuilder &b, Location loc, Value m, Value l);
} // namespace mlir::flash

#endif // FLASH_TRANSFORMS_ATTENTIONMATH_H
