//===- FlashOps.cpp - flash.attention: parsing, verification, interfaces --===//
#include "flash/Dialect/Flash/IR/FlashOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/Error.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;

namespace mlir::flash {
FailureOr<MaskAttr> parseMaskBody(AsmParser &parser);
void printMaskBody(AsmPrinter &printer, MaskAttr mask);
} // namespace mlir::flash

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// The characters of the number token(s) that the parser consumed between
/// `begin` and `end` (the start of the next token): only what the lexer has
/// already read, so the buffer need not be NUL-terminated.
static StringRef spelledNumber(SMLoc begin, SMLoc end) {
  StringRef text(begin.getPointer(), end.getPointer() - begin.getPointer());
  return text.take_while([](char c) {
    return llvm::isAlnum(c) || c == '.' || c == '+' || c == '-';
  });
}

/// Rounds a decimal spelling once, to nearest f32.
static bool readF32(StringRef text, APFloat &value) {
  llvm::Expected<APFloat::opStatus> status =
      value.convertFromString(text, APFloat::rmNearestTiesToEven);
  if (status)
    return true;
  llvm::consumeError(status.takeError());
  return false;
}

/// `scale(0.125)`: the attribute is always f32, so its type is not spelled.
/// Accepted: an optional minus, then a float literal (0.125, 1.0e30), a
/// decimal integer with an optional exponent (2, 1e30, 1e-3, as C and Python
/// print them), or a hex bit pattern of the f32 (0x3E000000). The decimal is
/// rounded once, straight to f32: through double it would round twice.
static ParseResult parseScale(OpAsmParser &parser, FloatAttr &scale) {
  SMLoc loc = parser.getCurrentLocation();
  bool negative = succeeded(parser.parseOptionalMinus());
  SMLoc numberLoc = parser.getCurrentLocation();
  APFloat value(APFloat::IEEEsingle());
  APInt integer;
  OptionalParseResult isInteger = parser.parseOptionalInteger(integer);
  if (isInteger.has_value()) {
    if (failed(*isInteger))
      return failure();
    StringRef digits =
        spelledNumber(numberLoc, parser.getCurrentLocation());
    if (digits.starts_with_insensitive("0x")) {
      if (negative)
        return parser.emitError(numberLoc, "a hex f32 bit pattern for "
                                           "'scale' takes no minus sign");
      if (integer.getActiveBits() > 32)
        return parser.emitError(numberLoc, "hex 'scale' ")
               << digits << " is wider than an f32 bit pattern";
      value = APFloat(APFloat::IEEEsingle(), integer.zextOrTrunc(32));
    } else {
      if (digits.empty() || !llvm::isDigit(digits.front()))
        return parser.emitError(numberLoc, "expected a number for 'scale'");
      // MLIR's lexer splits `1e30` into the integer 1 and the identifier
      // `e30` (`1e-3` into 1, `e`, -3): put the exponent back together.
      std::string text = digits.str();
      StringRef exponent;
      auto adjacent = [&](const char *end) {
        return parser.getCurrentLocation().getPointer() == end;
      };
      if (adjacent(digits.end()) &&
          succeeded(parser.parseOptionalKeyword(&exponent))) {
        bool digitsFollow = exponent.size() > 1 &&
                            llvm::all_of(exponent.drop_front(), llvm::isDigit);
        if (!(exponent.starts_with("e") || exponent.starts_with("E")) ||
            (exponent.size() > 1 && !digitsFollow))
          return parser.emitError(numberLoc, "expected a number for 'scale', "
                                             "got '")
                 << digits << exponent << "'";
        text += exponent.str();
        if (exponent.size() == 1) {
          if (!adjacent(exponent.end()))
            return parser.emitError(numberLoc, "expected an exponent after '")
                   << digits << exponent << "'";
          if (succeeded(parser.parseOptionalMinus()))
            text += "-";
          else if (failed(parser.parseOptionalPlus()))
            return parser.emitError(numberLoc, "expected an exponent after '")
                   << digits << exponent << "'";
          if (!adjacent(exponent.end() + 1))
            return parser.emitError(numberLoc, "expected an exponent after '")
                   << digits << exponent << "'";
          uint64_t power;
          SMLoc powerLoc = parser.getCurrentLocation();
          if (parser.parseInteger(power))
            return failure();
          text += spelledNumber(powerLoc, parser.getCurrentLocation()).str();
        }
      }
      if (!readF32(text, value))
        return parser.emitError(numberLoc, "cannot read 'scale' ") << text;
    }
  } else {
    double ignored;
    if (parser.parseFloat(ignored))
      return failure();
    StringRef text = spelledNumber(numberLoc, parser.getCurrentLocation());
    if (!readF32(text, value))
      return parser.emitError(numberLoc, "cannot read 'scale' ") << text;
  }
  if (negative)
    value.changeSign();
  if (!value.isFinite()) {
    SmallString<16> text;
    value.toString(text);
    InFlightDiagnostic diag =
        parser.emitError(loc, "'scale' must be a finite f32, got ");
    diag << text;
    StringRef spelled = spelledNumber(numberLoc, parser.getCurrentLocation());
    if (!spelled.starts_with_insensitive("0x"))
      diag << " (" << (negative ? "-" : "") << spelled
           << " is beyond the f32 range)";
    return diag;
  }
  scale = parser.getBuilder().getF32FloatAttr(value.convertToFloat());
  return success();
}

static void printScale(OpAsmPrinter &printer, Operation *, FloatAttr scale) {
  // The shortest decimal that reads back to the same f32 (0.125, -0.0,
  // 1.0E+30). MLIR's lexer reads a float only with a '.', so one goes in
  // before any exponent: "1E+30" alone would read as the integer 1.
  SmallString<16> text;
  scale.getValue().toString(text);
  if (text.find('.') == StringRef::npos) {
    size_t exponent = text.find_first_of("eE");
    text.insert(exponent == StringRef::npos ? text.end()
                                            : text.begin() + exponent,
                {'.', '0'});
  }
  printer << text;
}

static ParseResult parseMaskClause(OpAsmParser &parser, MaskAttr &mask) {
  FailureOr<MaskAttr> parsed = parseMaskBody(parser);
  if (failed(parsed))
    return failure();
  mask = *parsed;
  return success();
}

static void printMaskClause(OpAsmPrinter &printer, Operation *,
                            MaskAttr mask) {
  printMaskBody(printer, mask);
}

#define GET_OP_CLASSES
#include "flash/Dialect/Flash/IR/FlashOps.cpp.inc"

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

void AttentionOp::build(OpBuilder &builder, OperationState &state, Value query,
                        Value key, Value value, ValueRange inits,
                        ValueRange captures, float scale, MaskAttr mask) {
  build(builder, state, TypeRange(inits), query, key, value, inits, captures,
        /*sinks=*/Value(), /*offsets=*/ValueRange(), /*query_len=*/Value(),
        builder.getF32FloatAttr(scale),
        (mask && !mask.isNone()) ? mask : MaskAttr());
  // The score_mod region exists but stays empty until a caller fills it.
  (void)state;
}

MaskAttr AttentionOp::getMaskOrNone() {
  if (std::optional<MaskAttr> mask = getMask())
    return *mask;
  return MaskAttr::get(getContext(), MaskKind::None, 0,
                       MaskAlignment::TopLeft);
}

int64_t AttentionOp::getGroupSize() {
  int64_t numBatch = getNumBatchDims();
  if (numBatch == 0)
    return 1;
  int64_t hq = getQueryType().getDimSize(numBatch - 1);
  int64_t hkv = getKeyType().getDimSize(numBatch - 1);
  if (ShapedType::isDynamic(hq) || ShapedType::isDynamic(hkv) || hkv == 0)
    return 1;
  return hq / hkv;
}


static std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// Two static sizes that differ; a dynamic size matches anything.
static bool conflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

static LogicalResult verifyOffsets(AttentionOp op);

LogicalResult AttentionOp::verify() {
  size_t numInits = getInits().size();
  if (numInits != 1 && numInits != 2)
    return emitOpError("expects 1 or 2 inits (output, then optional "
                       "log-sum-exp), got ")
           << numInits;
  RankedTensorType qType = getQueryType();
  if (failed(verifyAttentionShapes(*this, qType, getKeyType(), getValueType(),
                                   getOutputType(), "output init")))
    return failure();
  int64_t rank = qType.getRank();
  ArrayRef<int64_t> q = qType.getShape();

  if (hasLse()) {
    auto lType = cast<RankedTensorType>(getLseInit().getType());
    if (!lType.getElementType().isF32())
      return emitOpError("log-sum-exp init must have f32 elements, got ")
             << lType.getElementType();
    bool shapeOk = lType.getRank() == rank - 1;
    for (int64_t d = 0; shapeOk && d < rank - 1; ++d)
      shapeOk = !conflict(lType.getDimSize(d), q[d]);
    if (!shapeOk) {
      std::string expected;
      for (int64_t d = 0; d < rank - 1; ++d)
        expected += (d ? "x" : "") + dimStr(q[d]);
      return emitOpError("log-sum-exp init must have shape [batch..., Lq] = [")
             << expected << "], got " << lType;
    }
  }

  if (getResults().size() != numInits)
    return emitOpError("expects one result per init (")
           << numInits << "), got " << getResults().size();
  for (auto [idx, pair] :
       llvm::enumerate(llvm::zip(getResults().getTypes(), getInits().getTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError("result #")
             << idx << " type " << std::get<0>(pair)
             << " does not match its init type " << std::get<1>(pair);

  float scale = getScale().convertToFloat();
  if (!std::isfinite(scale))
    return emitOpError("'scale' must be finite, got ") << scale;

  if (!getCaptures().empty() && !hasScoreMod())
    return emitOpError("has ")
           << getCaptures().size()
           << " captures but no score_mod region to read them";
  if (failed(verifySinks(*this, getSinks(), qType, hasOffsets())))
    return failure();
  return verifyOffsets(*this);
}

/// `offsets` and `query_len` come together, one offset per batch dim plus
/// the query row, and a tile's rows lie inside the op it was cut from.
static LogicalResult verifyOffsets(AttentionOp op) {
  if (!op.hasOffsets()) {
    if (op.getQueryLen())
      return op.emitOpError("has a 'query_len' but no 'offsets'; a tile needs "
                            "both");
    return success();
  }
  if (!op.getQueryLen())
    return op.emitOpError("has 'offsets' but no 'query_len', the query length "
                          "of the attention it is a tile of");
  int64_t nb = op.getNumBatchDims();
  if (static_cast<int64_t>(op.getOffsets().size()) != nb + 1)
    return op.emitOpError("expects ")
           << nb + 1 << " offsets (one per batch dim, then the query row) for "
           << "'query' " << op.getQueryType() << ", got "
           << op.getOffsets().size();
  for (auto [d, offset] : llvm::enumerate(op.getOffsets())) {
    std::optional<int64_t> c = getConstantIntValue(offset);
    if (c && *c < 0)
      return op.emitOpError("offset #")
             << d << " ("
             << (static_cast<int64_t>(d) == nb ? "query row" : "batch dim")
             << ") must be non-negative, got " << *c;
  }
  std::optional<int64_t> fullLq = getConstantIntValue(op.getQueryLen());
  if (fullLq && *fullLq < 0)
    return op.emitOpError("'query_len' must be non-negative, got ") << *fullLq;
  std::optional<int64_t> row = getConstantIntValue(op.getRowOffset());
  int64_t lq = op.getQueryType().getDimSize(nb);
  if (fullLq && !ShapedType::isDynamic(lq) && lq > *fullLq)
    return op.emitOpError("'query' has Lq = ")
           << lq << " rows, more than 'query_len' = " << *fullLq
           << " of the attention it is a tile of";
  if (fullLq && row && !ShapedType::isDynamic(lq) && *row + lq > *fullLq)
    return op.emitOpError("query rows [")
           << *row << ", " << *row + lq << ") (offset " << *row
           << ", Lq = " << lq << ") exceed 'query_len' = " << *fullLq;
  return success();
}

LogicalResult AttentionOp::verifyRegions() {
  if (!hasScoreMod())
    return success();
  return verifyScoreModRegion(*this, getScoreMod(), getQueryType().getRank(),
                              getCaptures());
}

LogicalResult AttentionOp::reifyResultShapes(
    OpBuilder &builder, ReifiedRankedShapedTypeDims &reifiedReturnShapes) {
  reifyInitShapes(builder, getLoc(), getInits(), reifiedReturnShapes);
  return success();
}

void mlir::flash::reifyInitShapes(OpBuilder &builder, Location loc,
                                  ValueRange inits,
                                  ReifiedRankedShapedTypeDims &shapes) {
  for (Value init : inits) {
    auto type = cast<RankedTensorType>(init.getType());
    SmallVector<OpFoldResult> shape;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (type.isDynamicDim(d))
        shape.push_back(
            tensor::DimOp::create(builder, loc, init, d).getResult());
      else
        shape.push_back(builder.getIndexAttr(type.getDimSize(d)));
    }
    shapes.push_back(shape);
  }
}

void mlir::flash::mapScoreModArguments(IRMapping &mapping, Block &body,
                                       Value s, ValueRange batch, Value i,
                                       Value j, ValueRange captures) {
  int64_t nb = batch.size();
  mapping.map(body.getArgument(0), s);
  for (int64_t d = 0; d < nb; ++d)
    mapping.map(body.getArgument(1 + d), batch[d]);
  mapping.map(body.getArgument(1 + nb), i);
  mapping.map(body.getArgument(2 + nb), j);
  for (auto [k, capture] : llvm::enumerate(captures))
    mapping.map(body.getArgument(3 + nb + k), capture);
}

Value mlir::flash::buildScoreMod(OpBuilder &b, AttentionOp op, Value s,
                                 ValueRange batch, Value i, Value j) {
  Region &region = op.getScoreMod();
  IRMapping mapping;
  return cloneScoreMod(b, op.getLoc(), region, mapping, s, batch, i, j,
                       op.getCaptures());
}

SmallVector<Value> mlir::flash::buildAbsoluteIndices(OpBuilder &b, Location loc,
                                                     AttentionOp op,
                                                     ValueRange local) {
  SmallVector<Value> absolute(local);
  if (!op.hasOffsets())
    return absolute;
  for (auto [index, offset] : llvm::zip(absolute, op.getOffsets()))
    index = arith::AddIOp::create(b, loc, index, offset);
  return absolute;
}

Value mlir::flash::getAlignmentQueryLength(AttentionOp op, Value lq) {
  return op.hasOffsets() ? op.getQueryLen() : lq;
}

Value mlir::flash::buildSinkLogit(OpBuilder &b, Location loc, Value sinks,
                                  ValueRange batch) {
  Value x = tensor::ExtractOp::create(b, loc, sinks, batch.back());
  if (!x.getType().isF32())
    x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  return x;
}
