//===- PagedGather.cpp - K/V gathered through a block table: paged attention =//
//
// A frontend that serves from a paged KV cache writes the gather itself:
// `k_cache[block_table]` (torch; torch-mlir's index.Tensor is a linalg.generic
// whose body reads the table entry and `tensor.extract`s the pool at it),
// `jnp.take` (stablehlo.gather, lowered the same way, with a clamp), or
// `tensor.gather`; then a reshape of [B, pages, page_size, Hkv, D] into
// [B, pages · page_size, Hkv, D], a transpose to heads-major, and a mask that
// hides the positions past each sequence's length. Raised as it stands, that
// is a flash.attention over the gathered copy: the whole cache materialised
// per call and read twice. flash.paged_attention reads the pool in place, so
// once the attention is raised, this fold rewrites it when:
//
//   - K and V are that reshape of gathers through the same table by the same
//     page function (the ops between the table entry and the page index,
//     which are cloned onto the table so that a negative-index wrap or a
//     clamp the frontend wrote keeps its meaning), reading whole pages of
//     pools laid out [num_pages, page_size, Hkv, D];
//   - the score_mod's result is `select(j < lens[b], t, fill)` (a per-sequence
//     length, or one length for the batch) with a fill the raiser reads as
//     -inf, or there is no score_mod (every sequence is then the full
//     table's capacity). Whatever computes `t` from the score becomes the
//     paged op's score_mod: its indices mean the same there (key j of the
//     gathered cache is position j of its sequence), with the captures it
//     reads. What is applied after the length mask is refused (it would see
//     the masked keys' fill);
//   - there is no structured mask: it would be at the gathered length, not
//     at the paged op's per-sequence diagonal.
//
// The lengths become i32 clamped into [0, capacity], which is what the
// original's compare sees on the gathered keys; the table entries become
// i32 pages (a pool of 2^31 pages does not exist). With remarks on, a K or V
// gathered through a table that does not fold says which condition failed.
//
//===----------------------------------------------------------------------===//
#include "RaiseAttentionImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

namespace {
/// operand[b, h, p · S + s, d] = cache[page(table[b, p]), s, h, d].
struct PagedRead {
  Value cache;
  /// [B, P] of any integer type or index; for tensor.gather, its indices
  /// [B, P, 1].
  Value table;
  /// The gather body's value of table[b, p] and the page index computed
  /// from it by `chain` (in order); both null for tensor.gather.
  Value entry, page;
  SmallVector<Operation *> chain;
  Operation *gather = nullptr;
};

enum class Found { None, Paged, Refused };

/// Strips value-preserving integer widenings (index_cast is signed, like
/// extsi; extui is not value-preserving for a negative length).
Value stripIntCasts(Value v) {
  while (Operation *d = v.getDefiningOp()) {
    if (isa<arith::IndexCastOp, arith::ExtSIOp>(d))
      v = d->getOperand(0);
    else
      break;
  }
  return v;
}

bool isLinalgIndex(Value v, int64_t dim) {
  auto i = v.getDefiningOp<linalg::IndexOp>();
  return i && static_cast<int64_t>(i.getDim()) == dim;
}

/// Whether `v` is a float constant the raiser reads as -inf (ScoreMod.cpp).
bool isFillConstant(Value v) {
  FloatAttr f;
  return matchPattern(v, m_Constant(&f)) && f.getValueAsDouble() <= -1e4;
}
} // namespace

/// The page chain of a gather body: ops from the table entry to `page`, each
/// a pure arith op over the chain and constants. Sets r.entry and r.chain.
static LogicalResult matchPageChain(linalg::GenericOp gen, Value page,
                                    int64_t gb, int64_t gp, PagedRead &r,
                                    std::string &why) {
  Block *body = gen.getBody();
  SmallVector<Value> work{page};
  llvm::SetVector<Operation *> ops;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != body)
        continue; // loop-invariant: an argument of an enclosing block
      if (arg.getArgNumber() >= gen.getNumDpsInputs()) {
        why = "the page index reads the gather's output";
        return failure();
      }
      OpOperand *in = gen.getDpsInputOperand(arg.getArgNumber());
      AffineMap m = gen.getMatchingIndexingMap(in);
      if (m.getNumResults() != 2 || m.getResult(0) != getAffineDimExpr(gb, m.getContext()) ||
          m.getResult(1) != getAffineDimExpr(gp, m.getContext())) {
        why = "the page index reads an input other than the table at (batch, "
              "page)";
        return failure();
      }
      if (r.entry && r.entry != v) {
        why = "the page index reads two table entries";
        return failure();
      }
      r.entry = v;
      r.table = in->get();
      continue;
    }
    Operation *d = v.getDefiningOp();
    if (d->getBlock() != body || matchPattern(v, m_Constant()))
      continue; // loop-invariant: a constant, or a value from outside
    if (auto ex = dyn_cast<tensor::ExtractOp>(d)) {
      if (ex.getIndices().size() != 2 || !isLinalgIndex(ex.getIndices()[0], gb) ||
          !isLinalgIndex(ex.getIndices()[1], gp) ||
          ex.getTensor().getParentBlock() == body) {
        why = "the page index reads a tensor other than a table at (batch, "
              "page)";
        return failure();
      }
      if (r.entry && r.entry != v) {
        why = "the page index reads two table entries";
        return failure();
      }
      r.entry = v;
      r.table = ex.getTensor();
      continue;
    }
    if (isa<linalg::IndexOp>(d)) {
      why = "the page index depends on a loop index, not only on the table";
      return failure();
    }
    if (!isa<arith::ArithDialect>(d->getDialect()) || d->getNumResults() != 1 ||
        d->getNumRegions() != 0) {
      why = "the page index is computed by " +
            d->getName().getStringRef().str();
      return failure();
    }
    if (ops.insert(d))
      work.append(d->operand_begin(), d->operand_end());
  }
  if (!r.entry) {
    why = "the page index does not read a table";
    return failure();
  }
  // Body order is a topological order of the chain.
  for (Operation &op : body->without_terminator())
    if (ops.contains(&op))
      r.chain.push_back(&op);
  r.page = page;
  return success();
}

/// Whether `operand` ([B, Hkv, L, D] of a flash.attention) is the reshape
/// of a gather through a block table.
static Found matchPagedRead(Value operand, PagedRead &r, std::string &why,
                            Operation *&at) {
  auto type = dyn_cast<RankedTensorType>(operand.getType());
  if (!type || type.getRank() != 4)
    return Found::None;
  llvm::SetVector<Operation *> seen;
  OperandView view = lookThroughOperand(operand, {0, 1, 2, 3}, nullptr, seen);
  auto collapse = view.value.getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse)
    return Found::None;
  Value g = collapse.getSrc();
  auto gType = cast<RankedTensorType>(g.getType());
  SmallVector<ReassociationIndices> groups =
      collapse.getReassociationIndices();
  // A single gathered dim for each of B, Hkv, D; the group of L.
  auto single = [&](int64_t t) -> int64_t {
    const ReassociationIndices &grp = groups[view.perm[t]];
    return grp.size() == 1 ? grp[0] : -1;
  };
  int64_t gb = single(0), gh = single(1), gd = single(3);
  const ReassociationIndices &lgroup = groups[view.perm[2]];
  Operation *def = g.getDefiningOp();
  at = def;

  if (auto gather = dyn_cast_or_null<tensor::GatherOp>(def)) {
    auto src = gather.getSourceType();
    auto idx = gather.getIndicesType();
    if (gather.getGatherDims() != ArrayRef<int64_t>{0} || src.getRank() != 4 ||
        idx.getRank() != 3 || idx.getDimSize(2) != 1)
      return Found::None;
    // Result [B, P, (1,) S, Hkv, D]: the indices' leading dims, then the
    // pool's with the gathered one kept as 1 unless rank-reduced.
    int64_t s0 = gType.getRank() == 6 ? 3 : 2;
    SmallVector<int64_t> want =
        s0 == 3 ? SmallVector<int64_t>{1, 2, 3} : SmallVector<int64_t>{1, 2};
    if (gb != 0 || gh != s0 + 1 || gd != s0 + 2 ||
        ArrayRef<int64_t>(lgroup) != ArrayRef<int64_t>(want)) {
      why = "the gathered pages are not reshaped into [batch, pages · "
            "page_size, heads, D]";
      return Found::Refused;
    }
    r.cache = gather.getSource();
    r.table = gather.getIndices();
    r.gather = gather;
    return Found::Paged;
  }

  auto gen = dyn_cast_or_null<linalg::GenericOp>(def);
  if (!gen || gen.getNumDpsInits() != 1 || gType.getRank() != 5 ||
      gen.getNumLoops() != 5 ||
      !gen.getMatchingIndexingMap(gen.getDpsInitOperand(0)).isIdentity())
    return Found::None;
  auto yield = cast<linalg::YieldOp>(gen.getBody()->getTerminator());
  auto ex = yield.getOperand(0).getDefiningOp<tensor::ExtractOp>();
  if (!ex || ex->getBlock() != gen.getBody() ||
      ex.getTensor().getParentBlock() == gen.getBody() ||
      ex.getIndices().size() != 4 ||
      isa_and_nonnull<linalg::IndexOp>(ex.getIndices()[0].getDefiningOp()))
    return Found::None; // not a gather through data
  at = ex;
  if (gen.getNumParallelLoops() != 5) {
    why = "the gather has reduction loops";
    return Found::Refused;
  }
  if (gb < 0 || gh < 0 || gd < 0 || lgroup.size() != 2) {
    why = "the gathered pages are not reshaped into [batch, pages · "
          "page_size, heads, D]";
    return Found::Refused;
  }
  int64_t gp = lgroup[0], gs = lgroup[1];
  if (!isLinalgIndex(ex.getIndices()[1], gs) ||
      !isLinalgIndex(ex.getIndices()[2], gh) ||
      !isLinalgIndex(ex.getIndices()[3], gd)) {
    why = "the pool is not read as [pages, page_size, heads, D] at (page, "
          "row in page, head, column)";
    return Found::Refused;
  }
  auto pool = cast<RankedTensorType>(ex.getTensor().getType());
  const int64_t poolDims[] = {1, 2, 3}, gatherDims[] = {gs, gh, gd};
  for (auto [pd, gdim] : llvm::zip_equal(poolDims, gatherDims))
    if (pool.isDynamicDim(pd) || gType.isDynamicDim(gdim) ||
        pool.getDimSize(pd) != gType.getDimSize(gdim)) {
      why = "the gather does not read whole pages of a static pool shape";
      return Found::Refused;
    }
  r.cache = ex.getTensor();
  r.gather = gen;
  if (failed(matchPageChain(gen, ex.getIndices()[0], gb, gp, r, why)))
    return Found::Refused;
  return Found::Paged;
}

/// Whether K's and V's gathers compute the same page from the same table.
static bool samePages(const PagedRead &a, const PagedRead &b) {
  if (a.table != b.table || a.chain.size() != b.chain.size())
    return false;
  if (!a.entry)
    return !b.entry;
  IRMapping map;
  map.map(a.entry, b.entry);
  for (auto [x, y] : llvm::zip_equal(a.chain, b.chain)) {
    if (x->getName() != y->getName() ||
        x->getAttrDictionary() != y->getAttrDictionary() ||
        x->getNumOperands() != y->getNumOperands())
      return false;
    for (auto [u, w] : llvm::zip_equal(x->getOperands(), y->getOperands())) {
      Attribute cu, cw;
      if (map.lookupOrNull(u) == w)
        continue;
      if (!(matchPattern(u, m_Constant(&cu)) &&
            matchPattern(w, m_Constant(&cw)) && cu == cw) &&
          u != w)
        return false;
    }
    map.map(x->getResult(0), y->getResult(0));
  }
  return true;
}

/// The length mask of a score_mod: the capture holding the lengths (rank 1
/// read at the batch index, or rank 0), and the score it keeps for the keys
/// that exist (the region's value; the score argument when the mask is all
/// the region does).
struct LengthMask {
  Value lens, kept;
};

/// `attn`'s length mask; null values when there is no score_mod.
static FailureOr<LengthMask> matchLengthMask(AttentionOp attn, std::string &why,
                                             Operation *&at) {
  if (attn.getScoreMod().empty())
    return LengthMask();
  Block &blk = attn.getScoreMod().front();
  unsigned nb = attn.getNumBatchDims();
  Value b = blk.getArgument(1), j = blk.getArgument(nb + 2);
  Value r = blk.getTerminator()->getOperand(0);
  at = r.getDefiningOp() ? r.getDefiningOp() : attn.getOperation();
  why = "the score_mod's result is not a select that hides the keys past "
        "each sequence's length";
  auto sel = r.getDefiningOp<arith::SelectOp>();
  if (!sel)
    return failure();
  bool negate;
  if (isFillConstant(sel.getFalseValue()))
    negate = false;
  else if (isFillConstant(sel.getTrueValue()))
    negate = true;
  else
    return failure();
  Value kept = negate ? sel.getFalseValue() : sel.getTrueValue();
  Value c = sel.getCondition();
  while (auto x = c.getDefiningOp<arith::XOrIOp>()) {
    if (matchPattern(x.getRhs(), m_One()))
      c = x.getLhs();
    else if (matchPattern(x.getLhs(), m_One()))
      c = x.getRhs();
    else
      break;
    negate = !negate;
  }
  auto cmp = c.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return failure();
  arith::CmpIPredicate p = cmp.getPredicate();
  if (negate)
    p = arith::invertPredicate(p);
  Value lhs = stripIntCasts(cmp.getLhs()), rhs = stripIntCasts(cmp.getRhs());
  Value n;
  if (p == arith::CmpIPredicate::slt && lhs == j)
    n = rhs;
  else if (p == arith::CmpIPredicate::sgt && rhs == j)
    n = lhs;
  else
    return failure();
  auto ex = n.getDefiningOp<tensor::ExtractOp>();
  auto cap = ex ? dyn_cast<BlockArgument>(ex.getTensor()) : BlockArgument();
  if (!cap || cap.getOwner() != &blk || cap.getArgNumber() < nb + 3)
    return failure();
  auto capType = cast<RankedTensorType>(cap.getType());
  bool perSequence = capType.getRank() == 1 && ex.getIndices().size() == 1 &&
                     ex.getIndices()[0] == b;
  if (!perSequence && capType.getRank() != 0)
    return failure();
  if (!capType.getElementType().isSignlessInteger() &&
      !capType.getElementType().isIndex())
    return failure();
  return LengthMask{attn.getCaptures()[cap.getArgNumber() - (nb + 3)], kept};
}

/// Gives `paged` the part of `attn`'s score_mod that computes `kept` (the
/// ops it depends on, in order) and the captures they read.
static void moveKeptScore(RewriterBase &rw, AttentionOp attn, Value kept,
                          PagedAttentionOp &paged) {
  Block &blk = attn.getScoreMod().front();
  unsigned nb = attn.getNumBatchDims();
  // The ops `kept` depends on, walking the block backwards.
  llvm::DenseSet<Value> needed = {kept};
  llvm::SmallPtrSet<Operation *, 16> slice;
  for (Operation &op : llvm::reverse(blk.without_terminator())) {
    if (llvm::none_of(op.getResults(),
                      [&](Value r) { return needed.contains(r); }))
      continue;
    slice.insert(&op);
    op.walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        needed.insert(operand);
    });
  }
  SmallVector<Value> captures;
  SmallVector<Type> argTypes;
  SmallVector<unsigned> captureArgs;
  for (BlockArgument arg : blk.getArguments()) {
    if (arg.getArgNumber() >= nb + 3) {
      if (!needed.contains(arg))
        continue;
      captures.push_back(attn.getCaptures()[arg.getArgNumber() - (nb + 3)]);
      captureArgs.push_back(arg.getArgNumber());
    }
    argTypes.push_back(arg.getType());
  }
  // The op with those captures; its region takes the score, the indices
  // and them.
  rw.setInsertionPoint(paged);
  auto withMod = PagedAttentionOp::create(
      rw, paged.getLoc(), paged.getResultTypes(), paged.getQuery(),
      paged.getKeyCache(), paged.getValueCache(), paged.getBlockTable(),
      paged.getSeqLens(), paged.getInits(), captures, paged.getSinks(),
      paged.getScaleAttr(), paged.getMaskAttr());
  rw.eraseOp(paged);
  paged = withMod;
  Region &region = paged.getScoreMod();
  Block *body =
      rw.createBlock(&region, region.end(), argTypes,
                     SmallVector<Location>(argTypes.size(), attn.getLoc()));
  IRMapping map;
  for (unsigned a = 0; a < nb + 3; ++a)
    map.map(blk.getArgument(a), body->getArgument(a));
  for (auto [k, a] : llvm::enumerate(captureArgs))
    map.map(blk.getArgument(a), body->getArgument(nb + 3 + k));
  rw.setInsertionPointToStart(body);
  for (Operation &op : blk.without_terminator())
    if (slice.contains(&op))
      rw.clone(op, map);
  YieldOp::create(rw, attn.getLoc(), map.lookupOrDefault(kept));
}

/// `v` (an integer or index scalar) as i32.
static Value toI32(OpBuilder &b, Location loc, Value v) {
  Type i32 = b.getI32Type();
  if (v.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, i32, v);
  unsigned w = v.getType().getIntOrFloatBitWidth();
  if (w > 32)
    return arith::TruncIOp::create(b, loc, i32, v);
  if (w < 32)
    return arith::ExtSIOp::create(b, loc, i32, v);
  return v;
}

/// An i32 tensor of `shape` whose element is `fn(input at map(indices))`.
static Value mapToI32(OpBuilder &b, Location loc, Value input, AffineMap map,
                      ArrayRef<OpFoldResult> shape,
                      function_ref<Value(OpBuilder &, Location, Value)> fn) {
  Value empty = tensor::EmptyOp::create(b, loc, shape, b.getI32Type());
  auto id = AffineMap::getMultiDimIdentityMap(shape.size(), b.getContext());
  SmallVector<utils::IteratorType> par(shape.size(),
                                       utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, empty.getType(), ValueRange{input}, ValueRange{empty},
             ArrayRef<AffineMap>{map, id}, par,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               linalg::YieldOp::create(nb, l, toI32(nb, l, fn(nb, l, args[0])));
             })
      .getResult(0);
}

/// The paged op's i32 block table: the page function applied to each entry.
static Value buildTable(OpBuilder &b, Location loc, const PagedRead &r) {
  Value table = r.table;
  if (!r.entry) // tensor.gather's [B, P, 1] indices
    table = tensor::CollapseShapeOp::create(
        b, loc, table, SmallVector<ReassociationIndices>{{0}, {1, 2}});
  SmallVector<OpFoldResult> shape = tensor::getMixedSizes(b, loc, table);
  auto id = AffineMap::getMultiDimIdentityMap(2, b.getContext());
  return mapToI32(b, loc, table, id, shape,
                  [&](OpBuilder &nb, Location l, Value e) -> Value {
                    if (!r.entry)
                      return e;
                    IRMapping map;
                    map.map(r.entry, e);
                    for (Operation *op : r.chain)
                      nb.clone(*op, map);
                    return map.lookup(r.page);
                  });
}

/// i32 lengths clamped into [0, capacity]: the capture `lens` ([B] or one
/// scalar for the batch), or the capacity for every sequence.
static Value buildLengths(OpBuilder &b, Location loc, Value lens,
                          OpFoldResult batch, int64_t capacity) {
  SmallVector<OpFoldResult> shape{batch};
  if (!lens) {
    Value empty = tensor::EmptyOp::create(b, loc, shape, b.getI32Type());
    Value c = arith::ConstantIntOp::create(b, loc, capacity, 32);
    return linalg::FillOp::create(b, loc, c, empty).getResult(0);
  }
  auto type = cast<RankedTensorType>(lens.getType());
  AffineMap map = type.getRank() == 1
                      ? AffineMap::getMultiDimIdentityMap(1, b.getContext())
                      : AffineMap::get(1, 0, {}, b.getContext());
  return mapToI32(b, loc, lens, map, shape,
                  [&](OpBuilder &nb, Location l, Value n) -> Value {
                    Type t = n.getType();
                    auto cst = [&](int64_t x) -> Value {
                      return t.isIndex()
                                 ? Value(arith::ConstantIndexOp::create(nb, l, x))
                                 : Value(arith::ConstantIntOp::create(nb, l, t, x));
                    };
                    Value lo = arith::MaxSIOp::create(nb, l, n, cst(0));
                    return arith::MinSIOp::create(nb, l, lo, cst(capacity));
                  });
}

/// Folds one attention; nullopt when neither K nor V is a gather.
static std::optional<std::pair<Operation *, std::string>>
foldOne(RewriterBase &rw, AttentionOp attn,
        SmallVectorImpl<Operation *> &dead) {
  PagedRead k, v;
  std::string why;
  Operation *at = nullptr;
  Found fk = matchPagedRead(attn.getKey(), k, why, at);
  if (fk == Found::Refused)
    return std::make_pair(at, why);
  Found fv = matchPagedRead(attn.getValue(), v, why, at);
  if (fv == Found::Refused)
    return std::make_pair(at, why);
  if (fk == Found::None && fv == Found::None)
    return std::nullopt;
  if (fk != fv || !samePages(k, v))
    return std::make_pair((fk == Found::Paged ? k : v).gather,
                          std::string("K and V are not gathered through the "
                                      "same block table by the same pages"));
  if (attn.getNumBatchDims() != 2 || !attn.getOffsets().empty() ||
      attn.getQueryLen())
    return std::make_pair(attn.getOperation(),
                          std::string("the attention is not over [batch, "
                                      "heads, rows, D]"));
  if (attn.getMask())
    return std::make_pair(
        attn.getOperation(),
        std::string("the mask sits at the gathered length (pages · "
                    "page_size), not at each sequence's length"));
  FailureOr<LengthMask> lengthMask = matchLengthMask(attn, why, at);
  if (failed(lengthMask))
    return std::make_pair(at, why);
  Value lens = lengthMask->lens;
  int64_t capacity = cast<RankedTensorType>(attn.getKey().getType()).getDimSize(2);
  if (ShapedType::isDynamic(capacity))
    return std::make_pair(attn.getOperation(),
                          std::string("the gathered length is dynamic"));

  Location loc = attn.getLoc();
  rw.setInsertionPoint(attn);
  Value table = buildTable(rw, loc, k);
  Value seqLens =
      buildLengths(rw, loc, lens,
                   tensor::getMixedSize(rw, loc, attn.getQuery(), 0), capacity);
  auto paged = PagedAttentionOp::create(
      rw, loc, attn.getResultTypes(), attn.getQuery(), k.cache, v.cache, table,
      seqLens, attn.getInits(), /*captures=*/ValueRange(), attn.getSinks(),
      attn.getScaleAttr(), MaskAttr());
  Value kept = lengthMask->kept;
  if (kept && kept != attn.getScoreMod().front().getArgument(0))
    moveKeptScore(rw, attn, kept, paged);
  bool valid;
  {
    // A refusal is a remark, not the verifier's error.
    ScopedDiagnosticHandler quiet(rw.getContext(),
                                  [](Diagnostic &) { return success(); });
    valid = succeeded(mlir::verify(paged));
  }
  if (!valid) {
    rw.eraseOp(paged);
    return std::make_pair(attn.getOperation(),
                          std::string("the pools and the query do not make a "
                                      "valid flash.paged_attention"));
  }
  rw.replaceOp(attn, paged->getResults());
  for (PagedRead *r : {&k, &v})
    if (!llvm::is_contained(dead, r->gather))
      dead.push_back(r->gather);
  return std::make_pair(nullptr, std::string());
}

/// Erases `op` when nothing but dead ops reads it (those first), and the
/// tensor.empty inits it leaves unused.
static bool eraseDeadTree(RewriterBase &rw, Operation *op) {
  // One user at a time: erasing one may erase another that reads it.
  while (!op->use_empty())
    if (!eraseDeadTree(rw, *op->user_begin()))
      return false;
  if (!wouldOpBeTriviallyDead(op))
    return false;
  SmallVector<Operation *> inits;
  for (Value in : op->getOperands())
    if (auto e = in.getDefiningOp<tensor::EmptyOp>())
      inits.push_back(e);
  rw.eraseOp(op);
  for (Operation *e : inits)
    if (e->use_empty())
      rw.eraseOp(e);
  return true;
}

void raise::foldPagedGathers(RewriterBase &rw, FunctionOpInterface func,
                             bool remarks) {
  SmallVector<AttentionOp> ops;
  func->walk([&](AttentionOp op) { ops.push_back(op); });
  SmallVector<Operation *> dead;
  for (AttentionOp attn : ops) {
    auto refused = foldOne(rw, attn, dead);
    if (remarks && refused && refused->first)
      refused->first->emitRemark()
          << "paged KV cache not folded into flash.paged_attention: "
          << refused->second;
  }
  // The gathered copies and the views of them, once nobody reads them.
  for (Operation *op : dead)
    eraseDeadTree(rw, op);
}
