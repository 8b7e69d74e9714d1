//===- AttentionGradOp.cpp - flash.attention_grad: verification, shapes ---===//
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;

MaskAttr AttentionGradOp::getMaskOrNone() {
  if (std::optional<MaskAttr> mask = getMask())
    return *mask;
  return MaskAttr::get(getContext(), MaskKind::None, 0,
                       MaskAlignment::TopLeft);
}

SmallVector<unsigned> AttentionGradOp::getDifferentiableCaptures() {
  SmallVector<unsigned> result;
  for (auto [k, capture] : llvm::enumerate(getCaptures()))
    if (isa<FloatType>(cast<RankedTensorType>(capture.getType()).getElementType()))
      result.push_back(k);
  return result;
}

/// Two static shapes that disagree somewhere (dynamic sizes match anything).
static bool shapesConflict(RankedTensorType a, RankedTensorType b) {
  if (a.getRank() != b.getRank())
    return true;
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (!a.isDynamicDim(d) && !b.isDynamicDim(d) &&
        a.getDimSize(d) != b.getDimSize(d))
      return true;
  return false;
}

LogicalResult AttentionGradOp::verify() {
  RankedTensorType qType = getQueryType(), kType = getKeyType(),
                   vType = getValueType();
  auto oType = cast<RankedTensorType>(getOut().getType());
  auto doType = cast<RankedTensorType>(getGradOut().getType());
  if (failed(verifyAttentionShapes(*this, qType, kType, vType, oType, "'out'")))
    return failure();
  if (shapesConflict(doType, oType) ||
      doType.getElementType() != oType.getElementType())
    return emitOpError("'grad_out' ")
           << doType << " must have the type of 'out' " << oType;
  int64_t rank = qType.getRank();
  auto lType = cast<RankedTensorType>(getLse().getType());
  bool lseOk = lType.getElementType().isF32() && lType.getRank() == rank - 1;
  for (int64_t d = 0; lseOk && d < rank - 1; ++d)
    lseOk = !(!lType.isDynamicDim(d) && !qType.isDynamicDim(d) &&
              lType.getDimSize(d) != qType.getDimSize(d));
  if (!lseOk)
    return emitOpError("'lse' must be f32 [batch..., Lq] for 'query' ")
           << qType << ", got " << lType;

  SmallVector<unsigned> diffCaptures = getDifferentiableCaptures();
  size_t expected = 3 + diffCaptures.size();
  if (getInits().size() != expected)
    return emitOpError("expects ")
           << expected << " inits (dq, dk, dv, then one per float capture: "
           << diffCaptures.size() << "), got " << getInits().size();
  auto checkInit = [&](unsigned n, StringRef what, Type like) -> LogicalResult {
    auto t = cast<RankedTensorType>(getInits()[n].getType());
    auto l = cast<RankedTensorType>(like);
    if (shapesConflict(t, l))
      return emitOpError("init #") << n << " (" << what << ") " << t
                                   << " must have the shape of " << l;
    if (!isa<FloatType>(t.getElementType()))
      return emitOpError("init #")
             << n << " (" << what << ") must have float elements, got " << t;
    return success();
  };
  if (failed(checkInit(0, "dq", qType)) || failed(checkInit(1, "dk", kType)) ||
      failed(checkInit(2, "dv", vType)))
    return failure();
  for (auto [n, k] : llvm::enumerate(diffCaptures))
    if (failed(checkInit(3 + n, "gradient of capture #" + std::to_string(k),
                         getCaptures()[k].getType())))
      return failure();
  if (getResults().size() != getInits().size())
    return emitOpError("expects one result per init (")
           << getInits().size() << "), got " << getResults().size();
  for (auto [idx, pair] : llvm::enumerate(
           llvm::zip(getResults().getTypes(), getInits().getTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError("result #")
             << idx << " type " << std::get<0>(pair)
             << " does not match its init type " << std::get<1>(pair);
  float scale = getScale().convertToFloat();
  if (!std::isfinite(scale))
    return emitOpError("'scale' must be finite, got ") << scale;
  if (!getCaptures().empty() && !hasScoreMod())
    return emitOpError("has ")
           << getCaptures().size()
           << " captures but no score_mod region to read them";
  return success();
}

LogicalResult AttentionGradOp::verifyRegions() {
  if (!hasScoreMod())
    return success();
  unsigned numIndices = getQueryType().getRank();
  if (failed(verifyScoreModRegion(*this, getScoreMod(), numIndices,
                                  getCaptures())))
    return failure();
  return verifyScoreModDifferentiable(*this, getScoreMod(), numIndices);
}

LogicalResult AttentionGradOp::reifyResultShapes(
    OpBuilder &builder, ReifiedRankedShapedTypeDims &reifiedReturnShapes) {
  reifyInitShapes(builder, getLoc(), getInits(), reifiedReturnShapes);
  return success();
}
