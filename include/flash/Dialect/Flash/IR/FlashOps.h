//===- FlashOps.h - flash.attention and its attributes --------*- C++ -*-===//
#ifndef FLASH_DIALECT_FLASH_IR_FLASHOPS_H
#define FLASH_DIALECT_FLASH_IR_FLASHOPS_H

#include "flash/Dialect/Flash/IR/FlashDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
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

namespace mlir::flash {
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
} // namespace mlir::flash

#endif // FLASH_DIALECT_FLASH_IR_FLASHOPS_H
