//===- AttentionVerification.cpp - rules every attention op's operands obey ===//
//
// flash.attention and flash.attention_grad read the same query, key, value,
// output shape and score_mod region; their verifiers share these checks so
// the two ops cannot disagree on what a well-formed attention is.
//
//===----------------------------------------------------------------------===//
#include "flash/Dialect/Flash/IR/FlashOps.h"

using namespace mlir;
using namespace mlir::flash;

static bool isSupportedElementType(Type type) {
  return type.isF32() || type.isF16() || type.isBF16();
}

/// Two static sizes that differ; a dynamic size matches anything.
static bool conflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

LogicalResult mlir::flash::verifyAttentionShapes(Operation *op,
                                                 RankedTensorType qType,
                                                 RankedTensorType kType,
                                                 RankedTensorType vType,
                                                 RankedTensorType oType,
                                                 StringRef outName) {
  int64_t rank = qType.getRank();
  if (rank < 2)
    return op->emitOpError(
               "'query' must have rank >= 2 ([batch..., Lq, D]), got ")
           << qType;
  auto checkRank = [&](StringRef name, RankedTensorType type) -> LogicalResult {
    if (type.getRank() != rank)
      return op->emitOpError("'")
             << name << "' has rank " << type.getRank() << " (" << type
             << ") but 'query' has rank " << rank << " (" << qType << ")";
    return success();
  };
  if (failed(checkRank("key", kType)) || failed(checkRank("value", vType)) ||
      failed(checkRank(outName, oType)))
    return failure();
  if (!isSupportedElementType(qType.getElementType()))
    return op->emitOpError(
               "'query' element type must be bf16, f16 or f32, got ")
           << qType.getElementType();
  if (kType.getElementType() != qType.getElementType())
    return op->emitOpError("'key' element type ")
           << kType.getElementType() << " does not match 'query' element type "
           << qType.getElementType();
  if (vType.getElementType() != qType.getElementType())
    return op->emitOpError("'value' element type ")
           << vType.getElementType() << " does not match 'query' element type "
           << qType.getElementType();
  if (!isSupportedElementType(oType.getElementType()))
    return op->emitOpError()
           << outName << " element type must be bf16, f16 or f32, got "
           << oType.getElementType();
  int64_t nb = rank - 2;
  ArrayRef<int64_t> q = qType.getShape(), k = kType.getShape(),
                    v = vType.getShape(), o = oType.getShape();
  // Every lowering divides by, tiles or slices along D and Dv; an empty head
  // dim has no meaning for attention and is refused here, not deep inside a
  // pass.
  for (auto [name, dimName, type] :
       {std::make_tuple(StringRef("'query'"), "D", qType),
        std::make_tuple(StringRef("'key'"), "D", kType),
        std::make_tuple(StringRef("'value'"), "Dv", vType),
        std::make_tuple(outName, "Dv", oType)}) {
    int64_t size = type.getDimSize(nb + 1);
    if (!ShapedType::isDynamic(size) && size < 1)
      return op->emitOpError()
             << name << " head dim " << dimName << " must be at least 1, got "
             << size << " (" << type << ")";
  }
  if (conflict(q[nb + 1], k[nb + 1]))
    return op->emitOpError("'key' head dim D = ")
           << k[nb + 1] << " does not match 'query' head dim D = " << q[nb + 1]
           << " (query " << qType << ", key " << kType << ")";
  if (conflict(k[nb], v[nb]))
    return op->emitOpError("'value' sequence length Lk = ")
           << v[nb] << " does not match 'key' sequence length Lk = " << k[nb]
           << " (key " << kType << ", value " << vType << ")";
  if (conflict(o[nb + 1], v[nb + 1]))
    return op->emitOpError()
           << outName << " value dim Dv = " << o[nb + 1]
           << " does not match 'value' dim Dv = " << v[nb + 1] << " (value "
           << vType << ", output " << oType << ")";
  if (conflict(o[nb], q[nb]))
    return op->emitOpError()
           << outName << " sequence length Lq = " << o[nb]
           << " does not match 'query' sequence length Lq = " << q[nb]
           << " (query " << qType << ", output " << oType << ")";
  for (int64_t d = 0; d < nb; ++d) {
    if (conflict(v[d], k[d]))
      return op->emitOpError("'value' batch dim #")
             << d << " = " << v[d] << " does not match 'key' batch dim #" << d
             << " = " << k[d] << " (key " << kType << ", value " << vType
             << ")";
    if (conflict(o[d], q[d]))
      return op->emitOpError()
             << outName << " batch dim #" << d << " = " << o[d]
             << " does not match 'query' batch dim #" << d << " = " << q[d]
             << " (query " << qType << ", output " << oType << ")";
    bool isHeadDim = d == nb - 1;
    if (!isHeadDim && conflict(k[d], q[d]))
      return op->emitOpError("'key' batch dim #")
             << d << " = " << k[d] << " does not match 'query' batch dim #"
             << d << " = " << q[d] << " (query " << qType << ", key " << kType
             << ")";
    if (isHeadDim && !ShapedType::isDynamic(q[d]) &&
        !ShapedType::isDynamic(k[d]) && (k[d] == 0 || q[d] % k[d] != 0))
      return op->emitOpError("'query' heads (batch dim #")
             << d << " = " << q[d]
             << ") must be a multiple of 'key'/'value' heads (" << k[d]
             << ") for grouped-query attention (query " << qType << ", key "
             << kType << ")";
  }
  return success();
}

LogicalResult mlir::flash::verifyScoreModRegion(Operation *op,
                                                Region &scoreMod,
                                                unsigned numIndices,
                                                ValueRange captures) {
  Block &body = scoreMod.front();
  size_t expected = 1 + numIndices + captures.size();
  if (body.getNumArguments() != expected)
    return op->emitOpError("score_mod region must take ")
           << expected << " arguments (the f32 score, " << numIndices
           << " indices, " << captures.size() << " captures), got "
           << body.getNumArguments();
  if (!body.getArgument(0).getType().isF32())
    return op->emitOpError(
               "score_mod argument #0 (the score) must be f32, got ")
           << body.getArgument(0).getType();
  for (unsigned i = 0; i < numIndices; ++i)
    if (!body.getArgument(1 + i).getType().isIndex())
      return op->emitOpError("score_mod argument #")
             << 1 + i << " (an index) must be index, got "
             << body.getArgument(1 + i).getType();
  for (auto [i, capture] : llvm::enumerate(captures)) {
    Type argType = body.getArgument(1 + numIndices + i).getType();
    if (argType != capture.getType())
      return op->emitOpError("score_mod argument #")
             << 1 + numIndices + i << " has type " << argType
             << " but capture #" << i << " has type " << capture.getType();
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return op->emitOpError("score_mod region must end in flash.yield");
  if (yield.getValues().size() != 1 || !yield.getValues()[0].getType().isF32())
    return yield.emitOpError("must yield exactly one f32 score, got ")
           << yield.getValues().size() << " value(s)";
  return success();
}

LogicalResult mlir::flash::verifySinks(Operation *op, Value sinks,
                                       RankedTensorType qType, bool isTile,
                                       int64_t headsDim) {
  if (!sinks)
    return success();
  auto sType = cast<RankedTensorType>(sinks.getType());
  if (headsDim < 0 && qType.getRank() < 3)
    return op->emitOpError("'sinks' are one logit per query head, but 'query' ")
           << qType << " has no heads dim (it needs [batch..., heads, Lq, D])";
  if (sType.getRank() != 1 || !isSupportedElementType(sType.getElementType()))
    return op->emitOpError("'sinks' must be a 1-D tensor of f32, f16 or bf16 "
                           "(one logit per query head), got ")
           << sType;
  int64_t hq = qType.getDimSize(headsDim < 0 ? qType.getRank() - 3 : headsDim);
  if (!isTile && conflict(sType.getDimSize(0), hq))
    return op->emitOpError("'sinks' ")
           << sType << " must have one logit per query head (" << hq
           << " in 'query' " << qType << ")";
  return success();
}
