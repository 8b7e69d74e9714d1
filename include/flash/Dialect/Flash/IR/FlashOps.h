//===- FlashOps.h - flash.attention and its attributes --------*- C++ -*-===//
#ifndef FLASH_DIALECT_FLASH_IR_FLASHOPS_H
#define FLASH_DIALECT_FLASH_IR_FLASHOPS_H

#include "flash/Dialect/Flash/IR/FlashDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "flash/Dialect/Flash/IR/FlashEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "flash/Dialect/Flash/IR/FlashAttrs.h.inc"

#define GET_OP_CLASSES
#include "flash/Dialect/Flash/IR/FlashOps.h.inc"

namespace mlir::tensor {
class ExtractOp;
} // namespace mlir::tensor

namespace mlir::flash {
/// A closed interval [lo, hi] of indices; a null bound is no bound.
struct IndexInterval {
  Value lo, hi;
};

/// MaskAttr's diagonal offset as IR (`lk - lq` bottom-right), or a null
/// Value where it is 0 (top-left, none), so that no `+ 0` is built.
Value buildDiagonalOffset(OpBuilder &b, Location loc, MaskAttr mask, Value lq,
                          Value lk);
/// The keys query row `i` may attend under `mask`, given the diagonal
/// offset `off` (buildDiagonalOffset's; null is 0): MaskAttr's rule as IR,
/// in the type of `i` (index or an integer).
IndexInterval buildVisibleKeys(OpBuilder &b, Location loc, MaskAttr mask,
                               Value i, Value off);
/// The transpose: the query rows that may attend key `j`.
IndexInterval buildVisibleQueries(OpBuilder &b, Location loc, MaskAttr mask,
                                  Value j, Value off);
/// Whether query row `i` may attend key column `j` under `mask`, as index
/// arithmetic the lowerings share: returns an i1 (true = allowed), or a null
/// Value for `none`. `lq`/`lk` are the sequence lengths (index values).
Value buildMaskPredicate(OpBuilder &b, Location loc, MaskAttr mask, Value i,
                         Value j, Value lq, Value lk);

/// The indices the mask and score_mod of `op` see for the element at the
/// op's own indices `local` (batch..., query row): `local` plus the op's
/// offsets when it is a tile (see `offsets`), else `local` itself. The key
/// column is never offset.
SmallVector<Value> buildAbsoluteIndices(OpBuilder &b, Location loc,
                                        AttentionOp op, ValueRange local);

/// The query length a bottom-right mask of `op` aligns to: the `query_len`
/// of a tile, else `lq`, the op's own (an index value).
Value getAlignmentQueryLength(AttentionOp op, Value lq);

/// Inlines `op`'s score_mod region at the builder's insertion point for one
/// element: the score `s`, its batch indices, query row `i` and key column `j`
/// (the region's arguments, in that order, absolute for a tile: see
/// buildAbsoluteIndices; captures are `op`'s own operands).
/// Returns the modified score. `op` must have a score_mod region.
Value buildScoreMod(OpBuilder &b, AttentionOp op, Value s, ValueRange batch,
                    Value i, Value j);

/// The sink logit of the row at absolute batch indices `batch` (its query
/// head is the last) as f32: `sinks[batch.back()]`. `sinks` must be present.
Value buildSinkLogit(OpBuilder &b, Location loc, Value sinks, ValueRange batch);

/// The shapes of `inits` (the results of a destination-style attention op).
void reifyInitShapes(OpBuilder &builder, Location loc, ValueRange inits,
                     ReifiedRankedShapedTypeDims &shapes);

/// Maps the arguments of a score_mod region's block: the score, the batch
/// indices, the query row, the key column, then the captures.
void mapScoreModArguments(IRMapping &mapping, Block &body, Value s,
                          ValueRange batch, Value i, Value j,
                          ValueRange captures);

/// The shape and element-type rules every attention op's operands obey
/// (query, key, value and an output `[batch..., Lq, Dv]` named `outName` in
/// messages; grouped-query heads; one named mismatch per failure).
LogicalResult verifyAttentionShapes(Operation *op, RankedTensorType query,
                                    RankedTensorType key,
                                    RankedTensorType value,
                                    RankedTensorType out, StringRef outName);
/// The rules on `sinks` (null: none) for a query of type `query`: a 1-D
/// float tensor of the query heads (dim `headsDim` of the query; -1: the
/// last batch dim of [batch..., heads, Lq, D]). `isTile`: the op carries
/// offsets, so its heads are a slice of the sinks' and only the rank and
/// type are checked.
LogicalResult verifySinks(Operation *op, Value sinks, RankedTensorType query,
                          bool isTile, int64_t headsDim = -1);
/// The rules on a score_mod region with `numIndices` index arguments and
/// these captures (argument types, the yielded f32 score).
LogicalResult verifyScoreModRegion(Operation *op, Region &scoreMod,
                                   unsigned numIndices, ValueRange captures);

/// One read of a capture by the score_mod, for the capture's gradient.
struct ScoreModRead {
  unsigned capture;           // which capture
  SmallVector<int64_t> dims;  // its indices, as loop dims (batch..., i, j)
  Value partial;              // d score_mod / d (value read), f32, this element
};
/// score_mod inlined for one element with its reverse-mode derivative.
struct ScoreModGradient {
  Value score;  // score_mod(s)
  Value dScore; // d score_mod / d s
  SmallVector<ScoreModRead> reads;
};
/// Reads one element of a capture (a lowering whose captures are buffers):
/// the region's `tensor.extract` and its indices, already mapped.
using CaptureReader =
    function_ref<Value(OpBuilder &, Location, tensor::ExtractOp, ValueRange)>;
/// `op` as a read of one of a score_mod's captures: a `tensor.extract` of
/// a block argument past the score and its `numIndices` indices (null
/// otherwise).
tensor::ExtractOp captureRead(Operation *op, unsigned numIndices);
/// The values of `scoreMod`'s block computed from its argument `argNo` (it
/// included): the score's slice (argument 0) or an index's.
DenseSet<Value> scoreModSlice(Region &scoreMod, unsigned argNo);
/// Clones the ops of `scoreMod`'s block (not its terminator) at the
/// builder's insertion point for score `s` at (batch..., i, j), recording
/// the clones in `map`: its captures are `captures`, or with `readCapture`
/// their `tensor.extract`s are what it builds. Ops whose results `map`
/// already holds are not cloned again; with `only`, only the ops it accepts
/// are cloned. Returns the clone of the yielded score (null where `only`
/// left it out).
Value cloneScoreMod(OpBuilder &b, Location loc, Region &scoreMod,
                    IRMapping &map, Value s, ValueRange batch, Value i, Value j,
                    ValueRange captures, CaptureReader readCapture = nullptr,
                    function_ref<bool(Operation *)> only = nullptr);
/// Inlines `scoreMod` at the builder's insertion point for score `s` at
/// (batch..., i, j) with `captures`, and its derivative with respect to the
/// score and to each float capture read. With `readCapture`, the captures'
/// `tensor.extract`s are what it builds and `captures` may be empty. With
/// `clones`, the map from the region's values to their clones. The region
/// must have passed verifyScoreModDifferentiable.
FailureOr<ScoreModGradient>
buildScoreModGradient(OpBuilder &b, Location loc, Region &scoreMod,
                      ValueRange captures, Value s, ValueRange batch, Value i,
                      Value j, CaptureReader readCapture = nullptr,
                      IRMapping *clones = nullptr);
/// The float-capture reads of `scoreMod` that a gradient flows through, in
/// program order (partials null): the order buildScoreModGradient returns.
SmallVector<ScoreModRead> scoreModReads(Region &scoreMod, unsigned numIndices);
/// Whether every op of `scoreMod` that the score or a float capture flows
/// through has a derivative rule, and every float capture read is indexed
/// by index arguments; otherwise emits on `owner`, naming the op.
LogicalResult verifyScoreModDifferentiable(Operation *owner, Region &scoreMod,
                                           unsigned numIndices);
} // namespace mlir::flash

#endif // FLASH_DIALECT_FLASH_IR_FLASHOPS_H
