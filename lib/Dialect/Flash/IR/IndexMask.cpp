//===- IndexMask.cpp - per-tile classification of an index-only mask -------===//
//
// Interval arithmetic over a score_mod's mask predicate. Every integer value
// of the predicate's slice becomes an inclusive interval [lo, hi] of values
// of its own type, every i1 a pair (lo, hi) read as "certainly true" and
// "possibly true" — an interval over {0, 1} with and/or as min/max. Each
// rule is sound (the true value always lies in the interval), never
// necessarily tight: a tile classified partial is masked per element as
// before, so imprecision costs speed, never correctness. Rules exist only
// where soundness is simple to see; an op without one keeps the region
// from being an index mask at all (findIndexMask), so no tile is skipped.
//
//===----------------------------------------------------------------------===//
#include "flash/Dialect/Flash/IR/IndexMask.h"
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::flash;

namespace {
struct Interval {
  Value lo, hi;
};
} // namespace

static bool isNegInf(Value v) {
  FloatAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.getValue().isInfinity() &&
         attr.getValue().isNegative();
}

static bool isZero(Value v) {
  FloatAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.getValue().isZero();
}

/// A positive integer constant (divisors and moduli must be one).
static std::optional<int64_t> positiveConstant(Value v) {
  APInt value;
  if (!matchPattern(v, m_ConstantInt(&value)) || !value.isStrictlyPositive())
    return std::nullopt;
  return value.getSExtValue();
}

/// Whether interval arithmetic has a rule for `op` (given its operands'
/// intervals). Arithmetic is on integers and indices wider than i1 (where
/// signed order is the number line), logic on i1 (where false < true).
static bool hasIntervalRule(Operation *op) {
  if (isa<arith::ConstantOp, arith::SelectOp>(op))
    return true;
  // Zero-extending i1 keeps false < true; a wider negative would wrap.
  if (isa<arith::ExtUIOp>(op))
    return op->getOperand(0).getType().isInteger(1);
  if (isa<arith::ExtSIOp, arith::IndexCastOp>(op) &&
      op->getOperand(0).getType().isInteger(1))
    return false;
  bool isBool = op->getNumResults() == 1 &&
                op->getResult(0).getType().isInteger(1);
  if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op))
    return isBool;
  if (auto cmp = dyn_cast<arith::CmpIOp>(op))
    return !cmp.getLhs().getType().isInteger(1);
  if (isBool)
    return false;
  if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::MinSIOp,
          arith::MaxSIOp, arith::IndexCastOp, arith::ExtSIOp, math::AbsIOp>(
          op))
    return true;
  if (isa<arith::DivSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp,
          arith::RemSIOp, arith::RemUIOp>(op))
    return positiveConstant(op->getOperand(1)).has_value();
  return false;
}

/// Whether `pred` depends only on the index arguments of `body` (arguments
/// 1 ..= numIndices) and constants, through ops with an interval rule.
static bool isIndexOnly(Value pred, Block &body, unsigned numIndices) {
  SmallVector<Value> work{pred};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &body || arg.getArgNumber() == 0 ||
          arg.getArgNumber() > numIndices)
        return false;
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (def->getBlock() != &body || !hasIntervalRule(def))
      return false;
    // Selects between floats are not predicates' business.
    for (Value operand : def->getOperands()) {
      if (!operand.getType().isIntOrIndex())
        return false;
      work.push_back(operand);
    }
  }
  return true;
}

std::optional<IndexMask> mlir::flash::findIndexMask(Region &scoreMod,
                                                    unsigned numIndices) {
  if (scoreMod.empty())
    return std::nullopt;
  Block &body = scoreMod.front();
  IndexMask mask;
  mask.numIndices = numIndices;
  Value v = body.getTerminator()->getOperand(0);
  // Peels the mask's conjuncts off the yielded value, outermost first.
  while (true) {
    IndexMask::Term term;
    Value rest;
    if (auto sel = v.getDefiningOp<arith::SelectOp>()) {
      if (isNegInf(sel.getFalseValue()))
        term = {sel.getCondition(), false}, rest = sel.getTrueValue();
      else if (isNegInf(sel.getTrueValue()))
        term = {sel.getCondition(), true}, rest = sel.getFalseValue();
    } else if (auto add = v.getDefiningOp<arith::AddFOp>()) {
      for (unsigned k = 0; k < 2 && !rest; ++k) {
        auto sel = add->getOperand(k).getDefiningOp<arith::SelectOp>();
        if (!sel)
          continue;
        if (isZero(sel.getTrueValue()) && isNegInf(sel.getFalseValue()))
          term = {sel.getCondition(), false}, rest = add->getOperand(1 - k);
        else if (isNegInf(sel.getTrueValue()) && isZero(sel.getFalseValue()))
          term = {sel.getCondition(), true}, rest = add->getOperand(1 - k);
      }
    }
    if (!rest || !isIndexOnly(term.predicate, body, numIndices))
      break;
    mask.terms.push_back(term);
    v = rest;
  }
  if (mask.terms.empty())
    return std::nullopt;
  mask.live = v;
  return mask;
}

std::optional<std::pair<IndexMask, IndexMask>>
mlir::flash::splitDisjunction(const IndexMask &mask) {
  for (auto [k, term] : llvm::enumerate(mask.terms)) {
    // A term allows the score where its predicate is true (false when
    // negated): an `or`, or a negated `and` (¬(a ∧ b) = ¬a ∨ ¬b), allows it
    // where either side does. The sides read indices alone, as the whole.
    // `x ^ true` (Python's `~`) is a negation.
    Value pred = term.predicate;
    bool negated = term.negated;
    while (auto x = pred.getDefiningOp<arith::XOrIOp>()) {
      if (!matchPattern(x.getRhs(), m_One()))
        break;
      pred = x.getLhs();
      negated = !negated;
    }
    Operation *def = pred.getDefiningOp();
    if (!(negated ? isa_and_nonnull<arith::AndIOp>(def)
                  : isa_and_nonnull<arith::OrIOp>(def)))
      continue;
    std::pair<IndexMask, IndexMask> sides{mask, mask};
    sides.first.terms[k] = {def->getOperand(0), negated};
    sides.second.terms[k] = {def->getOperand(1), negated};
    return sides;
  }
  return std::nullopt;
}

namespace {
/// Emits the interval of each value of a predicate's slice.
class IntervalEmitter {
public:
  IntervalEmitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  void bind(Value v, Interval range) { ranges[v] = range; }
  Interval get(Value v);

private:
  OpBuilder &b;
  Location loc;
  DenseMap<Value, Interval> ranges;

  Value cst(Type t, int64_t v) {
    if (t.isIndex())
      return arith::ConstantIndexOp::create(b, loc, v);
    return arith::ConstantIntOp::create(b, loc, t, v);
  }
  bool isBool(Value v) { return v.getType().isInteger(1); }
  // On i1, (lo, hi) order false < true: min is `and`, max is `or`.
  Value min(Value x, Value y) {
    if (isBool(x))
      return arith::AndIOp::create(b, loc, x, y);
    return arith::MinSIOp::create(b, loc, x, y);
  }
  Value max(Value x, Value y) {
    if (isBool(x))
      return arith::OrIOp::create(b, loc, x, y);
    return arith::MaxSIOp::create(b, loc, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value notI1(Value x) {
    return arith::XOrIOp::create(b, loc, x, cst(x.getType(), 1));
  }
  Value andI1(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value orI1(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }

  Interval compute(Operation *op);
  Interval compare(arith::CmpIPredicate p, Interval x, Interval y);
};
} // namespace

Interval IntervalEmitter::get(Value v) {
  auto it = ranges.find(v);
  if (it != ranges.end())
    return it->second;
  // findIndexMask admitted only slices of bound arguments and ops with a
  // rule, so every value here has a defining op.
  Interval range = compute(v.getDefiningOp());
  ranges[v] = range;
  return range;
}

Interval IntervalEmitter::compare(arith::CmpIPredicate p, Interval x,
                                  Interval y) {
  using P = arith::CmpIPredicate;
  switch (p) {
  case P::slt: // certainly x < y when x.hi < y.lo; possibly when x.lo < y.hi
    return {cmp(P::slt, x.hi, y.lo), cmp(P::slt, x.lo, y.hi)};
  case P::sle:
    return {cmp(P::sle, x.hi, y.lo), cmp(P::sle, x.lo, y.hi)};
  case P::sgt:
    return compare(P::slt, y, x);
  case P::sge:
    return compare(P::sle, y, x);
  case P::eq: {
    Value xExact = cmp(P::eq, x.lo, x.hi), yExact = cmp(P::eq, y.lo, y.hi);
    Value certain =
        andI1(andI1(xExact, yExact), cmp(P::eq, x.lo, y.lo));
    Value overlap = andI1(cmp(P::sle, x.lo, y.hi), cmp(P::sle, y.lo, x.hi));
    return {certain, overlap};
  }
  case P::ne: {
    Interval eq = compare(P::eq, x, y);
    return {notI1(eq.hi), notI1(eq.lo)};
  }
  default: {
    // Unsigned compares agree with the signed ones where both sides are
    // non-negative (indices are); elsewhere the answer is "unknown".
    P s = p == P::ult   ? P::slt
          : p == P::ule ? P::sle
          : p == P::ugt ? P::sgt
                        : P::sge;
    Interval r = compare(s, x, y);
    Value zero = cst(x.lo.getType(), 0);
    Value nonneg = andI1(cmp(P::sge, x.lo, zero), cmp(P::sge, y.lo, zero));
    return {andI1(nonneg, r.lo), orI1(notI1(nonneg), r.hi)};
  }
  }
}

Interval IntervalEmitter::compute(Operation *op) {
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    Value v = b.clone(*op)->getResult(0);
    return {v, v};
  }
  if (auto add = dyn_cast<arith::AddIOp>(op)) {
    Interval x = get(add.getLhs()), y = get(add.getRhs());
    return {arith::AddIOp::create(b, loc, x.lo, y.lo),
            arith::AddIOp::create(b, loc, x.hi, y.hi)};
  }
  if (auto sub = dyn_cast<arith::SubIOp>(op)) {
    Interval x = get(sub.getLhs()), y = get(sub.getRhs());
    return {arith::SubIOp::create(b, loc, x.lo, y.hi),
            arith::SubIOp::create(b, loc, x.hi, y.lo)};
  }
  if (auto mul = dyn_cast<arith::MulIOp>(op)) {
    Interval x = get(mul.getLhs()), y = get(mul.getRhs());
    Value p[4] = {arith::MulIOp::create(b, loc, x.lo, y.lo),
                  arith::MulIOp::create(b, loc, x.lo, y.hi),
                  arith::MulIOp::create(b, loc, x.hi, y.lo),
                  arith::MulIOp::create(b, loc, x.hi, y.hi)};
    return {min(min(p[0], p[1]), min(p[2], p[3])),
            max(max(p[0], p[1]), max(p[2], p[3]))};
  }
  if (isa<arith::MinSIOp, arith::MaxSIOp>(op)) {
    Interval x = get(op->getOperand(0)), y = get(op->getOperand(1));
    bool isMin = isa<arith::MinSIOp>(op);
    return isMin ? Interval{min(x.lo, y.lo), min(x.hi, y.hi)}
                 : Interval{max(x.lo, y.lo), max(x.hi, y.hi)};
  }
  if (auto abs = dyn_cast<math::AbsIOp>(op)) {
    // |x| over [lo, hi]: 0 when the range holds 0, else the nearer end.
    Interval x = get(abs.getOperand());
    Value zero = cst(x.lo.getType(), 0);
    Value negLo = arith::SubIOp::create(b, loc, zero, x.lo);
    Value negHi = arith::SubIOp::create(b, loc, zero, x.hi);
    using P = arith::CmpIPredicate;
    Value lo = select(cmp(P::sge, x.lo, zero), x.lo,
                      select(cmp(P::sle, x.hi, zero), negHi, zero));
    return {lo, max(negLo, x.hi)};
  }
  if (isa<arith::DivSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp>(op)) {
    // Monotone non-decreasing in the dividend for a positive divisor.
    Interval x = get(op->getOperand(0));
    Value d = op->getOperand(1);
    IRMapping lo, hi;
    lo.map(op->getOperand(0), x.lo);
    hi.map(op->getOperand(0), x.hi);
    Value divisor = b.clone(*d.getDefiningOp())->getResult(0);
    lo.map(d, divisor);
    hi.map(d, divisor);
    return {b.clone(*op, lo)->getResult(0), b.clone(*op, hi)->getResult(0)};
  }
  if (isa<arith::RemSIOp, arith::RemUIOp>(op)) {
    // Exact ends when [lo, hi] lies in one period of a non-negative range;
    // else every residue: [0, c - 1] unsigned or for a non-negative
    // dividend, [-(c - 1), c - 1] for a signed one.
    using P = arith::CmpIPredicate;
    Interval x = get(op->getOperand(0));
    int64_t c = *positiveConstant(op->getOperand(1));
    Type t = x.lo.getType();
    Value cc = cst(t, c), zero = cst(t, 0);
    Value nonneg = cmp(P::sge, x.lo, zero);
    Value samePeriod =
        cmp(P::eq, arith::DivSIOp::create(b, loc, x.lo, cc),
            arith::DivSIOp::create(b, loc, x.hi, cc));
    Value exact = andI1(nonneg, samePeriod);
    Value remLo = arith::RemSIOp::create(b, loc, x.lo, cc);
    Value remHi = arith::RemSIOp::create(b, loc, x.hi, cc);
    Value wideLo = isa<arith::RemUIOp>(op)
                       ? zero
                       : select(nonneg, zero, cst(t, -(c - 1)));
    return {select(exact, remLo, wideLo), select(exact, remHi, cst(t, c - 1))};
  }
  if (isa<arith::IndexCastOp, arith::ExtSIOp, arith::ExtUIOp>(op)) {
    // The ends cast as the value is: indices are far from any width's
    // limit, and an extension of i1 keeps false < true.
    Interval x = get(op->getOperand(0));
    IRMapping lo, hi;
    lo.map(op->getOperand(0), x.lo);
    hi.map(op->getOperand(0), x.hi);
    return {b.clone(*op, lo)->getResult(0), b.clone(*op, hi)->getResult(0)};
  }
  if (auto c = dyn_cast<arith::CmpIOp>(op))
    return compare(c.getPredicate(), get(c.getLhs()), get(c.getRhs()));
  if (isa<arith::AndIOp, arith::OrIOp>(op) && isBool(op->getResult(0))) {
    Interval x = get(op->getOperand(0)), y = get(op->getOperand(1));
    return isa<arith::AndIOp>(op) ? Interval{andI1(x.lo, y.lo), andI1(x.hi, y.hi)}
                                  : Interval{orI1(x.lo, y.lo), orI1(x.hi, y.hi)};
  }
  if (isa<arith::XOrIOp>(op) && isBool(op->getResult(0))) {
    Interval x = get(op->getOperand(0)), y = get(op->getOperand(1));
    using P = arith::CmpIPredicate;
    Value exact = andI1(cmp(P::eq, x.lo, x.hi), cmp(P::eq, y.lo, y.hi));
    Value value = arith::XOrIOp::create(b, loc, x.lo, y.lo);
    return {andI1(exact, value), orI1(notI1(exact), value)};
  }
  if (auto sel = dyn_cast<arith::SelectOp>(op)) {
    Interval c = get(sel.getCondition());
    Interval x = get(sel.getTrueValue()), y = get(sel.getFalseValue());
    // Certainly true: x's range; certainly false: y's; else their hull.
    Value lo = select(c.lo, x.lo, select(c.hi, min(x.lo, y.lo), y.lo));
    Value hi = select(c.lo, x.hi, select(c.hi, max(x.hi, y.hi), y.hi));
    return {lo, hi};
  }
  llvm_unreachable("findIndexMask admits only ops with an interval rule");
}

TileClass mlir::flash::emitTileClass(OpBuilder &b, Location loc,
                                     Region &scoreMod, const IndexMask &mask,
                                     ValueRange batchLo, ValueRange batchHi,
                                     Value iLo, Value iHi, Value jLo,
                                     Value jHi) {
  Block &body = scoreMod.front();
  IntervalEmitter emitter(b, loc);
  unsigned nb = mask.numIndices - 2;
  for (unsigned d = 0; d < nb; ++d)
    emitter.bind(body.getArgument(1 + d), {batchLo[d], batchHi[d]});
  emitter.bind(body.getArgument(1 + nb), {iLo, iHi});
  emitter.bind(body.getArgument(2 + nb), {jLo, jHi});
  Value empty, full;
  for (const IndexMask::Term &term : mask.terms) {
    Interval p = emitter.get(term.predicate);
    // The term allows the score where the predicate is true (false when
    // negated): certainly everywhere / possibly somewhere.
    Value all = p.lo, any = p.hi;
    if (term.negated) {
      Value one = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
      all = arith::XOrIOp::create(b, loc, p.hi, one);
      any = arith::XOrIOp::create(b, loc, p.lo, one);
    }
    Value none = arith::XOrIOp::create(
        b, loc, any, arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1));
    empty = empty ? arith::OrIOp::create(b, loc, empty, none).getResult() : none;
    full = full ? arith::AndIOp::create(b, loc, full, all).getResult() : all;
  }
  return {empty, full};
}

std::optional<double>
mlir::flash::meanWalkedTiles(Region &scoreMod, const IndexMask &mask,
                             int64_t lq, int64_t lk, int64_t blockRows,
                             int64_t tileCols, int64_t batchBound) {
  // Tiles classified at most (some 80 ms of folding at 16k x 16k keys).
  constexpr int64_t kMaxTiles = 1 << 14;
  if (lq <= 0 || lk <= 0 || blockRows <= 0 || tileCols <= 0)
    return std::nullopt;
  // The classification once, of bounds that are the arguments of a scratch
  // block (batch lo, batch hi per dim, then i lo, i hi, j lo, j hi); each
  // tile folds it on constants. The region may be detached (a kernel
  // spec's), so the context comes from its score argument.
  Value score = scoreMod.front().getArgument(0);
  MLIRContext *ctx = score.getContext();
  Location loc = score.getLoc();
  Type idx = IndexType::get(ctx);
  unsigned nb = mask.numIndices - 2;
  Block scratch;
  for (unsigned a = 0; a < 2 * nb + 4; ++a)
    scratch.addArgument(idx, loc);
  ValueRange args = scratch.getArguments();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(&scratch);
  TileClass cls = emitTileClass(
      b, loc, scoreMod, mask, args.take_front(nb), args.slice(nb, nb),
      args[2 * nb], args[2 * nb + 1], args[2 * nb + 2], args[2 * nb + 3]);
  SmallVector<Attribute> bounds(2 * nb + 4);
  for (unsigned d = 0; d < nb; ++d) {
    bounds[d] = IntegerAttr::get(idx, 0);
    bounds[nb + d] = IntegerAttr::get(idx, batchBound);
  }
  auto isEmpty = [&](int64_t i0, int64_t i1, int64_t j0,
                     int64_t j1) -> std::optional<bool> {
    DenseMap<Value, Attribute> known;
    int64_t ends[4] = {i0, i1, j0, j1};
    for (unsigned a = 0; a < 2 * nb + 4; ++a)
      known[args[a]] =
          a < 2 * nb ? bounds[a] : IntegerAttr::get(idx, ends[a - 2 * nb]);
    SmallVector<Attribute> in;
    SmallVector<OpFoldResult> out;
    for (Operation &op : scratch) {
      in.clear();
      out.clear();
      for (Value v : op.getOperands())
        in.push_back(known.lookup(v));
      if (auto c = dyn_cast<arith::ConstantOp>(op)) {
        known[c.getResult()] = c.getValue();
        continue;
      }
      if (failed(op.fold(in, out)) || out.size() != op.getNumResults())
        return std::nullopt;
      for (auto [result, folded] : llvm::zip(op.getResults(), out)) {
        Attribute value = isa<Attribute>(folded)
                              ? cast<Attribute>(folded)
                              : known.lookup(cast<Value>(folded));
        if (!value)
          return std::nullopt;
        known[result] = value;
      }
    }
    auto empty = dyn_cast_or_null<IntegerAttr>(known.lookup(cls.empty));
    if (!empty)
      return std::nullopt;
    return !empty.getValue().isZero();
  };
  int64_t tiles = llvm::divideCeil(lk, tileCols);
  int64_t blocks = llvm::divideCeil(lq, blockRows);
  int64_t stride = std::max<int64_t>(1, blocks * tiles / kMaxTiles);
  int64_t walked = 0, sampled = 0;
  for (int64_t block = 0; block < blocks; block += stride, ++sampled) {
    int64_t q0 = block * blockRows, q1 = std::min(q0 + blockRows, lq) - 1;
    int64_t first = -1, last = -1;
    for (int64_t t = 0; t < tiles; ++t) {
      std::optional<bool> empty =
          isEmpty(q0, q1, t * tileCols, std::min((t + 1) * tileCols, lk) - 1);
      if (!empty)
        return std::nullopt;
      if (*empty)
        continue;
      if (first < 0)
        first = t;
      last = t;
    }
    if (first >= 0)
      walked += last - first + 1;
  }
  return double(walked) / double(sampled);
}

Value mlir::flash::buildScoreModLive(OpBuilder &b, Region &scoreMod,
                                     const IndexMask &mask, Value s,
                                     ValueRange batch, Value i, Value j,
                                     ValueRange captures) {
  Block &body = scoreMod.front();
  if (mask.live == body.getArgument(0))
    return s;
  // Only the ops `live` depends on: the mask's predicates would be dead.
  DenseSet<Operation *> needed;
  SmallVector<Value> work{mask.live};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != &body || !needed.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
  IRMapping mapping;
  cloneScoreMod(b, s.getLoc(), scoreMod, mapping, s, batch, i, j, captures,
                /*readCapture=*/nullptr,
                [&](Operation *op) { return needed.contains(op); });
  return mapping.lookup(mask.live);
}
