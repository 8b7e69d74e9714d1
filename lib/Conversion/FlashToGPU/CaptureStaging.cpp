//===- CaptureStaging.cpp - score_mod capture tiles in shared memory ------===//
//
// A bias or a mask tensor read per score, `cap[..., q_idx, kv_idx]`, costs
// the L1 more than the tensor cores cost the tile when each thread loads
// its own elements from global memory: a warp's read of one fragment column
// spans 8 rows, 8 cache lines, for 16 bytes each. The wgmma kernel's
// producer instead loads the capture's [blockM rows][blockN keys] tile with
// TMA beside K and V (same ring slot, same full barrier), in 128-byte
// panels with the 128-byte swizzle, and a thread reads its scores' elements
// from shared memory: a quad's 16 bytes of 8 rows land in 8 distinct
// 16-byte chunks of the banks, so a warp's read is one conflict-free
// wavefront.
//
//===----------------------------------------------------------------------===//
#include "HopperPrimitives.h"
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

/// The staging of capture `i` (of type `t`) of `scoreMod`, if every read of
/// it is `cap[lead..., q_idx, kv_idx]` with each leading index a batch index
/// or a constant, and TMA can describe it: a static row-major memref of
/// rank 2 to 5 whose rows are multiples of 16 bytes, of 1, 2 or 4-byte
/// elements (a boolean is a byte).
static std::optional<StagedCapture> stagedCapture(Region &scoreMod, int64_t nb,
                                                  MemRefType t, unsigned i) {
  Type elt = t.getElementType();
  int64_t rank = t.getRank();
  if (!elt.isIntOrFloat() || rank < 2 || rank > 5 || !t.hasStaticShape() ||
      !t.getLayout().isIdentity())
    return std::nullopt;
  unsigned bits = elt.getIntOrFloatBitWidth();
  if (bits != 1 && bits != 8 && bits != 16 && bits != 32)
    return std::nullopt;
  StagedCapture c;
  c.capture = i;
  c.elementBytes = storedBytes(elt);
  if ((t.getDimSize(rank - 1) * c.elementBytes) % 16)
    return std::nullopt;

  Block &body = scoreMod.front();
  // (score, batch indices..., q_idx, kv_idx, captures...)
  BlockArgument arg = body.getArgument(nb + 3 + i);
  Value qArg = body.getArgument(nb + 1), kArg = body.getArgument(nb + 2);
  bool first = true;
  for (Operation *user : arg.getUsers()) {
    auto read = dyn_cast<tensor::ExtractOp>(user);
    if (!read)
      return std::nullopt;
    OperandRange idx = read.getIndices();
    if (idx.back() != kArg || idx[rank - 2] != qArg)
      return std::nullopt;
    SmallVector<int64_t> dims, constants;
    for (Value v : idx.drop_back(2)) {
      APInt k;
      auto ba = dyn_cast<BlockArgument>(v);
      if (ba && ba.getOwner() == &body && ba.getArgNumber() >= 1 &&
          ba.getArgNumber() <= nb) {
        dims.push_back(ba.getArgNumber() - 1);
        constants.push_back(0);
      } else if (matchPattern(v, m_ConstantInt(&k))) {
        dims.push_back(-1);
        constants.push_back(k.getSExtValue());
      } else {
        return std::nullopt;
      }
    }
    if (!first && (dims != c.leadBatchDim || constants != c.leadConstant))
      return std::nullopt;
    c.leadBatchDim = std::move(dims);
    c.leadConstant = std::move(constants);
    first = false;
  }
  if (first) // never read
    return std::nullopt;
  return c;
}

SmallVector<StagedCapture>
gpu_lowering::stageableCaptures(const KernelSpec &spec,
                                const KernelConfig &cfg) {
  SmallVector<StagedCapture> staged;
  // The producer's box is the CTA's own query rows of one batch·head: not
  // so for packed heads, packed sequences or a paged cache.
  if (!spec.scoreMod || spec.splitKV || spec.varlen || spec.pageSize > 0 ||
      spec.packedGroup > 1)
    return staged;
  for (unsigned i = 0; i < spec.captureTypes.size(); ++i)
    if (std::optional<StagedCapture> c = stagedCapture(
            *spec.scoreMod, spec.numBatchDims, spec.captureTypes[i], i);
        c && (cfg.blockN * c->elementBytes) % 128 == 0)
      staged.push_back(*c);
  return staged;
}

SmallVector<GradStagedCapture>
gpu_lowering::gradStageableCaptures(const GradKernelConfig &cfg,
                                    int64_t numBatchDims,
                                    ArrayRef<MemRefType> captureTypes) {
  SmallVector<GradStagedCapture> staged;
  if (!cfg.wgmma || !cfg.scoreMod || !cfg.stageCaptures)
    return staged;
  // A box shares the 8 KiB a warpgroup's dSᵀ rows take in one 64-row
  // panel of the slot: one 16-bit capture or two boolean / 8-bit ones. A
  // 32-bit element has no ldmatrix and two of its boxes would not fit.
  const int64_t area = kGradWgKeys * 128;
  int64_t offset = 0;
  for (unsigned i = 0; i < captureTypes.size(); ++i) {
    std::optional<StagedCapture> c =
        stagedCapture(*cfg.scoreMod, numBatchDims, captureTypes[i], i);
    if (!c || c->elementBytes > 2)
      continue;
    GradStagedCapture g{*c, offset};
    if (offset + g.boxBytes() > area)
      continue;
    offset += g.boxBytes();
    staged.push_back(g);
  }
  return staged;
}

SmallVector<Value, 8> gpu_lowering::stagedChunkOffsets(ImplicitLocOpBuilder &b,
                                                       Value rowInBlock,
                                                       Value quadLane,
                                                       int64_t elementBytes) {
  // The thread's element pair of a fragment column 8j starts 2·quadLane
  // elements into it: chunk (8j·eb mod 128) / 16 + lanePart / 16 of a
  // panel row, byte lanePart mod 16 there (no pair crosses a chunk). The
  // swizzle XORs the chunk with the row mod 8, the same for both row halves
  // (8 rows apart).
  int64_t lanePart = 2 * elementBytes;
  Value lb = arith::MulIOp::create(b, quadLane, constIdx(b, lanePart));
  Value laneChunk = arith::DivUIOp::create(b, lb, constIdx(b, 16));
  Value laneByte = arith::RemUIOp::create(b, lb, constIdx(b, 16));
  Value swz = arith::RemUIOp::create(b, rowInBlock, constIdx(b, 8));
  Value rowByte = arith::AddIOp::create(
      b, arith::MulIOp::create(b, rowInBlock, constIdx(b, 128)), laneByte);
  SmallVector<Value, 8> offsets;
  for (int64_t c = 0; c < 8; ++c) {
    Value chunk = arith::XOrIOp::create(
        b, arith::AddIOp::create(b, laneChunk, constIdx(b, c)), swz);
    offsets.push_back(toI64(
        b, arith::AddIOp::create(
               b, rowByte, arith::MulIOp::create(b, chunk, constIdx(b, 16)))));
  }
  return offsets;
}

Value gpu_lowering::loadStagedCapture(ImplicitLocOpBuilder &b,
                                      const StagedTiles &tiles,
                                      unsigned capture, Type elt, Value col,
                                      int half) {
  // The column is the fragment's: a per-tile base (the tile's first key
  // plus 2·quadLane, in stagedChunkOffsets) plus 8j + e.
  int64_t k = splitConstantOffset(col).second;
  int64_t eb = storedBytes(elt);
  int64_t pair = 8 * (k / 8) * eb; // byte of column 8j in a tile row
  int64_t panel = pair / 128;
  int64_t chunk = (pair % 128) / 16;
  int64_t imm = panel * tiles.panelBytes[capture] + half * 8 * 128 + pair % 16 +
                (k % 8) * eb;
  Value addr = smemOffset(b, tiles.chunk[capture][chunk], imm);
  // A pair starts 2·eb-aligned: the vectoriser loads both at once. (A
  // boolean is loaded as its byte, which it does not do for i1.)
  Type stored = elt.isInteger(1) ? b.getI8Type() : elt;
  Value x = LLVM::LoadOp::create(b, stored, addr,
                                 /*alignment=*/k % 2 == 0 ? 2 * eb : eb);
  return stored == elt ? x : arith::TruncIOp::create(b, elt, x).getResult();
}
