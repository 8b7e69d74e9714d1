//===- KernelConfig.cpp - chip limits and the wgmma kernel's tuning -------===//
//
// The hardware limits the lowering relies on, one row per chip family, and
// the heuristics that fill in the automatic knobs of the wgmma kernel
// (measured on the H200, bench/NOTES.md).
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

std::optional<ChipInfo> gpu_lowering::lookupChip(StringRef name) {
  unsigned sm = 0;
  StringRef rest = name;
  if (!rest.consume_front("sm_"))
    return std::nullopt;
  StringRef digits = rest.take_while(llvm::isDigit);
  rest = rest.drop_front(digits.size());
  // sm_XYa: arch-specific features; sm_XYf: family-portable ones.
  if (digits.getAsInteger(10, sm) || sm < 70 ||
      !(rest.empty() || rest == "a" || rest == "f"))
    return std::nullopt;
  ChipInfo chip;
  chip.sm = sm;
  chip.archSpecific = rest == "a";
  // The largest dynamic shared memory one CTA may opt into (CUDA's
  // sharedMemPerBlockOptin), per compute capability.
  chip.typicalMultiprocessors = sm >= 90 ? 132 : sm == 80 ? 108 : 0;
  chip.maxDynamicSmemPerBlock = sm >= 90   ? 232448
                                : sm == 80 ? 166912
                                : sm >= 86 ? 101376
                                : sm == 75 ? 65536
                                           : 98304;
  return chip;
}

LogicalResult gpu_lowering::verifyKernelOptions(const GPUKernelOptions &o,
                                                std::string &message) {
  llvm::raw_string_ostream os(message);
  if (o.kernel != "auto" && o.kernel != "splitkv" && o.kernel != "wgmma" &&
      o.kernel != "mma" && o.kernel != "portable") {
    os << "kernel must be auto, splitkv, wgmma, mma or portable, got '"
       << o.kernel << "'";
    return failure();
  }
  std::optional<ChipInfo> chip = lookupChip(o.chip);
  if (!chip) {
    os << "chip '" << o.chip
       << "' is not an NVIDIA chip this lowering knows (sm_70 or newer, e.g. "
          "sm_80, sm_90a)";
    return failure();
  }
  if (o.kernel == "wgmma" && !chip->hasWgmma()) {
    os << "the wgmma kernel needs chip sm_90a, got '" << o.chip << "'";
    return failure();
  }
  if ((o.kernel == "mma" || o.kernel == "splitkv") && !chip->hasMmaSync()) {
    os << "the " << o.kernel << " kernel needs sm_80 or newer, got '" << o.chip
       << "'";
    return failure();
  }
  if (o.splitKV < 0) {
    os << "split-kv must be >= 0 (0: automatic), got " << o.splitKV;
    return failure();
  }
  if (o.fusedCombine < -1 || o.fusedCombine > 1) {
    os << "fused-combine must be -1 (automatic), 0 or 1, got "
       << o.fusedCombine;
    return failure();
  }
  if (o.gradDq != "auto" && o.gradDq != "bulk" && o.gradDq != "atomic") {
    os << "grad-dq must be auto, bulk or atomic, got '" << o.gradDq << "'";
    return failure();
  }
  if ((o.gradBlockQ != 0 && o.gradBlockQ != 32 && o.gradBlockQ != 64) ||
      (o.gradBlockK != 0 && o.gradBlockK != 64 && o.gradBlockK != 128)) {
    os << "grad-block-q must be 32 or 64 and grad-block-k 64 or 128 (0: "
          "automatic), got "
       << o.gradBlockQ << " and " << o.gradBlockK;
    return failure();
  }
  if (o.blockM < 0 || o.warpgroups < 0 || o.ctasPerSM < 0 ||
      (o.blockM > 0 && o.warpgroups > 0 && o.blockM != 64 * o.warpgroups) ||
      (o.blockN != 0 &&
       (o.blockN < 16 || o.blockN > 256 || o.blockN % 16 != 0)) ||
      o.stages < 0 || o.deferPV < -1 || o.deferPV > 1 || o.persistent < -1 ||
      o.persistent > 1 || o.scorePrefetch < -1 || o.scorePrefetch > 1 ||
      o.stageCaptures < -1 || o.stageCaptures > 1 || o.softExp2 < 0 ||
      o.softExp2 > 8 || o.qBuffers < 0 || o.qBuffers > 2 ||
      ((o.overlap || o.deferPV == 1) && o.stages > 0 && o.stages < 3) ||
      (o.overlap && (o.deferPV == 1 || o.pingpong))) {
    os << "need block-m = 64 * warpgroups (0: automatic), block-n a multiple "
          "of 16 in [16, 256] (0: automatic), stages >= 1 (>= 3 with overlap "
          "or defer-pv; 0: "
          "automatic), defer-pv, persistent, score-prefetch and "
          "stage-captures in {-1, 0, 1}, soft-exp2 in [0, 8], q-buffers in "
          "[0, 2], "
          "and overlap without defer-pv "
          "or pingpong";
    return failure();
  }
  return success();
}

SmemLayout::SmemLayout(const KernelConfig &cfg, const KernelSpec &spec)
    : stages(cfg.stages), qBuffers(cfg.qBuffers) {
  int64_t elt = spec.elemType.getIntOrFloatBitWidth() / 8;
  qBytes = cfg.blockM * spec.panelD() * elt;
  kBytes = cfg.blockN * spec.panelD() * elt;
  vBytes = cfg.blockN * spec.panelDv() * elt;
  for (const StagedCapture &c : spec.staged) {
    captureOff.push_back(kBytes + vBytes + captureBytes);
    captureBytes += c.tileBytes(cfg.blockM, cfg.blockN);
  }
  stageBytes = kBytes + vBytes + captureBytes;
  barOff = qBuffers * qBytes + cfg.stages * stageBytes;
  int64_t slots =
      qBuffers + 2 * cfg.stages + (cfg.persistent ? 2 * qBuffers : 0);
  lastArrivalOff = barOff + 8 * slots;
  total = 1024 + barOff + 8 * (slots + (spec.fusedCombine ? 1 : 0));
}

int64_t gpu_lowering::pagedBoxRows(const KernelConfig &cfg,
                                   const KernelSpec &spec) {
  return std::gcd(cfg.blockN, spec.pageSize);
}

/// Bytes per score of the score_mod's capture reads whose indices involve
/// the key (a bias, a mask tensor): what a prefetched tile holds in
/// registers per score. 0 without such reads (soft-capping; ALiBi's slope
/// is read per head).
static int64_t perScoreReadBytes(Region &scoreMod, int64_t numIndices) {
  DenseSet<Value> fromKey = scoreModSlice(scoreMod, numIndices);
  int64_t bytes = 0;
  for (Operation &op : scoreMod.front().without_terminator())
    if (tensor::ExtractOp ex = captureRead(&op, numIndices);
        ex && fromKey.contains(ex.getResult()))
      bytes += storedBytes(ex.getType());
  return bytes;
}

namespace {
/// The keys a query block of a static-shape prefill walks, on average over
/// the blocks, and whether a mask of the indices alone decided them.
struct MeanWalk {
  double keys;
  bool indexMask;
};
} // namespace

/// Lk without a mask; under a causal/window mask the mean over rows of the
/// keys each sees; under a mask of the indices alone (a score_mod
/// `kernelIndexMask` classifies, no structured mask beside it) the tiles its
/// classification leaves a block, in keys. None for dynamic shapes and any
/// other score_mod.
static std::optional<MeanWalk> meanWalkedKeys(const KernelSpec &spec,
                                              const KernelConfig &cfg) {
  int64_t lq = spec.queryLen, lk = spec.keyLen;
  if (ShapedType::isDynamic(lq) || ShapedType::isDynamic(lk) ||
      ShapedType::isDynamic(spec.batchHeads) || lq <= 0 || lk <= 0)
    return std::nullopt;
  if (spec.scoreMod) {
    std::optional<IndexMask> mask = kernelIndexMask(
        spec.scoreMod, spec.numBatchDims, /*classifiable=*/true);
    if (!mask || spec.hasMask())
      return std::nullopt;
    std::optional<double> tiles =
        meanWalkedTiles(*spec.scoreMod, *mask, lq, lk, cfg.blockM, cfg.blockN,
                        spec.batchHeads - 1);
    if (!tiles)
      return std::nullopt;
    return MeanWalk{*tiles * cfg.blockN, /*indexMask=*/true};
  }
  if (!spec.hasMask())
    return MeanWalk{double(lk), /*indexMask=*/false};
  int64_t total = 0;
  for (int64_t i = 0; i < lq; ++i)
    total += spec.mask.visibleKeyCount(i, lq, lk);
  return MeanWalk{double(total) / double(lq), /*indexMask=*/false};
}

/// Whether a prefill's query blocks are short enough for the persistent grid
/// to pay: its gain is the next item's Q and first K/V tiles loading under
/// this item's last tiles and epilogue, which matters as much as the key
/// loop is short. Measured (bench/NOTES runs 51, 52): +9-11 % at 1k keys
/// per row (non-causal N = 1k, causal N = 1k), within ±4 % at causal 2k,
/// -2..-7 % from 4k. Under a mask of the indices alone (run 62, N = 8k):
/// +4-10 % where a block walks 512-2176 keys (chunks of 512, chunked
/// causal, a local window of ±1024), +1 % at 2048 (chunks of 2048), -10 %
/// at ~4.6k (prefix-LM); another score_mod was not measured. The overlap
/// needs CTAs that walk two items or more (a grid of fewer items than twice
/// the resident CTAs is the one-CTA-per-item grid again, plus its work
/// counter).
static bool persistentPays(const KernelSpec &spec, const KernelConfig &cfg,
                           const ChipInfo &chip,
                           const std::optional<MeanWalk> &walk) {
  constexpr int64_t kMaxMeanKeys = 1024, kMaxIndexMaskKeys = 3072;
  if (!walk)
    return false;
  int64_t items = llvm::divideCeil(spec.queryLen, cfg.blockM) * spec.batchHeads;
  if (items < 2 * chip.typicalMultiprocessors * cfg.ctasPerSM)
    return false;
  return walk->keys <= (walk->indexMask ? kMaxIndexMaskKeys : kMaxMeanKeys);
}

/// Whether a mask leaves each query block so short a walk that the deferred
/// PV's prologue (the first tile's QKᵀ before the loop) and its lone last PV
/// weigh more than the overlap it buys. Measured (bench/NOTES runs 65, 66,
/// D = 128): under a mask of the indices alone (N = 8k) defer-pv=0 is 5-8 %
/// faster where a block walks 512-2176 keys (chunks of 512 and 2048,
/// chunked causal, a local window of ±1024) and 5 % slower at ~4.6k
/// (prefix-LM); under a causal mask it is 14 % faster at N = 1k (512 keys
/// on average) and 3-4 % slower from N = 2k (1024 keys); without a mask 6 %
/// slower at 1k keys.
static bool shortMaskedWalk(const KernelSpec &spec,
                            const std::optional<MeanWalk> &walk) {
  constexpr double kMaxIndexMaskKeys = 3072, kMaxStructuredMaskKeys = 768;
  if (!walk)
    return false;
  if (walk->indexMask)
    return walk->keys <= kMaxIndexMaskKeys;
  return spec.hasMask() && walk->keys <= kMaxStructuredMaskKeys;
}

/// Small head dims make the softmax the larger share of the work. D, Dv <= 64
/// with a causal/window mask take one consumer warpgroup per CTA and two CTAs
/// per SM (one CTA's prologue and epilogue overlap the other's tiles, and
/// 64-row query blocks waste little of the diagonal tiles); the register
/// split is then capped so that both CTAs fit in the register file. Without
/// such a mask they take FA3's tile: 192 query rows on three consumer
/// warpgroups (+6-16 % from N = 2k, -5 % at N = 1k, run 13; with a causal
/// mask it lost up to 20 % below N = 8k). A score_mod keeps the older tiles:
/// its index arithmetic and capture loads make the 192-row tile (160
/// registers per thread) spill, and so does a deferred PV beside a
/// prefetched per-score read at 128 keys.
KernelConfig gpu_lowering::resolveWgmmaConfig(const GPUKernelOptions &o,
                                              const ChipInfo &chip,
                                              const KernelSpec &spec) {
  int64_t d = spec.panelD(), dv = spec.panelDv();
  bool structuredMask = spec.hasMask(), scoreMod = spec.scoreMod != nullptr;
  KernelConfig cfg;
  cfg.blockN = o.blockN;
  cfg.splitPV = o.splitPV;
  cfg.overlap = o.overlap;
  cfg.pingpong = o.pingpong;
  cfg.scorePrefetch = scoreMod && o.scorePrefetch != 0;
  cfg.softExp2 = o.softExp2;
  int64_t readBytes =
      scoreMod ? perScoreReadBytes(*spec.scoreMod, spec.numBatchDims + 2) : 0;
  cfg.producerRegs = o.producerRegs;
  cfg.consumerRegs = o.consumerRegs;
  // The decode form, packed varlen batches and paged caches have grids of
  // their own (splits, sequences); the persistent walk is the prefill's.
  bool prefill = !spec.splitKV && !spec.varlen && spec.pageSize == 0;
  cfg.persistent = prefill && o.persistent == 1;
  cfg.prefetchNext = o.prefetchNext;
  bool small = d <= 64 && dv <= 64;
  // A decode of up to 128 rows takes 64-row blocks of one consumer
  // warpgroup, two CTAs per SM (up to Dv = 128: one warpgroup's O at 256
  // columns needs more registers than two CTAs per SM leave it). At 64 rows
  // the block computes no second warpgroup's padding; at 128 (MQA at
  // Lq = 16, GQA 4 at Lq = 32) the two blocks of a K/V head read the same
  // K/V tiles, the second mostly from L2, and one CTA's prologue and
  // epilogue run under the other's tiles: 1.02-1.27x the 128-row block
  // (bench/NOTES run 62, H100). 160 rows as three blocks lost (0.75x).
  constexpr int64_t kMaxOneWarpgroupDecodeRows = 128;
  bool oneWarpgroup = spec.decodeRows > 0 &&
                      spec.decodeRows <= kMaxOneWarpgroupDecodeRows &&
                      dv <= 128;
  cfg.blockM = o.blockM       ? o.blockM
               : o.warpgroups ? 64 * o.warpgroups
               : oneWarpgroup ? 64
               : !small       ? 128
               : structuredMask || scoreMod ? 64
                                            : 192;
  cfg.consumerWarpgroups = o.warpgroups ? o.warpgroups : cfg.blockM / 64;
  if (cfg.blockN == 0) {
    // D or Dv past 128 (192, 256): Q and two stages of 128-key K/V tiles no
    // longer fit in shared memory, so the tile shrinks until they do
    // (FlashAttention-3 takes 80 keys at D = 256).
    cfg.blockN = 128;
    while (std::max(d, dv) > 128 && cfg.blockN > 16) {
      KernelConfig two = cfg;
      two.stages = 2;
      if (SmemLayout(two, spec).total <= chip.maxDynamicSmemPerBlock)
        break;
      cfg.blockN -= 16;
    }
    // A score_mod's index arithmetic and capture loads spill at 80 keys;
    // 64 measured +1-5 % (D = 256 with a softcap, run 30).
    if (std::max(d, dv) > 128 && scoreMod)
      cfg.blockN = std::min<int64_t>(cfg.blockN, 64);
    // A prefetched per-score read along the keys (a bias, a mask tensor)
    // keeps 128 keys: as a predicated load at an immediate offset it holds
    // no address per score and does not spill there (64 keys measured
    // 0.91-0.96x of 128 with a bf16 bias; bench/NOTES run 56).
  }
  cfg.ctasPerSM = o.ctasPerSM ? o.ctasPerSM
                              : cfg.consumerWarpgroups == 1 ? 2 : 1;
  // The walks decide both automatic choices below; classifying an index
  // mask's tiles is compile time worth doing once.
  std::optional<MeanWalk> walk;
  if (prefill && (o.persistent == -1 || o.deferPV < 0))
    walk = meanWalkedKeys(spec, cfg);
  if (prefill && o.persistent == -1)
    cfg.persistent = persistentPays(spec, cfg, chip, walk);
  if (cfg.consumerRegs > 0 && cfg.producerRegs > 0) {
    int64_t budget =
        chip.registersPerSM / (128 * cfg.ctasPerSM) - cfg.producerRegs;
    int64_t cap = (budget / cfg.consumerWarpgroups) / 8 * 8;
    // setmaxnreg takes at most 256 registers per thread.
    cfg.consumerRegs = std::min(cfg.consumerRegs, std::min<int64_t>(cap, 256));
  }
  // Deferred PV measured +7-24 % over the serial loop at D = 128 without a
  // mask and -2..+7 % with a causal one; at D = 64 (one consumer warpgroup,
  // two CTAs per SM) it was up to 6 % slower. It needs a third K/V stage,
  // which must fit next to Q in the shared memory a CTA may have.
  if (o.deferPV < 0) {
    KernelConfig three = cfg;
    three.stages = 3;
    bool fits = SmemLayout(three, spec).total * cfg.ctasPerSM <=
                chip.maxDynamicSmemPerBlock;
    // With a score_mod that reads nothing per score (soft-capping, ALiBi)
    // it measured +2-5 % at D = 128; reads per score spill under it.
    // Under a mask that leaves short walks it is off.
    cfg.deferPV = (d > 64 || dv > 64) && readBytes == 0 && !cfg.overlap &&
                  fits && (o.stages == 0 || o.stages >= 3) &&
                  !shortMaskedWalk(spec, walk);
  } else {
    cfg.deferPV = o.deferPV == 1;
  }
  cfg.stages = o.stages ? o.stages : cfg.deferPV || cfg.overlap ? 3 : 2;
  // A second Q buffer, or (0) where it fits: at D = 128 beside a two-stage
  // ring (the serial loop of short causal walks), at D = 64 beside either;
  // not beside the deferred PV's three stages of 128-key tiles at D = 128.
  if (cfg.persistent && o.qBuffers != 1) {
    KernelConfig two = cfg;
    two.qBuffers = 2;
    bool fits = chip.residentCTAs(SmemLayout(two, spec).total) >= cfg.ctasPerSM;
    cfg.qBuffers = o.qBuffers == 2 || fits ? 2 : 1;
  }
  return cfg;
}
