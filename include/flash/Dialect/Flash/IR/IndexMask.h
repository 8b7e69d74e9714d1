//===- IndexMask.h - masks of a score_mod that read indices alone -*- C++ -*-===//
//
// A score_mod that masks with a predicate of the indices alone (prefix-LM,
// chunked or local attention, strided and dilated patterns, causal with a
// window written as compares, a FlexAttention mask_mod) decides per tile of
// scores, not per element: over a block of query rows and a tile of keys
// the predicate is false everywhere (the tile is empty and never computed),
// true everywhere (full: the mask is dropped) or mixed (partial: masked per
// element, as before). The classification is interval arithmetic over the
// predicate's ops, built once from the region at compile time and emitted
// as a few scalar ops per tile, so it holds for dynamic shapes too. Every
// lowering that tiles takes it from here.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_DIALECT_FLASH_IR_INDEXMASK_H
#define FLASH_DIALECT_FLASH_IR_INDEXMASK_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Region.h"

#include <optional>

namespace mlir::flash {

/// The index-only mask of a score_mod region: the region yields `live`
/// where `predicate` holds and -inf elsewhere. It is written as
/// `select(p, x, -inf)`, `select(p, -inf, x)` (p negated), or
/// `x + select(p, 0, -inf)`, nested in any order (the predicates are
/// conjoined); every predicate reads only the index arguments and
/// constants, through ops interval arithmetic has a rule for.
struct IndexMask {
  /// One conjunct of the mask, with whether it was negated.
  struct Term {
    Value predicate;
    bool negated;
  };
  SmallVector<Term> terms;
  /// What the region yields where every term allows the score; the score
  /// argument itself when the region is only the mask.
  Value live;
  unsigned numIndices; // batch dims + 2 (i, j)

  bool liveIsScore(Region &scoreMod) const {
    return live == scoreMod.front().getArgument(0);
  }
};

/// The index-only mask of `scoreMod` (whose block takes the score and
/// `numIndices` indices before the captures), or none when it has no such
/// mask: nothing masks, or a predicate reads the score or a capture, or an
/// op with no interval rule.
std::optional<IndexMask> findIndexMask(Region &scoreMod, unsigned numIndices);

/// The mask as two masks whose union it is, where one of its terms is a
/// disjunction — `a | b`, or a negated `a & b` — : the same terms with that
/// one replaced by each side; none when no term is. A run of key tiles the
/// mask hides may lie between runs it shows (attention sinks and a local
/// window over a long cache); each side hides one end of it, so trimming
/// each side's range finds it.
std::optional<std::pair<IndexMask, IndexMask>>
splitDisjunction(const IndexMask &mask);

/// The classification of one tile, as i1 values: `empty` when the mask
/// allows no element of it, `full` when it allows every element.
struct TileClass {
  Value empty, full;
};

/// Emits at `b`'s insertion point the classification of the tile of query
/// rows [iLo, iHi] and key columns [jLo, jHi] (inclusive, index values, as
/// the region sees them) at batch indices in [batchLo[d], batchHi[d]] (the
/// same values where the tile has one batch index).
TileClass emitTileClass(OpBuilder &b, Location loc, Region &scoreMod,
                        const IndexMask &mask, ValueRange batchLo,
                        ValueRange batchHi, Value iLo, Value iHi, Value jLo,
                        Value jHi);

/// The mean number of key tiles a block of `blockRows` query rows of a
/// static [lq, lk] walks under the mask: from the first tile of `tileCols`
/// keys that emitTileClass does not prove empty to the last (the ends the
/// kernels trim), every batch index in [0, batchBound]. Evaluated by
/// folding that classification on constants, over evenly spaced blocks
/// where there are many; none where it does not fold. A cost model for
/// choosing a kernel's grid.
std::optional<double> meanWalkedTiles(Region &scoreMod, const IndexMask &mask,
                                      int64_t lq, int64_t lk, int64_t blockRows,
                                      int64_t tileCols, int64_t batchBound);

/// Inlines `scoreMod` for one element of a full tile: the value the region
/// yields where the mask allows the score (`mask.live`), built from clones
/// of the region's ops at `b`'s insertion point; `captures` as for
/// buildScoreMod. Returns `s` itself when the region is only the mask.
Value buildScoreModLive(OpBuilder &b, Region &scoreMod, const IndexMask &mask,
                        Value s, ValueRange batch, Value i, Value j,
                        ValueRange captures);

} // namespace mlir::flash

#endif // FLASH_DIALECT_FLASH_IR_INDEXMASK_H
