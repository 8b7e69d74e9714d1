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

/// Inlines `op`'s score_mod region at the builder's insertion point for one
/// element: the score `s`, its batch indices, query row `i` and key column `j`
/// (the region's arguments, in that order; captures are `op`'s own operands).
/// Returns the modified score. `op` must have a score_mod region.
Value buildScoreMod(OpBuilder &b, AttentionOp op, Value s, ValueRange batch,
                    Value i, Value j);
} // namespace mlir::flash

#endif // FLASH_DIALECT_FLASH_IR_FLASHOPS_H
