//===- ServingOps.cpp - paged and varlen attention: verification, shapes --===//
//
// The serving ops have fixed ranks: flash.paged_attention (query [B, Hq, Lq,
// D], caches [pages, page_size, Hkv, D], block table [B, max_pages], lengths
// [B]) and flash.varlen_attention (packed query [Tq, Hq, D], key/value [Tk,
// Hkv, D / Dv], offsets [B + 1]). Every size that two operands share is
// checked here, so the lowerings may index through the table or the offsets
// without re-checking.
//
//===----------------------------------------------------------------------===//
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;

MaskAttr PagedAttentionOp::getMaskOrNone() {
  if (std::optional<MaskAttr> mask = getMask())
    return *mask;
  return MaskAttr::get(getContext(), MaskKind::None, 0,
                       MaskAlignment::BottomRight);
}

/// Two static sizes that differ; a dynamic size matches anything.
static bool conflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

static bool isFloat16Or32(Type t) { return t.isF32() || t.isF16() || t.isBF16(); }

static InFlightDiagnostic sizeMismatch(Operation *op, StringRef what,
                                       StringRef a, int64_t x, StringRef b,
                                       int64_t y) {
  auto str = [](int64_t d) {
    return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
  };
  return op->emitOpError() << what << " differs: " << a << " has " << str(x)
                           << ", " << b << " has " << str(y);
}

/// `t` has rank `rank`, else an error naming the operand and its layout.
static LogicalResult checkRank(Operation *op, StringRef name,
                               RankedTensorType t, int64_t rank,
                               StringRef layout) {
  if (t.getRank() != rank)
    return op->emitOpError("'") << name << "' must be " << layout << ", got "
                                << t;
  return success();
}

/// One output init, or two with the log-sum-exp.
static LogicalResult checkInitCount(Operation *op, size_t numInits) {
  if (numInits != 1 && numInits != 2)
    return op->emitOpError("expects 1 or 2 inits (output, then optional "
                           "log-sum-exp), got ")
           << numInits;
  return success();
}

/// The element types both serving ops require: a bf16/f16/f32 query whose
/// type the key and value operands (named `k`, `v`) share, a bf16/f16/f32
/// output, and i32 index operands (block table, lengths or offsets).
static LogicalResult
checkElementTypes(Operation *op, RankedTensorType q, StringRef k,
                  RankedTensorType kt, StringRef v, RankedTensorType vt,
                  Type outElem,
                  ArrayRef<std::pair<StringRef, RankedTensorType>> indices) {
  Type elem = q.getElementType();
  if (!isFloat16Or32(elem))
    return op->emitOpError(
               "'query' element type must be bf16, f16 or f32, got ")
           << elem;
  if (kt.getElementType() != elem || vt.getElementType() != elem)
    return op->emitOpError("'")
           << k << "' and '" << v << "' must have the element type of "
           << "'query' (" << elem << "), got " << kt.getElementType() << " and "
           << vt.getElementType();
  if (!isFloat16Or32(outElem))
    return op->emitOpError("output init element type must be bf16, f16 or "
                           "f32, got ")
           << outElem;
  for (auto [name, t] : indices)
    if (!t.getElementType().isSignlessInteger(32))
      return op->emitOpError("'")
             << name << "' must have i32 elements, got " << t.getElementType();
  return success();
}

LogicalResult PagedAttentionOp::verify() {
  RankedTensorType q = getQueryType(), kc = getKeyCacheType(),
                   vc = getValueCacheType(), table = getBlockTableType();
  auto lens = cast<RankedTensorType>(getSeqLens().getType());
  size_t numInits = getInits().size();
  if (failed(checkInitCount(getOperation(), numInits)))
    return failure();
  auto rankIs = [&](StringRef name, RankedTensorType t, int64_t rank,
                    StringRef layout) {
    return checkRank(getOperation(), name, t, rank, layout);
  };
  if (failed(rankIs("query", q, 4, "[B, Hq, Lq, D]")) ||
      failed(rankIs("key_cache", kc, 4, "[num_pages, page_size, Hkv, D]")) ||
      failed(rankIs("value_cache", vc, 4, "[num_pages, page_size, Hkv, Dv]")) ||
      failed(rankIs("block_table", table, 2, "[B, max_pages]")) ||
      failed(rankIs("seq_lens", lens, 1, "[B]")) ||
      failed(rankIs("output init", getOutputType(), 4, "[B, Hq, Lq, Dv]")))
    return failure();
  if (failed(checkElementTypes(getOperation(), q, "key_cache", kc,
                               "value_cache", vc,
                               getOutputType().getElementType(),
                               {{"block_table", table}, {"seq_lens", lens}})))
    return failure();

  ArrayRef<int64_t> qs = q.getShape(), ks = kc.getShape(), vs = vc.getShape(),
                    os = getOutputType().getShape();
  auto mismatch = [&](StringRef what, StringRef a, int64_t x, StringRef b,
                      int64_t y) {
    return sizeMismatch(getOperation(), what, a, x, b, y);
  };
  for (int64_t d = 0; d < 3; ++d)
    if (conflict(ks[d], vs[d]))
      return mismatch(d == 0   ? "the page count"
                      : d == 1 ? "the page size"
                               : "the K/V head count",
                      "'key_cache'", ks[d], "'value_cache'", vs[d]);
  if (conflict(qs[3], ks[3]))
    return mismatch("the head dim D", "'query'", qs[3], "'key_cache'", ks[3]);
  if (qs[3] == 0 || vs[3] == 0)
    return emitOpError("head dims D and Dv must be positive, got D = ")
           << qs[3] << ", Dv = " << vs[3];
  if (ks[1] == 0)
    return emitOpError("'key_cache' page size must be positive, got 0");
  if (conflict(table.getDimSize(0), qs[0]))
    return mismatch("the batch size", "'block_table'", table.getDimSize(0),
                    "'query'", qs[0]);
  if (conflict(lens.getDimSize(0), qs[0]))
    return mismatch("the batch size", "'seq_lens'", lens.getDimSize(0),
                    "'query'", qs[0]);
  if (!ShapedType::isDynamic(qs[1]) && !ShapedType::isDynamic(ks[2]) &&
      (ks[2] == 0 || qs[1] % ks[2] != 0))
    return emitOpError("the K/V head count ")
           << ks[2] << " of 'key_cache' must divide the query head count "
           << qs[1];
  for (int64_t d = 0; d < 3; ++d)
    if (conflict(os[d], qs[d]))
      return mismatch(d == 0 ? "the batch size" : d == 1 ? "the head count"
                                                         : "Lq",
                      "output init", os[d], "'query'", qs[d]);
  if (conflict(os[3], vs[3]))
    return mismatch("the value dim Dv", "output init", os[3], "'value_cache'",
                    vs[3]);
  if (failed(verifySinks(getOperation(), getSinks(), q, /*isTile=*/false)))
    return failure();
  if (!getCaptures().empty() && !hasScoreMod())
    return emitOpError("has ")
           << getCaptures().size()
           << " captures but no score_mod region to read them";
  if (hasLse()) {
    auto l = cast<RankedTensorType>(getLseInit().getType());
    bool ok = l.getElementType().isF32() && l.getRank() == 3;
    for (int64_t d = 0; ok && d < 3; ++d)
      ok = !conflict(l.getDimSize(d), qs[d]);
    if (!ok)
      return emitOpError("log-sum-exp init must be f32 [B, Hq, Lq], got ")
             << l;
  }
  for (auto [init, result] : llvm::zip(getInits(), getResults()))
    if (init.getType() != result.getType())
      return emitOpError("result type ")
             << result.getType() << " must match its init " << init.getType();
  if (getResults().size() != numInits)
    return emitOpError("expects one result per init");
  if (!std::isfinite(getScale().convertToFloat()))
    return emitOpError("scale must be finite");
  MaskAttr mask = getMaskOrNone();
  if (!mask.isNone() && !mask.isBottomRight())
    return emitOpError("the queries of a KV cache are the last Lq positions "
                       "of each sequence: the mask must be bottom_right");
  return success();
}

LogicalResult PagedAttentionOp::verifyRegions() {
  if (!hasScoreMod())
    return success();
  // The indices b, h, i, j of a query [B, Hq, Lq, D].
  return verifyScoreModRegion(*this, getScoreMod(), /*numIndices=*/4,
                              getCaptures());
}

LogicalResult PagedAttentionOp::reifyResultShapes(
    OpBuilder &builder, ReifiedRankedShapedTypeDims &reifiedReturnShapes) {
  reifyInitShapes(builder, getLoc(), getInits(), reifiedReturnShapes);
  return success();
}

MaskAttr VarlenAttentionOp::getMaskOrNone() {
  if (std::optional<MaskAttr> mask = getMask())
    return *mask;
  return MaskAttr::get(getContext(), MaskKind::None, 0,
                       MaskAlignment::TopLeft);
}

LogicalResult VarlenAttentionOp::verify() {
  Operation *op = getOperation();
  RankedTensorType q = getQueryType(), k = getKeyType(), v = getValueType();
  auto cuq = cast<RankedTensorType>(getCuSeqlensQ().getType());
  auto cuk = cast<RankedTensorType>(getCuSeqlensK().getType());
  size_t numInits = getInits().size();
  if (failed(checkInitCount(op, numInits)))
    return failure();
  if (failed(checkRank(op, "query", q, 3, "[Tq, Hq, D]")) ||
      failed(checkRank(op, "key", k, 3, "[Tk, Hkv, D]")) ||
      failed(checkRank(op, "value", v, 3, "[Tk, Hkv, Dv]")) ||
      failed(checkRank(op, "cu_seqlens_q", cuq, 1, "[B + 1]")) ||
      failed(checkRank(op, "cu_seqlens_k", cuk, 1, "[B + 1]")) ||
      failed(checkRank(op, "output init", getOutputType(), 3,
                       "[Tq, Hq, Dv]")))
    return failure();
  if (failed(checkElementTypes(op, q, "key", k, "value", v,
                               getOutputType().getElementType(),
                               {{"cu_seqlens_q", cuq}, {"cu_seqlens_k", cuk}})))
    return failure();
  if (conflict(cuq.getDimSize(0), cuk.getDimSize(0)))
    return sizeMismatch(op, "the number of sequences + 1", "'cu_seqlens_q'",
                        cuq.getDimSize(0), "'cu_seqlens_k'",
                        cuk.getDimSize(0));
  if (cuq.getDimSize(0) == 0)
    return emitOpError("'cu_seqlens_q' must hold B + 1 >= 1 offsets, got 0");
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape(),
                    os = getOutputType().getShape();
  if (conflict(ks[0], vs[0]))
    return sizeMismatch(op, "the key token count Tk", "'key'", ks[0],
                        "'value'", vs[0]);
  if (conflict(ks[1], vs[1]))
    return sizeMismatch(op, "the K/V head count", "'key'", ks[1], "'value'",
                        vs[1]);
  if (conflict(qs[2], ks[2]))
    return sizeMismatch(op, "the head dim D", "'query'", qs[2], "'key'",
                        ks[2]);
  if (qs[2] == 0 || vs[2] == 0)
    return emitOpError("head dims D and Dv must be positive, got D = ")
           << qs[2] << ", Dv = " << vs[2];
  if (!ShapedType::isDynamic(qs[1]) && !ShapedType::isDynamic(ks[1]) &&
      (ks[1] == 0 || qs[1] % ks[1] != 0))
    return emitOpError("the K/V head count ")
           << ks[1] << " of 'key' must divide the query head count " << qs[1];
  if (conflict(os[0], qs[0]))
    return sizeMismatch(op, "the query token count Tq", "output init", os[0],
                        "'query'", qs[0]);
  if (conflict(os[1], qs[1]))
    return sizeMismatch(op, "the head count", "output init", os[1],
                        "'query'", qs[1]);
  if (conflict(os[2], vs[2]))
    return sizeMismatch(op, "the value dim Dv", "output init", os[2],
                        "'value'", vs[2]);
  if (failed(verifySinks(op, getSinks(), q, /*isTile=*/false,
                         /*headsDim=*/1)))
    return failure();
  if (hasLse()) {
    auto l = cast<RankedTensorType>(getLseInit().getType());
    if (!l.getElementType().isF32() || l.getRank() != 2 ||
        conflict(l.getDimSize(0), qs[1]) || conflict(l.getDimSize(1), qs[0]))
      return emitOpError("log-sum-exp init must be f32 [Hq, Tq], got ") << l;
  }
  for (auto [init, result] : llvm::zip(getInits(), getResults()))
    if (init.getType() != result.getType())
      return emitOpError("result type ")
             << result.getType() << " must match its init " << init.getType();
  if (getResults().size() != numInits)
    return emitOpError("expects one result per init");
  if (!std::isfinite(getScale().convertToFloat()))
    return emitOpError("scale must be finite");
  return success();
}

LogicalResult VarlenAttentionOp::reifyResultShapes(
    OpBuilder &builder, ReifiedRankedShapedTypeDims &reifiedReturnShapes) {
  reifyInitShapes(builder, getLoc(), getInits(), reifiedReturnShapes);
  return success();
}
