//===- LinalgBuilder.h - linalg.generic building blocks of the lowerings --===//
//
// The reference decompositions of flash.attention and flash.attention_grad
// are chains of linalg.generic ops over (batch..., i, j, ...) loops; these
// helpers write their maps, inits and the one contraction body once.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_TRANSFORMS_LINALGBUILDER_H
#define FLASH_TRANSFORMS_LINALGBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::flash {

struct LinalgBuilder {
  OpBuilder &b;
  Location loc;
  Type f32;

  LinalgBuilder(OpBuilder &b, Location loc)
      : b(b), loc(loc), f32(b.getF32Type()) {}

  SmallVector<utils::IteratorType> iterators(int64_t parallel,
                                             int64_t reduction = 0) const {
    SmallVector<utils::IteratorType> its(parallel,
                                         utils::IteratorType::parallel);
    its.append(reduction, utils::IteratorType::reduction);
    return its;
  }

  /// Affine map over `numDims` loops selecting dims `dims`.
  AffineMap map(int64_t numDims, ArrayRef<int64_t> dims) const {
    SmallVector<AffineExpr> exprs;
    for (int64_t d : dims)
      exprs.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(numDims, 0, exprs, b.getContext());
  }

  static SmallVector<int64_t> range(int64_t begin, int64_t end) {
    SmallVector<int64_t> r;
    for (int64_t i = begin; i < end; ++i)
      r.push_back(i);
    return r;
  }

  /// An f32 tensor of `shape` filled with `value`.
  Value filled(ArrayRef<OpFoldResult> shape, double value) const {
    Value empty = tensor::EmptyOp::create(b, loc, shape, f32);
    Value cst = arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, value));
    return linalg::FillOp::create(b, loc, cst, empty).getResult(0);
  }

  Value toF32(OpBuilder &nested, Location l, Value x) const {
    if (x.getType() == f32)
      return x;
    if (x.getType().getIntOrFloatBitWidth() > 32)
      return arith::TruncFOp::create(nested, l, f32, x);
    return arith::ExtFOp::create(nested, l, f32, x);
  }

  /// init[o] += lhs[l] * rhs[r] over `numLoops` loops whose last
  /// `numReduction` are reductions, in f32.
  Value contract(Value lhs, AffineMap lhsMap, Value rhs, AffineMap rhsMap,
                 Value init, AffineMap initMap, int64_t numLoops,
                 int64_t numReduction) const {
    return linalg::GenericOp::create(
               b, loc, init.getType(), ValueRange{lhs, rhs}, ValueRange{init},
               ArrayRef<AffineMap>{lhsMap, rhsMap, initMap},
               iterators(numLoops - numReduction, numReduction),
               [&](OpBuilder &nested, Location l, ValueRange args) {
                 Value prod = arith::MulFOp::create(
                     nested, l, toF32(nested, l, args[0]),
                     toF32(nested, l, args[1]));
                 Value acc = arith::AddFOp::create(nested, l, args[2], prod);
                 linalg::YieldOp::create(nested, l, acc);
               })
        .getResult(0);
  }

  /// K or V (`kvShape`, `nb` batch dims) with its head dim repeated to the
  /// query's head count `hq`: query head h reads head h / G, G = Hq / Hkv
  /// (read at run time for dynamic heads).
  Value broadcastHeads(Value kv, ArrayRef<OpFoldResult> kvShape, int64_t nb,
                       OpFoldResult hq) const {
    if (nb == 0)
      return kv;
    auto kvType = cast<RankedTensorType>(kv.getType());
    std::optional<int64_t> hqStatic = getConstantIntValue(hq);
    if (hqStatic && *hqStatic == kvType.getDimSize(nb - 1))
      return kv;
    SmallVector<OpFoldResult> shape(kvShape);
    shape[nb - 1] = hq;
    Value hqV = getValueOrCreateConstantIndexOp(b, loc, hq);
    Value hkvV = getValueOrCreateConstantIndexOp(b, loc, kvShape[nb - 1]);
    Value group = arith::DivUIOp::create(b, loc, hqV, hkvV);
    Value empty =
        tensor::EmptyOp::create(b, loc, shape, kvType.getElementType());
    int64_t rank = kvType.getRank();
    auto generic = linalg::GenericOp::create(
        b, loc, empty.getType(), ValueRange{}, ValueRange{empty},
        ArrayRef<AffineMap>{map(rank, range(0, rank))}, iterators(rank),
        [&](OpBuilder &nested, Location l, ValueRange) {
          SmallVector<Value> idx;
          for (int64_t d = 0; d < rank; ++d)
            idx.push_back(linalg::IndexOp::create(nested, l, d));
          idx[nb - 1] = arith::DivUIOp::create(nested, l, idx[nb - 1], group);
          Value x = tensor::ExtractOp::create(nested, l, kv, idx);
          linalg::YieldOp::create(nested, l, x);
        });
    return generic.getResult(0);
  }

  /// init[o] += ins[0][i] over `numLoops` loops whose last `numReduction`
  /// are reductions; further inputs only give loop extents.
  Value accumulate(ValueRange ins, ArrayRef<AffineMap> inMaps, Value init,
                   AffineMap initMap, int64_t numLoops,
                   int64_t numReduction) const {
    SmallVector<AffineMap> maps(inMaps);
    maps.push_back(initMap);
    return linalg::GenericOp::create(
               b, loc, init.getType(), ins, ValueRange{init}, maps,
               iterators(numLoops - numReduction, numReduction),
               [&](OpBuilder &nested, Location l, ValueRange args) {
                 linalg::YieldOp::create(
                     nested, l,
                     arith::AddFOp::create(nested, l, args.back(), args[0])
                         .getResult());
               })
        .getResult(0);
  }

  /// `src` (f32), times `scale` when given, converted into `init`'s element
  /// type, same shape.
  Value castInto(Value src, Value init,
                 std::optional<float> scale = std::nullopt) const {
    auto type = cast<RankedTensorType>(init.getType());
    int64_t rank = type.getRank();
    Type elem = type.getElementType();
    AffineMap id = map(rank, range(0, rank));
    Value factor;
    if (scale)
      factor = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(*scale));
    return linalg::GenericOp::create(
               b, loc, type, ValueRange{src}, ValueRange{init},
               ArrayRef<AffineMap>{id, id}, iterators(rank),
               [&](OpBuilder &nested, Location l, ValueRange args) {
                 Value x = args[0];
                 if (factor)
                   x = arith::MulFOp::create(nested, l, x, factor);
                 if (elem != f32)
                   x = elem.getIntOrFloatBitWidth() < 32
                           ? arith::TruncFOp::create(nested, l, elem, x)
                                 .getResult()
                           : arith::ExtFOp::create(nested, l, elem, x)
                                 .getResult();
                 linalg::YieldOp::create(nested, l, x);
               })
        .getResult(0);
  }
};

} // namespace mlir::flash

#endif // FLASH_TRANSFORMS_LINALGBUILDER_H
