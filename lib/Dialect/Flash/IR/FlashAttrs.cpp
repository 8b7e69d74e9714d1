//===- FlashAttrs.cpp - the structured mask attribute ---------------------===//
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::flash;

#include "flash/Dialect/Flash/IR/FlashEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "flash/Dialect/Flash/IR/FlashAttrs.cpp.inc"

void FlashDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "flash/Dialect/Flash/IR/FlashAttrs.cpp.inc"
      >();
}

namespace mlir::flash {

/// Parses `kind [, window] [, alignment]`, the body shared by `#flash.mask<>`
/// and the `mask(...)` clause of flash.attention.
FailureOr<MaskAttr> parseMaskBody(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef kindName;
  if (parser.parseKeyword(&kindName))
    return failure();
  std::optional<MaskKind> kind = symbolizeMaskKind(kindName);
  if (!kind) {
    parser.emitError(loc) << "unknown mask kind '" << kindName
                          << "' (expected none, causal or sliding_window)";
    return failure();
  }
  int64_t window = 0;
  MaskAlignment alignment = MaskAlignment::TopLeft;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc itemLoc = parser.getCurrentLocation();
    int64_t number;
    OptionalParseResult intResult = parser.parseOptionalInteger(number);
    if (intResult.has_value()) {
      if (failed(*intResult))
        return failure();
      window = number;
      continue;
    }
    StringRef alignName;
    if (parser.parseKeyword(&alignName))
      return failure();
    std::optional<MaskAlignment> align = symbolizeMaskAlignment(alignName);
    if (!align) {
      parser.emitError(itemLoc)
          << "unknown mask alignment '" << alignName
          << "' (expected top_left or bottom_right)";
      return failure();
    }
    alignment = *align;
  }
  return MaskAttr::getChecked(
      [&] { return parser.emitError(loc); }, parser.getContext(), *kind,
      window, alignment);
}

void printMaskBody(AsmPrinter &printer, MaskAttr mask) {
  printer << stringifyMaskKind(mask.getKind());
  if (mask.getKind() == MaskKind::SlidingWindow)
    printer << ", " << mask.getWindow();
  if (mask.isBottomRight())
    printer << ", " << stringifyMaskAlignment(mask.getAlignment());
}

} // namespace mlir::flash

Attribute MaskAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  FailureOr<MaskAttr> mask = parseMaskBody(parser);
  if (failed(mask) || parser.parseGreater())
    return {};
  return *mask;
}

void MaskAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printMaskBody(printer, *this);
  printer << ">";
}

static constexpr int64_t kMaxWindow = int64_t(1) << 62;

LogicalResult MaskAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               MaskKind kind, int64_t window,
                               MaskAlignment alignment) {
  if (kind == MaskKind::SlidingWindow && window <= 0)
    return emitError() << "sliding_window mask needs a window of at least 1 "
                          "key, got "
                       << window;
  // No tensor dim reaches 2^62 (it would hold more than 2^63 bytes), and
  // below that bound every lowering's window edge, i + off - W + 1 and
  // j - off + W - 1, stays inside int64.
  if (kind == MaskKind::SlidingWindow && window >= kMaxWindow)
    return emitError() << "sliding_window mask window must be below 2^62 "
                          "keys, longer than any sequence, got "
                       << window << " (a window that covers every key is a "
                                    "causal mask)";
  if (kind != MaskKind::SlidingWindow && window != 0)
    return emitError() << "only a sliding_window mask takes a window, got "
                       << window << " on a " << stringifyMaskKind(kind)
                       << " mask";
  if (kind == MaskKind::None && alignment != MaskAlignment::TopLeft)
    return emitError() << "a none mask has no alignment";
  return success();
}

int64_t MaskAttr::visibleKeyCount(int64_t i, int64_t lq, int64_t lk) const {
  if (isNone())
    return lk;
  int64_t diag = i + diagonalOffset(lq, lk);
  int64_t hi = std::min(diag, lk - 1), lo = 0;
  if (std::optional<int64_t> behind = keysBehindDiagonal())
    lo = std::max(lo, diag - *behind);
  return std::max<int64_t>(hi - lo + 1, 0);
}

static Value constantLike(OpBuilder &b, Location loc, Value like, int64_t c) {
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(like.getType(), c));
}

Value mlir::flash::buildDiagonalOffset(OpBuilder &b, Location loc,
                                       MaskAttr mask, Value lq, Value lk) {
  if (!mask || !mask.isBottomRight())
    return Value();
  return arith::SubIOp::create(b, loc, lk, lq);
}

IndexInterval mlir::flash::buildVisibleKeys(OpBuilder &b, Location loc,
                                            MaskAttr mask, Value i, Value off) {
  IndexInterval keys;
  if (!mask || mask.isNone())
    return keys;
  keys.hi = off ? arith::AddIOp::create(b, loc, i, off).getResult() : i;
  if (std::optional<int64_t> behind = mask.keysBehindDiagonal())
    keys.lo = arith::AddIOp::create(b, loc, keys.hi,
                                    constantLike(b, loc, i, -*behind));
  return keys;
}

IndexInterval mlir::flash::buildVisibleQueries(OpBuilder &b, Location loc,
                                               MaskAttr mask, Value j,
                                               Value off) {
  IndexInterval rows;
  if (!mask || mask.isNone())
    return rows;
  rows.lo = off ? arith::SubIOp::create(b, loc, j, off).getResult() : j;
  if (std::optional<int64_t> behind = mask.keysBehindDiagonal())
    rows.hi = arith::AddIOp::create(b, loc, rows.lo,
                                    constantLike(b, loc, j, *behind));
  return rows;
}

Value mlir::flash::buildMaskPredicate(OpBuilder &b, Location loc,
                                      MaskAttr mask, Value i, Value j,
                                      Value lq, Value lk) {
  if (!mask || mask.isNone())
    return Value();
  IndexInterval keys = buildVisibleKeys(
      b, loc, mask, i, buildDiagonalOffset(b, loc, mask, lq, lk));
  Value allowed =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, j, keys.hi);
  if (keys.lo)
    allowed = arith::AndIOp::create(
        b, loc, allowed,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, j, keys.lo));
  return allowed;
}
