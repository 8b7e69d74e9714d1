//===- Passes.h - flash transformation passes -----------------*- C++ -*-===//
#ifndef FLASH_TRANSFORMS_PASSES_H
#define FLASH_TRANSFORMS_PASSES_H

#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mlir::flash {

#define GEN_PASS_DECL
#include "flash/Transforms/Passes.h.inc"

/// Patterns rewriting flash.attention into unfused linalg.
void populateDecomposeAttentionPatterns(RewritePatternSet &patterns);

/// Builds the unfused linalg computation of one flash.attention before it
/// and returns the values that replace its results (the op is left in
/// place). flash-decompose-attention and the op's AggregatedOpInterface
/// (decomposeOperation) both use it.
FailureOr<SmallVector<Value>> decomposeAttention(OpBuilder &builder,
                                                 AttentionOp op);

/// Writes one flash.paged_attention as gathers of its pages and a
/// flash.attention masked to each sequence's length (the op is left in
/// place); returns the values that replace its results.
FailureOr<SmallVector<Value>> unpageAttention(OpBuilder &builder,
                                              PagedAttentionOp op);

/// Writes one flash.varlen_attention as a loop over its sequences, each a
/// flash.attention of that sequence's rows (the op is left in place);
/// returns the values that replace its results.
FailureOr<SmallVector<Value>> unpackVarlenAttention(OpBuilder &builder,
                                                    VarlenAttentionOp op);

/// Patterns rewriting flash.attention_grad into unfused linalg.
void populateDecomposeAttentionGradPatterns(RewritePatternSet &patterns);

/// Rewrites one flash.attention_grad into unfused linalg (the reference
/// gradient, recomputing P from the LSE); returns the results.
FailureOr<SmallVector<Value>> decomposeAttentionGrad(OpBuilder &builder,
                                                     AttentionGradOp op);

/// Rewrites one flash.attention into the online-softmax loop nest (see
/// flash-tile-attention); returns the results.
FailureOr<SmallVector<Value>> tileAttention(RewriterBase &rewriter,
                                            AttentionOp op, int64_t blockQ,
                                            int64_t blockKv);

/// Patterns rewriting arith.truncf/extf between `narrowTypes` (bf16, f16)
/// and f32/f64 into bit-exact integer arithmetic, so that the generated code
/// calls no compiler-runtime conversion builtin.
void populateExpandFloatConversionsPatterns(RewritePatternSet &patterns,
                                            ArrayRef<Type> narrowTypes);

/// Whether flash-tile-attention lowers this gradient op (no float captures,
/// whose gradients are Lq x Lk reductions, and static head counts); the
/// others are left to flash-decompose-attention.
bool canTileAttentionGrad(AttentionGradOp op);

/// Rewrites one flash.attention_grad into tiled loops that recompute P from
/// the LSE tile by tile (O(L) memory); returns the results.
FailureOr<SmallVector<Value>> tileAttentionGrad(RewriterBase &rewriter,
                                                AttentionGradOp op,
                                                int64_t blockQ,
                                                int64_t blockKv);

/// flash-attention-into-destination on every flash op under `root`: a
/// result materialized in a memref, whose init is a tensor.empty, is
/// written into that memref directly.
void writeAttentionIntoDestinations(Operation *root);

#define GEN_PASS_REGISTRATION
#include "flash/Transforms/Passes.h.inc"

} // namespace mlir::flash

#endif // FLASH_TRANSFORMS_PASSES_H
