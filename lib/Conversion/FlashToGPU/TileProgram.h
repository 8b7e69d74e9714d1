//===- TileProgram.h - the attention tile program every GPU kernel runs ---===//
//
// Every flash.attention kernel runs the same program and differs only in how
// it stages tiles and issues the two matmuls (its strategy, see
// KernelStrategies.h):
//
//   block (query block, batch·head) -> K/V head (grouped-query attention)
//   for each K/V tile the mask leaves visible (visibleTileRange):
//     S = Q Kᵀ                                   (strategy)
//     score_mod, mask where the tile needs it     (ScoreContext,
//                                                  tileNeedsElementMask)
//     m' = max(m, rowmax S); p = 2^(S - m'); l' = 2^(m - m') l + rowsum p
//                                                 (updateRunningMax/Sum)
//     O = 2^(m - m') O + P V                       (strategy)
//   O / l, lse = ln 2 (m + log2 l), 0 and -inf for a row that saw no key
//                                                 (finishRow)
//
// This header declares those shared pieces, each defined once
// (TileProgram.cpp; the register-fragment form of the softmax step in
// RegisterSoftmax.cpp), so the kernels cannot disagree on what the op means.
// Scores are kept in the log2 domain (log2 e folded into the scale) so the
// softmax needs one ex2 per element on the special-function unit.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_LIB_CONVERSION_FLASHTOGPU_TILEPROGRAM_H
#define FLASH_LIB_CONVERSION_FLASHTOGPU_TILEPROGRAM_H

#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "flash/Dialect/Flash/IR/IndexMask.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <array>
#include <functional>

namespace mlir::flash::gpu_lowering {

//===-- Constants and casts ----------------------------------------------===//

Value constI32(ImplicitLocOpBuilder &b, int64_t v);
Value constI64(ImplicitLocOpBuilder &b, int64_t v);
Value constIdx(ImplicitLocOpBuilder &b, int64_t v);
Value constF32(ImplicitLocOpBuilder &b, double v);
Value toI32(ImplicitLocOpBuilder &b, Value index);
Value toI64(ImplicitLocOpBuilder &b, Value index);
/// Bytes an integer or float element takes in memory (an i1 takes one).
int64_t storedBytes(Type elt);
/// A memref's aligned data pointer (!llvm.ptr; its offset not applied).
Value dataPointer(ImplicitLocOpBuilder &b, Value m);
/// A float of any width to the f32 the kernels compute in, and back: the
/// accumulators are f32 whatever the operands' and the output's types.
Value toF32(ImplicitLocOpBuilder &b, Value x);
Value fromF32(ImplicitLocOpBuilder &b, Value x, Type t);

//===-- Special-function unit ---------------------------------------------===//

/// ex2.approx.ftz.f32: 2^-inf = +0, which is what masked scores need, and no
/// libdevice, so the PTX is complete without a CUDA toolkit.
Value exp2Approx(ImplicitLocOpBuilder &b, Value x);
/// a·x + c in one rounding (llvm.intr.fma: math.fma would become libdevice's
/// __nv_fmaf, which only a CUDA toolkit's libdevice resolves).
Value fmaF32(ImplicitLocOpBuilder &b, Value a, Value x, Value c);
/// 2^x for the softmax's x <= 0 without the multi-function unit: x clamped
/// at -127 (2^x = +0 there, as exp2Approx flushes; NaN stays NaN), rounded
/// to j with the 1.5·2^23 shift, 2^(x-j) from a degree-3 polynomial on
/// [-0.5, 0.5] (7.5e-5 relative) times 2^j built in the exponent field.
Value exp2Poly(ImplicitLocOpBuilder &b, Value x);
/// lg2.approx.f32.
Value log2Approx(ImplicitLocOpBuilder &b, Value x);

//===-- Blocks, heads and tiles ------------------------------------------===//

struct HeadIndices {
  Value kvbh;                  // K/V batch·head of this query batch·head
  SmallVector<Value> batchIdx; // bh delinearised over the query batch dims
};
/// `bh` indexes the query's collapsed batch dims (sizes `batchSizes`, the
/// last one heads); K/V have `hkv` heads (grouped-query attention).
HeadIndices headIndices(ImplicitLocOpBuilder &b, Value bh,
                        ArrayRef<Value> batchSizes, Value hkv,
                        bool withBatchIndices);

/// `bh` delinearised over the batch dims of sizes `batchSizes`.
SmallVector<Value> batchIndices(ImplicitLocOpBuilder &b, Value bh,
                                ArrayRef<Value> batchSizes);

/// Launches spread their batch·head axis over grid.y and grid.z, because
/// grid.y stops at 65535 (launchOnStream); this is the CTA's index along
/// that axis, y + z · gridDim.y. A CTA past `count` (the excess of the last
/// z slice) ends at once: the kernel continues in a new block entered only
/// when the index is in range. `b` must be at the end of the kernel's
/// entry block.
Value batchHeadBlock(ImplicitLocOpBuilder &b, Value count);
/// The kernel goes on only where `cond` holds; elsewhere it returns. `b`
/// must be at the end of a block of the kernel, and is left in the new one.
void continueOnlyIf(ImplicitLocOpBuilder &b, Value cond);

/// The work of one block of a packed varlen batch (flash.varlen_attention):
/// the query blocks of the sequences are numbered one after another, and
/// block `x` is query block `block` of the sequence whose rows start at
/// token q0 (Lq of them) and keys at k0 (Lk). A block past the last
/// sequence's ends at once (continueOnlyIf).
struct SequenceBlock {
  Value block, q0, lq, k0, lk;
};
/// `cuq` / `cuk` are the i32 offsets [B + 1], `tq` / `tk` the token counts
/// the offsets are clamped into.
SequenceBlock varlenSequenceBlock(ImplicitLocOpBuilder &b, Value cuq,
                                  Value cuk, Value tq, Value tk, Value x,
                                  int64_t blockRows);

/// Where row `row` of batch·head `bh` lies in a kernel's Q, K, V or O:
/// [bh, row] in the contiguous [batch·heads, L, D] views, [offset + row,
/// bh] in a packed varlen batch's [tokens, heads, D] (the sequence's first
/// token at `offset`). The LSE is [bh, row] in both, the row shifted by the
/// offset.
struct RowPlace {
  Value offset; // null: contiguous
  SmallVector<Value, 2> rows(ImplicitLocOpBuilder &b, Value bh,
                             Value row) const;
  SmallVector<Value, 2> lse(ImplicitLocOpBuilder &b, Value bh,
                            Value row) const;
};

/// The product of `sizes` (1 for none).
Value product(ImplicitLocOpBuilder &b, ArrayRef<Value> sizes);
/// The largest grid.y of a launch.
constexpr int64_t kMaxGridY = 65535;

/// The offset of the mask's diagonal: Lk - Lq for bottom-right alignment,
/// else 0 (key j is visible to query i when j <= i + offset).
Value maskDiagonalOffset(ImplicitLocOpBuilder &b, MaskAttr mask, Value lq,
                         Value lk);

/// [begin, end) in units of `tileRows` keys: the tiles that query rows
/// [q0, q0 + blockRows) can see under `mask` (null or none: all of them).
/// Tiles outside are skipped, never loaded.
std::pair<Value, Value> visibleTileRange(ImplicitLocOpBuilder &b, MaskAttr mask,
                                         Value q0, int64_t blockRows, Value lq,
                                         Value lk, int64_t tileRows);

/// The transpose for kernels that walk query blocks under a key block (the
/// backward): [begin, end) in units of `blockRows` query rows, the blocks
/// that can see a key of [k0, k0 + keys) ∩ [0, lk) under `mask`.
std::pair<Value, Value> visibleQueryBlockRange(ImplicitLocOpBuilder &b,
                                               MaskAttr mask, Value k0,
                                               int64_t keys, Value lq,
                                               Value lk, int64_t blockRows);

/// Whether the keys [colLo, colLo + tileRows) need the per-element mask for
/// query rows [rowLo, rowHi]: they cross Lk, or a causal/window bound of one
/// of the rows. A tile that does not (a "whole" tile) takes the softmax
/// without index arithmetic. `diagOff` is maskDiagonalOffset's value.
Value tileNeedsElementMask(ImplicitLocOpBuilder &b, MaskAttr mask, Value colLo,
                           int64_t tileRows, Value rowLo, Value rowHi,
                           Value lk, Value diagOff);

/// Whether key `col` is visible to query `row`: inside Lk and allowed by
/// the structured mask.
Value scoreAllowed(ImplicitLocOpBuilder &b, MaskAttr mask, Value row,
                   Value col, Value lq, Value lk);

/// What scoreAllowed admits along one index with the other fixed, as a
/// closed interval relative to a `base`: index base + k is visible iff
/// lo <= k <= hi (i32; a null bound is no bound). Built once per row (or
/// key) and tile, it leaves each element one or two compares of the
/// constant k, where scoreAllowed is 64-bit index arithmetic and three
/// compares per element (the causal diagonal tile's mask was a tenth of the
/// forward kernel's instructions, bench/NOTES run 68).
struct VisibleSpan {
  Value lo, hi;
  /// Whether index base + k is visible (i1).
  Value admits(ImplicitLocOpBuilder &b, int64_t k) const;
};
/// The keys query `row` sees, relative to key `base`.
VisibleSpan rowKeys(ImplicitLocOpBuilder &b, MaskAttr mask, Value row,
                    Value base, Value lq, Value lk);
/// The queries that see key `key`, relative to query `base`.
VisibleSpan keyQueries(ImplicitLocOpBuilder &b, MaskAttr mask, Value key,
                       Value base, Value lq, Value lk);

/// Exact f32 copies of a score's row and column indices, both in
/// [0, bound] with bound < 2^24 (every integer there is an f32).
struct IndexFloats {
  Value row, col; // f32
  int64_t bound = 0;
};

/// The IndexFloats bound of indices into lengths statically at most
/// `indexBound`, a block's padding included; nothing when that is unknown
/// (0) or an index could reach 2^24.
std::optional<int64_t> exactIndexBound(int64_t indexBound);
/// An index below 2^24 as an f32 (through i32: one I2F).
Value indexToF32(ImplicitLocOpBuilder &b, Value i);
/// Replaces the clones (in `map`) of `scoreMod`'s integer-to-f32
/// conversions of index expressions — sums, differences, small multiples,
/// minima and maxima of the row index `row`, the column index `col` and
/// constants, every partial result below 2^24 — by that arithmetic in f32
/// on `floats`'s exact copies, leaving the others (and those `skip`
/// accepts) as they are.
void foldIndexConversions(ImplicitLocOpBuilder &b, Region &scoreMod,
                          IRMapping &map, Value row, Value col,
                          const IndexFloats &floats,
                          function_ref<bool(Value)> skip = nullptr);

/// A thread's view of the capture tiles the wgmma producer staged in
/// shared memory for the current K/V tile (CaptureStaging.cpp): per
/// capture of the op (empty where it is not staged), for each 16-byte chunk
/// c of a 128-byte panel row, the address of the thread's first row's
/// element pair in chunk c of panel 0 (!llvm.ptr<3>); and the bytes
/// between panels.
struct StagedTiles {
  SmallVector<SmallVector<Value, 8>> chunk;
  SmallVector<int64_t> panelBytes;
  bool stages(unsigned capture) const {
    return capture < chunk.size() && !chunk[capture].empty();
  }
};

/// A score's key column before the clamp into [0, lk) that the score_mod
/// sees, and the key length. With `staged`, the tile's staged captures and
/// the thread's row half the score is in.
struct KeyColumn {
  Value col, lk; // index
  const StagedTiles *staged = nullptr;
  int half = 0;
};

/// `v` as base + constant where it is an addi with a constant right
/// operand (the fragment's column of a tile: a per-tile base plus the
/// element's offset), else (v, 0).
std::pair<Value, int64_t> splitConstantOffset(Value v);

/// The score_mod region applied to one score, with its indices; captures
/// are the memrefs of the op's captures. With `yielded` (a value of the
/// region), that value instead of what the region yields. With `seed`, the
/// region values already cloned for this score (a prefetch). With `floats`,
/// the region's integer-to-float conversions of sums, differences, small
/// multiples, minima and maxima of the row and column indices are
/// evaluated in f32 from them, exactly (every partial result stays below
/// 2^24), instead of converting a 64-bit integer per score. With `key`,
/// capture reads along the key index are predicated loads (loadCapture).
Value inlineScoreMod(ImplicitLocOpBuilder &b, Region &scoreMod, Value score,
                     ArrayRef<Value> batchIdx, Value row, Value col,
                     ArrayRef<Value> captures, Value yielded = Value(),
                     const IndexFloats *floats = nullptr,
                     const IRMapping *seed = nullptr,
                     const KeyColumn *key = nullptr);

//===-- Masks of the indices alone (IndexMask.h) -------------------------===//
//
// A score_mod that masks by its indices alone sorts tiles as the structured
// masks do: the kernels start and stop their key loop at the first and last
// tile it may show, and step over the hidden run between two runs it shows
// where the mask is a disjunction (trimHiddenTiles, TileWalk); a hidden
// tile the analysis cannot separate is masked per element. A tile it shows
// whole takes the mask-free softmax with the score_mod minus its mask
// (ScoreContext::indexFull).

/// The index mask of a kernel's score_mod (null: none), where the kernel
/// can bound a block's query rows and batch indices (`classifiable`: the
/// rows' queries and heads are known as ranges; not so where a packed
/// layout's rows are not traced back to them); none otherwise.
std::optional<IndexMask> kernelIndexMask(Region *scoreMod, int64_t numBatchDims,
                                         bool classifiable);

/// The index mask's classification of rows [rowLo, rowHi] and keys
/// [colLo, colLo + cols) of batch indices in [batchLo, batchHi] (per dim;
/// one batch·head: the same values twice), clamped into [0, lq) x [0, lk)
/// as the score_mod sees them.
TileClass classifyScoreTile(ImplicitLocOpBuilder &b, Region &scoreMod,
                            const IndexMask &mask, ArrayRef<Value> batchLo,
                            ArrayRef<Value> batchHi, Value rowLo, Value rowHi,
                            Value colLo, int64_t cols, Value lq, Value lk);

/// The key tiles a block visits, as the steps [begin, end) of its loop:
/// step t is tile t up to `gapAt`, and tile t + gapLen from there, so the
/// steps jump over a hidden run between two visible ones. Loop bounds, K/V
/// ring slots and the splits' shares follow the steps; key coordinates
/// follow tile(t). Without a gap (null) a step is its tile.
struct TileWalk {
  Value begin, end;
  Value gapAt, gapLen;

  /// The tile of step `t`.
  Value tile(ImplicitLocOpBuilder &b, Value t) const;
};

/// The walk over `range` (of tiles of `tileRows` keys) without the tiles
/// the index mask hides from rows [q0, q0 + blockRows) of batch indices in
/// [batchLo, batchHi]: at either end, and between two runs it shows where
/// it is a disjunction (splitDisjunction; each side's range trimmed alone,
/// the gap between them skipped). Bisections over runs of tiles, the same
/// in every thread of the block.
TileWalk trimHiddenTiles(ImplicitLocOpBuilder &b, Region &scoreMod,
                         const IndexMask &mask, ArrayRef<Value> batchLo,
                         ArrayRef<Value> batchHi, std::pair<Value, Value> range,
                         Value q0, int64_t blockRows, Value lq, Value lk,
                         int64_t tileRows);

/// One split's share [begin, end) of a walk's steps [stepBegin, stepEnd)
/// in a split-KV kernel. With `divideVisible` (a mask trimmed the range:
/// a window or a chunk of a long cache would leave most fixed shares
/// empty) the `splits` splits divide the steps evenly; otherwise split s
/// takes tiles [s·tilesPerSplit, (s + 1)·tilesPerSplit), the host's plan.
std::pair<Value, Value> splitShare(ImplicitLocOpBuilder &b, Value stepBegin,
                                   Value stepEnd, Value splits, Value split,
                                   Value tilesPerSplit, bool divideVisible);

/// Which of a score_mod's `numCaptures` captures `read` reads.
unsigned captureNumber(tensor::ExtractOp read, unsigned numCaptures);

/// The element a score_mod's `read` of a capture takes, from the capture's
/// memref (`captures`: the op's, in order) at `indices` (mapped). With
/// `key`, a read whose last index is the key index (a bias or a mask
/// tensor's row) loads at the unclamped column, predicated on it being a
/// key: an address per row and tile and an immediate offset per column,
/// where a clamped column costs a min and 64-bit address arithmetic per
/// score. A column past Lk reads 0, which only masked scores see. A
/// capture `key->staged` holds is read from its tile in shared memory
/// (loadStagedCapture).
Value loadCapture(OpBuilder &b, ArrayRef<Value> captures,
                  tensor::ExtractOp read, ValueRange indices,
                  const KeyColumn *key = nullptr);

/// The element of staged capture `capture` (type `elt`) at the fragment
/// column `col` of the thread's row half `half`, from the tile in shared
/// memory: one ld.shared at an immediate offset from a per-tile chunk
/// address (CaptureStaging.cpp).
Value loadStagedCapture(ImplicitLocOpBuilder &b, const StagedTiles &tiles,
                        unsigned capture, Type elt, Value col, int half);

/// [b..., rest...] -> [prod(b), rest...] ([1, rest...] without batch dims).
Value collapseBatchDims(ImplicitLocOpBuilder &b, Value m, int64_t nb);

//===-- The online-softmax recurrence -------------------------------------===//

struct MaxUpdate {
  Value m;     // the new running max m' = max(m, rowMax)
  Value mUse;  // what scores subtract: m', or 0 while m' = -inf
  Value alpha; // 2^(m - mUse), the rescale of l and O
};
/// m' = max(m, rowMax) in the log2 domain. A row with nothing allowed so far
/// keeps m = -inf and subtracts 0 instead, so 2^(-inf - m) is 0, never NaN.
MaxUpdate updateRunningMax(ImplicitLocOpBuilder &b, Value m, Value rowMax);
/// l' = alpha l + rowSum.
Value updateRunningSum(ImplicitLocOpBuilder &b, Value l, Value alpha,
                       Value rowSum);

struct PartialMerge {
  Value m, l;  // the merged running max and sum
  Value alpha; // rescale of the accumulator merged so far
  Value beta;  // weight of the partial's accumulator
};
/// Merges a partial result of the same row — running max `pm` and sum `pl`
/// (log2 domain) over a disjoint key range — into (m, l): the recurrence
/// itself with rowMax = pm and rowSum = 2^(pm - m') pl, so O = alpha O +
/// beta O_p. A split-KV partial stored normalised enters with its lse·log2 e
/// as `pm` and 1 as `pl`. Partials that saw no key (pm = -inf) get beta = 0,
/// never NaN.
PartialMerge mergePartial(ImplicitLocOpBuilder &b, Value m, Value l, Value pm,
                          Value pl);

struct RowResult {
  Value live; // the row saw at least one key (l > 0)
  Value inv;  // 1 / l, or 0 for a row that saw none
  Value lse;  // ln 2 (m + log2 l), or -inf; null unless asked for
};
/// The epilogue of one row from its final (m, l): the normaliser of O and
/// the log-sum-exp. With `sinkLog2` (sinkLog2's value for the row's head)
/// the sink is merged first as a partial of one key whose value is zero
/// (mergePartial with pl = 1): it adds to l and its rescale of the
/// accumulator goes into `inv`, so a row that saw no key still ends at 0
/// with lse = sink. A kernel whose rows are split-KV partials leaves the
/// sink to the combine, which must count it once.
RowResult finishRow(ImplicitLocOpBuilder &b, Value m, Value l, bool withLse,
                    Value sinkLog2 = Value());
/// The sink logit of the query head of `flatHead` (a batch·head index; the
/// head is it modulo the sinks' length) in the kernels' log2 domain,
/// sinks[h]·log2 e as f32. `sinks` is the op's [Hq] buffer.
Value sinkLog2(ImplicitLocOpBuilder &b, Value sinks, Value flatHead);

//===-- Accumulator fragments --------------------------------------------===//

/// Where element `i` of a thread's tensor-core accumulator lies: the m16n8
/// (mma.sync) and m64nN (wgmma) f32 accumulators share one layout per 16
/// rows, row 16·warp + lane/4 + 8·rowHalf(i) and column
/// 8·(i/4) + 2·(lane%4) + i%2. The softmax, the P -> A-operand packing and
/// the epilogues index accumulators only through this.
struct AccumulatorLayout {
  static int64_t rowHalf(int64_t i) { return (i / 2) % 2; }
  /// Column of element i relative to the thread's lane column 2·(lane%4).
  static int64_t column(int64_t i) { return 8 * (i / 4) + i % 2; }
  /// The element at relative column `col` (even: the first of a pair) in
  /// row half `h`.
  static int64_t element(int64_t col, int64_t h) {
    return 4 * (col / 8) + 2 * h + col % 2;
  }
};

/// Per-thread running state of its two accumulator rows (log2 domain).
struct RowState {
  Value m[2]; // running max of the log2-scaled scores
  Value l[2]; // this thread's partial row sums (quad-reduced at the end)
};

/// What the softmax step needs to know about the scores of one tile: their
/// indices, and the op's score_mod and mask.
struct ScoreContext {
  Value rowIdx[2];        // global query row of each half (index)
  Value colBase;          // global key column of the fragment's column 0
  Value laneCol;          // 2·(lane%4), index
  bool needsMask = false; // this tile takes the per-element mask
  /// The keys a row may see, relative to colBase + laneCol.
  std::function<VisibleSpan(ImplicitLocOpBuilder &, Value)> keysOf;
  /// score_mod on the natural-units score (scale·q·k) at (row, col); null:
  /// none. `seed` (or null): the region values a prefetch computed for this
  /// score.
  using ScoreFn = std::function<Value(ImplicitLocOpBuilder &, Value, Value,
                                      Value, const IRMapping *seed)>;
  ScoreFn scoreMod;
  /// Where the score_mod masks by indices alone: the score_mod without its
  /// mask (null: the score itself), and whether the tile's rows see every
  /// key of it under that mask (i1, uniform over the rows the softmax's
  /// shuffles span; null: not classified). maskedSoftmaxStep takes the
  /// mask-free branch with liveScoreMod where indexFull holds.
  ScoreFn liveScoreMod;
  Value indexFull;
  /// The score_mod's capture reads at indices that do not depend on the
  /// score, and what those indices need, cloned for the score at (row,
  /// col); null where the region has none. Issued before the tile's QKᵀ is
  /// waited for, a read's latency hides under the tensor cores' work.
  std::function<IRMapping(ImplicitLocOpBuilder &, Value, Value)> prefetch;
  /// Per fragment element, what `prefetch` cloned (empty: none).
  SmallVector<IRMapping> prefetched;
  /// Of every 8 fragment elements, how many the softmax exponentiates with
  /// exp2Poly rather than exp2Approx.
  int64_t softExp2 = 0;
};

/// Fills `ctx.prefetched` for the `numElements` accumulator elements of a
/// thread (nothing where ctx.prefetch is null).
void prefetchScoreReads(ImplicitLocOpBuilder &b, ScoreContext &ctx,
                        int64_t numElements);

/// The ScoreContext of a tile whose key columns start at `colBase`, for a
/// thread owning `rows`: the mask over (lq, lk) and the op's score_mod, whose
/// indices are clamped into [0, lq) x [0, lk) so that a capture such as a
/// [Lq, Lk] bias is never read past its end (tail rows and columns are
/// masked or never stored). `indexBound` > 0: a static bound on Lq and Lk
/// (IndexFloats where it is below 2^24).
ScoreContext makeScoreContext(ImplicitLocOpBuilder &b, MaskAttr mask,
                              Region *scoreMod, const Value rows[2],
                              Value colBase, Value laneCol, Value lq, Value lk,
                              ArrayRef<Value> batchIdx,
                              ArrayRef<Value> captures, bool needsMask,
                              int64_t indexBound = 0,
                              const StagedTiles *staged = nullptr);
/// The same for a thread whose two rows belong to different heads (rows of
/// several query heads packed into one tile): batch indices per row half.
ScoreContext makeScoreContext(ImplicitLocOpBuilder &b, MaskAttr mask,
                              Region *scoreMod, const Value rows[2],
                              Value colBase, Value laneCol, Value lq, Value lk,
                              std::array<ArrayRef<Value>, 2> batchIdx,
                              ArrayRef<Value> captures, bool needsMask,
                              int64_t indexBound = 0,
                              const StagedTiles *staged = nullptr);

/// Turns the raw QKᵀ accumulator values `s` into probabilities p (in place),
/// updates `st` and returns the per-row rescale factors alpha.
std::array<Value, 2> onlineSoftmaxStep(ImplicitLocOpBuilder &b,
                                       SmallVectorImpl<Value> &s, RowState &st,
                                       double scale, const ScoreContext &ctx);
/// The softmax step under `scf.if needsMask`: the masked branch with index
/// arithmetic, the other without. `s` becomes p, `st` the new state.
std::array<Value, 2> maskedSoftmaxStep(ImplicitLocOpBuilder &b,
                                       SmallVectorImpl<Value> &s, RowState &st,
                                       double scale, Value needsMask,
                                       const ScoreContext &ctx);
/// Max or sum over groups of `lanes` (a power of two up to 32) adjacent
/// lanes, by butterfly shuffles; every lane of a group gets the result.
Value butterflyReduce(ImplicitLocOpBuilder &b, Value v, bool isMax,
                      int64_t lanes);
/// Quad (4-lane) butterfly reduction.
Value quadReduce(ImplicitLocOpBuilder &b, Value v, bool isMax);
/// Packs probabilities (accumulator layout) into tensor-core A-operand
/// fragments: four i32 (two 16-bit values each) per k16 block.
SmallVector<Value> packA(ImplicitLocOpBuilder &b, ArrayRef<Value> p,
                         Type elemType);

} // namespace mlir::flash::gpu_lowering

#endif // FLASH_LIB_CONVERSION_FLASHTOGPU_TILEPROGRAM_H
