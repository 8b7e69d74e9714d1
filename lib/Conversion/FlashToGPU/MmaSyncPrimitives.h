//===- MmaSyncPrimitives.h - mma.sync, ldmatrix and cp.async builders -----===//
//
// The sm_80+ tensor-core pieces the mma.sync strategies (MmaKernel.cpp, the
// split-KV decode kernel) issue their matmuls and copies with, and the
// legality rule they share.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_LIB_CONVERSION_FLASHTOGPU_MMASYNCPRIMITIVES_H
#define FLASH_LIB_CONVERSION_FLASHTOGPU_MMASYNCPRIMITIVES_H

#include "TileProgram.h"

#include <string>

namespace mlir::flash::gpu_lowering {

/// Whether m16n8k16 mma.sync kernels take `op`: Q, K and V all bf16 or all
/// f16, D a multiple of 16 (the k of QKᵀ) and Dv of 8 (the n of PV), both
/// static and at most 256; otherwise `why` says which rule failed.
bool mmaSyncSupports(AttentionOp op, std::string &why);
/// The same rule on element types and head dims alone (for ops other than
/// flash.attention that the mma.sync kernels take).
LogicalResult mmaSyncShapeSupported(Type q, Type k, Type v, int64_t d,
                                    int64_t dv, std::string &why);

/// A thread's place in its warp for m16n8k16 fragments and ldmatrix.
struct MmaLane {
  Value tid, warp, lane;
  Value g;         // lane / 4: the fragment row (and row + 8)
  Value t2;        // 2·(lane % 4): the fragment's column pair
  Value lane8;     // ldmatrix row address of B = Kᵀ: lane % 8 ...
  Value laneHalf8; // ... and its column, 8 for lanes 8-15
  Value lane16;    // ldmatrix.trans row address of B = V: lane % 16
};
MmaLane mmaLane(ImplicitLocOpBuilder &b);

/// Two 16-bit elements as one 32-bit mma.sync operand register.
Value packPair(ImplicitLocOpBuilder &b, Value lo, Value hi);

/// The two B-operand registers of one m16n8k16 mma from a shared-memory
/// tile with one ldmatrix.x2 at `indices` (this lane's row address: lanes
/// 0-7 the rows of the first 8×8 matrix, lanes 8-15 those of the second).
SmallVector<Value, 2> ldmatrixB(ImplicitLocOpBuilder &b, Value tile,
                                ValueRange indices, bool transpose);

/// Four 8×8 matrices with one ldmatrix.x4: lane l gives the address of row
/// l % 8 of matrix l / 8, and register i holds matrix i. They are
/// - the A operand of one m16n8k16 mma (a0: rows 0-7 × k 0-7, a1: rows 8-15
///   × k 0-7, a2: rows 0-7 × k 8-15, a3: rows 8-15 × k 8-15): from a
///   row-major [m][k] tile (no transpose) row l % 16, column 8·(l / 16);
///   from a [k][m] tile (transpose) row 8·(l / 16) + l % 8, column
///   8·((l / 8) % 2);
/// - or the B operands of two mmas side by side in n (registers 0-1 for
///   columns n0..n0+7, 2-3 for n0+8..n0+15): from an [n][k] tile (no
///   transpose) row n0 + 8·(l / 16) + l % 8, column 8·((l / 8) % 2); from a
///   [k][n] tile (transpose) row l % 16, column n0 + 8·(l / 16).
SmallVector<Value, 4> ldmatrixX4(ImplicitLocOpBuilder &b, Value tile,
                                 ValueRange indices, bool transpose);

/// acc (4 × f32, one m16n8 fragment) += A (4 regs) · B (2 regs), m16n8k16.
SmallVector<Value, 4> mmaSync(ImplicitLocOpBuilder &b, Type elem,
                              ArrayRef<Value> a, ArrayRef<Value> bRegs,
                              ArrayRef<Value> acc);

/// The two mmas of n-blocks 2·n16 and 2·n16 + 1 of `acc` (m16n8 fragments
/// of 4, in place) with one A and an ldmatrixX4 pair of B operands.
void mmaSyncPair(ImplicitLocOpBuilder &b, Type elem, ArrayRef<Value> a,
                 ArrayRef<Value> bPair, SmallVectorImpl<Value> &acc,
                 int64_t n16);

/// The A fragments of 16 query rows from global memory: per 16 columns
/// a0 = (row0, 2t..2t+1), a1 = (row1, 2t..), a2 = (row0, 2t+8..),
/// a3 = (row1, 2t+8..), with `row0`/`row1` this thread's rows g and g + 8
/// (already clamped) of `bhRow[h]` in q, placed by `place` ([bh, L, D], or
/// a packed [tokens, heads, D]).
SmallVector<Value> loadQueryFragments(ImplicitLocOpBuilder &b, Value q,
                                      const Value bh[2], const Value rows[2],
                                      Value t2, int64_t d,
                                      const RowPlace &place = {});

} // namespace mlir::flash::gpu_lowering

#endif // FLASH_LIB_CONVERSION_FLASHTOGPU_MMASYNCPRIMITIVES_H
