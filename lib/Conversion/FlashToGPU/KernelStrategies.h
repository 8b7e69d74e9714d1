//===- KernelStrategies.h - how each target runs the attention tile program ===//
//
// A strategy decides how the tile program of TileProgram.h is staged and
// issued on one family of chips, the way Triton keeps chip specifics behind
// TargetInfoBase:
//
//   wgmma     sm_90a: a producer warpgroup streams K/V through a TMA ring
//             with mbarriers; consumer warpgroups issue wgmma from shared
//             memory (QKᵀ) and registers (PV)          WgmmaKernel.cpp
//             Its decode form splits the key range as splitkv does and
//             packs GQA heads as a view of Q (kernel=auto's first choice
//             for decode on sm_90a)                    WgmmaLaunch.cpp
//   splitkv   sm_80+, decode (kernel=auto: SplitKVLaunch.cpp's rule): GQA
//             rows packed into one tile, the key range split over CTAs,
//             partials merged by LSE                    SplitKV*.cpp
//   mma       sm_80+: cp-style 16-byte copies into padded shared tiles,
//             ldmatrix B operands, m16n8k16 mma.sync    MmaKernel.cpp
//   portable  any chip from sm_70, any head dims and float type: plain
//             loads, scalar FMA, one thread per row     PortableKernel.cpp
//
// convert-flash-to-gpu applies one pattern per strategy
// (populateFlashToGPUPatterns); each checks legality per op and the first
// that applies (or the one `kernel=` names) lowers it. Host sides:
// HostLaunch.cpp (shared), WgmmaLaunch.cpp (TMA descriptors),
// MemrefLaunch.cpp (the memref-argument kernels). Chip limits and the
// tuning heuristics: KernelConfig.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_LIB_CONVERSION_FLASHTOGPU_KERNELSTRATEGIES_H
#define FLASH_LIB_CONVERSION_FLASHTOGPU_KERNELSTRATEGIES_H

#include "TileProgram.h"
#include "flash/Conversion/GPUKernelOptions.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

namespace mlir::flash::gpu_lowering {

//===-- KernelConfig.cpp: chips and tuning --------------------------------===//

/// What the lowering needs to know of a chip; one row per chip family.
struct ChipInfo {
  unsigned sm = 0;          // compute capability XY of sm_XY
  bool archSpecific = false; // sm_XYa: the arch-specific features (wgmma)
  int64_t registersPerSM = 65536;
  int64_t maxDynamicSmemPerBlock = 0; // bytes one CTA may request
  // SMs of the family's full-size part (H100 SXM / H200: 132), for choices
  // made before a device is known; launches read the device's own count.
  int64_t typicalMultiprocessors = 0;
  bool hasWgmma() const { return sm == 90 && archSpecific; }
  bool hasMmaSync() const { return sm >= 80; }
  /// CTAs of `smemBytes` shared memory each that fit one SM: its memory is
  /// what one CTA may request plus the 1 KiB the driver reserves per CTA.
  int64_t residentCTAs(int64_t smemBytes) const {
    return (maxDynamicSmemPerBlock + 1024) / (smemBytes + 1024);
  }
};
/// The chip named `sm_XY[a]`, or nullopt for a name this lowering does not
/// know (not NVIDIA, or older than sm_70).
std::optional<ChipInfo> lookupChip(StringRef name);

/// The wgmma kernel's configuration for one op, every automatic choice made.
struct KernelConfig {
  int64_t blockM = 0, blockN = 0, consumerWarpgroups = 0, stages = 0;
  bool splitPV = false, overlap = false, pingpong = false;
  bool deferPV = false;
  // A grid of resident CTAs that each walk work items (WgmmaKernel.cpp).
  bool persistent = false;
  // Its producer prefetches the next item's Q and first K/V tiles into L2.
  bool prefetchNext = false;
  // Q's buffers: 2 lets a persistent grid's producer load the next item's
  // Q while this item's QKᵀs still read the other (1 without that grid).
  int64_t qBuffers = 1;
  // A score_mod's score-independent capture reads go before the QKᵀ wait.
  bool scorePrefetch = false;
  // Of every 8 exponentials of the softmax, those on the FMA pipes.
  int64_t softExp2 = 0;
  int64_t producerRegs = 0, consumerRegs = 0, ctasPerSM = 0;
  int64_t threads() const { return 128 * (1 + consumerWarpgroups); }
};

/// A score_mod capture read as `cap[lead..., q_idx, kv_idx]` (a bias or a
/// mask tensor per score) that the wgmma kernel's producer loads with TMA
/// per K/V tile, [blockM rows][blockN keys] beside K and V in the ring
/// slot, in 128-byte panels with the 128-byte swizzle.
struct StagedCapture {
  unsigned capture = 0; // index among the op's captures
  // Per leading index of the read: the batch dim whose index it is, or -1
  // for the constant `constant`.
  SmallVector<int64_t> leadBatchDim, leadConstant;
  int64_t elementBytes = 0;
  /// Bytes of one tile.
  int64_t tileBytes(int64_t rows, int64_t keys) const {
    return rows * keys * elementBytes;
  }
  /// Keys per 128-byte panel.
  int64_t panelKeys() const { return 128 / elementBytes; }
};

/// What the wgmma kernel is specialised on, read off a flash.attention.
struct KernelSpec {
  Type elemType;            // bf16 or f16 (Q, K and V)
  Type outElemType;         // O: f32, f16 or bf16 (converted from f32)
  int64_t headDim = 0;      // D
  int64_t valueDim = 0;     // Dv
  // Shared-memory tiles and the matmuls span whole 64-column panels (the
  // 128-byte swizzle atom): TMA fills the columns past D / Dv with zeros,
  // which add nothing to QKᵀ and give O columns that are never stored.
  int64_t panelD() const { return llvm::alignTo(headDim, 64); }
  int64_t panelDv() const { return llvm::alignTo(valueDim, 64); }
  int64_t numBatchDims = 0; // leading dims of Q, collapsed into one grid dim
  MaskAttr mask;            // null or none: no structured mask
  bool hasLse = false;
  double scale = 1.0;
  Region *scoreMod = nullptr;           // not owned; cloned per element
  SmallVector<MemRefType> captureTypes; // memref twins of the captures
  // The captures the producer stages per K/V tile in shared memory
  // (CaptureStaging.cpp); the others are read from global memory.
  SmallVector<StagedCapture> staged;
  // memref<?xT> of the op's sinks, null without; each row's epilogue merges
  // its head's sink (finishRow), or the combine does after a split.
  MemRefType sinksType;
  // flash.varlen_attention: Q, K, V, O packed [tokens, heads, D], LSE
  // [heads, tokens]; each CTA finds its sequence (varlenSequenceBlock).
  bool varlen = false;
  // The decode form: grid.x is query blocks × splits of the key range, and
  // with more than one split each CTA writes its rows normalised over its
  // keys and their log-sum-exp into f32 partials that the split-KV combine
  // merges (WgmmaLaunch.cpp's wgmmaDecodeForm says when).
  bool splitKV = false;
  // With splitKV: the last CTA of each row block to finish merges the
  // splits' partials into the output (arrival counters, one per row block),
  // instead of the combine kernel.
  bool fusedCombine = false;
  // Query rows per batch·head of the kernel's view (the GQA rows of a K/V
  // head when they are packed), when the decode form knows them; 0 else.
  int64_t decodeRows = 0;
  // Query heads packed per K/V head: the kernel's rows are the G·Lq rows of
  // G query heads, so row r is query r mod Lq, which is what a mask reads.
  int64_t packedGroup = 1;
  // > 0: flash.paged_attention. K and V are pools of pages of this many
  // keys, read as [pages·page_size, Hkv, D] in boxes of pagedBoxRows keys
  // through the block table; each sequence's length is its own.
  int64_t pageSize = 0;
  // Lq, Lk and the batch·head count of a prefill where they are static
  // (kDynamic else): the automatic persistent grid is chosen by the keys a
  // query block sees and the work items there are.
  int64_t queryLen = ShapedType::kDynamic, keyLen = ShapedType::kDynamic;
  int64_t batchHeads = ShapedType::kDynamic;
  bool hasMask() const { return mask && !mask.isNone(); }
  /// A static bound on the query and key indices a score_mod sees (0:
  /// none known).
  int64_t indexBound() const {
    if (pageSize > 0 || varlen || ShapedType::isDynamic(queryLen) ||
        ShapedType::isDynamic(keyLen))
      return 0;
    return std::max(queryLen, keyLen);
  }
};

//===-- CaptureStaging.cpp: capture tiles in shared memory ----------------===//

/// The captures of `spec`'s score_mod the wgmma kernel under `cfg` can
/// stage per K/V tile (StagedCapture); shared memory is the caller's to
/// check.
SmallVector<StagedCapture> stageableCaptures(const KernelSpec &spec,
                                             const KernelConfig &cfg);
/// A consumer thread's byte offsets, in a staged tile of elements of
/// `elementBytes`, of its first row's element pair in each 16-byte chunk c
/// (c = 0..7) of panel 0: the swizzle and the lane's place in a chunk,
/// once per thread (StagedTiles::chunk adds the tile's address).
SmallVector<Value, 8> stagedChunkOffsets(ImplicitLocOpBuilder &b,
                                         Value rowInBlock, Value quadLane,
                                         int64_t elementBytes);

/// Keys per TMA box of a paged K/V tile: the largest count that divides both
/// the tile and the page, so that no box crosses a page. A multiple of 8
/// (a page size and a tile that are multiples of 16), so each box starts on
/// a 128-byte swizzle atom of 8 rows.
int64_t pagedBoxRows(const KernelConfig &cfg, const KernelSpec &spec);

/// Shared-memory map of the wgmma kernel, byte offsets from a 1024-byte
/// aligned base. Tiles are stored as 64-column panels ([rows][64] elements,
/// 128 B rows) because the 128-byte swizzle that TMA writes and wgmma reads
/// spans 128 B.
struct SmemLayout {
  int64_t stages, qBuffers;
  int64_t qBytes, kBytes, vBytes, stageBytes; // qBytes: one buffer
  // Each staged capture's tile, after V in a slot (offsets from the K tile).
  SmallVector<int64_t> captureOff;
  int64_t captureBytes = 0; // all of them
  // Q's buffers, then the ring's stages, then the mbarriers: qFull per Q
  // buffer, kvFull[stages], kvEmpty[stages], and with a persistent grid per
  // Q buffer qEmpty (the consumers are done with it) and the slot that
  // publishes the work item it holds.
  int64_t barOff;
  int64_t total;  // bytes to request, with 1 KiB slack to align the base
  SmemLayout(const KernelConfig &cfg, const KernelSpec &spec);
  int64_t qOff(int64_t buffer) const { return buffer * qBytes; }
  int64_t kOff(int64_t s) const { return qBuffers * qBytes + s * stageBytes; }
  int64_t vOff(int64_t s) const { return kOff(s) + kBytes; }
  int64_t qFullOff(int64_t buffer) const { return barOff + 8 * buffer; }
  int64_t kvFullOff(int64_t s) const { return barOff + 8 * (qBuffers + s); }
  int64_t kvEmptyOff(int64_t s) const {
    return barOff + 8 * (qBuffers + stages + s);
  }
  int64_t qEmptyOff(int64_t buffer) const {
    return barOff + 8 * (qBuffers + 2 * stages + buffer);
  }
  int64_t workSlotOff(int64_t buffer) const {
    return qEmptyOff(qBuffers) + 8 * buffer;
  }
  // With spec.fusedCombine: whether this CTA arrived last (i32), after the
  // barriers and the work slots.
  int64_t lastArrivalOff;
};

/// Checks the options that do not depend on an op (kernel name, chip, the
/// wgmma knobs); the message says what is wrong.
LogicalResult verifyKernelOptions(const GPUKernelOptions &options,
                                  std::string &message);
/// The options with every automatic (0 / -1) knob of the wgmma kernel
/// decided for `spec` on `chip`.
KernelConfig resolveWgmmaConfig(const GPUKernelOptions &options,
                                const ChipInfo &chip, const KernelSpec &spec);

//===-- HostLaunch.cpp: the host side every strategy shares ---------------===//

/// The memrefs behind a flash.attention's tensor operands (the function is
/// in destination-passing style on memrefs).
struct OperandBuffers {
  Value q, k, v, out, lse; // lse null without an LSE result
  SmallVector<Value> captures;
  Value sinks; // [Hq], null without sinks
  // flash.paged_attention: k and v are the page pools, read through these.
  Value blockTable, seqLens;
  // flash.varlen_attention: the packed sequences' offsets.
  Value cuSeqlensQ, cuSeqlensK;
};
/// Reads them off the op, or emits why it cannot be lowered.
FailureOr<OperandBuffers> operandBuffers(AttentionOp op);
FailureOr<OperandBuffers> operandBuffers(PagedAttentionOp op);
FailureOr<OperandBuffers> operandBuffers(VarlenAttentionOp op);
/// The row-major memref `tensor` (operand `what` of `op`) is a view of, or
/// the diagnostic that the function is not in destination-passing style.
FailureOr<Value> deviceBuffer(Operation *op, Value tensor, StringRef what);

/// A new gpu.module for the op's kernels at the end of its module (`mb` is
/// left inside it), named after the first free `flash_attention_<n>`.
gpu::GPUModuleOp newKernelModule(OpBuilder &mb, Operation *op);
/// gpu.launch_func of `kernel` on a (gridX, gridY) grid, asynchronous on the
/// caller's `stream` (an !llvm.ptr). gridY is the batch·head axis (> 0):
/// past 65535 it continues in grid.z, and the kernel reads it with
/// batchHeadBlock.
void launchOnStream(ImplicitLocOpBuilder &b, gpu::GPUFuncOp kernel,
                    Value gridX, Value gridY, int64_t threads,
                    int64_t dynamicSmemBytes, ArrayRef<Value> args,
                    Value stream);
/// The current device's SM count at run time (at least 1), from the runtime
/// entry point the host module declares on first use (`anchor` is in it).
Value multiprocessorCount(ImplicitLocOpBuilder &b, Operation *anchor);
/// At least `n` i32 arrival counters for the next launch on `stream`, all
/// zero (an !llvm.ptr), from the runtime (flashRuntimeSplitCounters).
Value splitCounters(ImplicitLocOpBuilder &b, Operation *anchor, Value stream,
                    Value n);
/// The op's results (output, then lse) become tensor views of the buffers
/// it wrote.
void replaceWithDestinations(RewriterBase &rewriter, Operation *op,
                             const OperandBuffers &bufs);
/// The stream argument convert-flash-to-gpu gave the op's function.
Value streamArgument(Operation *op);

//===-- The strategies ----------------------------------------------------===//

/// One way to run the tile program on a family of chips.
class KernelStrategy {
public:
  virtual ~KernelStrategy() = default;
  /// The `kernel=` name.
  virtual StringRef name() const = 0;
  /// Whether this strategy takes `op` on `chip`; otherwise `why` says why.
  virtual bool supports(AttentionOp op, const ChipInfo &chip,
                        std::string &why) const = 0;
  /// Whether kernel=auto picks this strategy for `op` when it supports it;
  /// a strategy built for one regime (decode) declines the others.
  virtual bool autoSelects(AttentionOp op, const ChipInfo &chip) const {
    return true;
  }
  /// Replaces `op` (already checked with supports) by a kernel and its launch
  /// on the function's stream.
  virtual LogicalResult lower(RewriterBase &rewriter, AttentionOp op,
                              const OperandBuffers &bufs,
                              const GPUKernelOptions &options,
                              const ChipInfo &chip) const = 0;
};

const KernelStrategy &splitKVStrategy();
const KernelStrategy &wgmmaStrategy();
const KernelStrategy &mmaStrategy();
const KernelStrategy &portableStrategy();
/// In the order kernel=auto tries them.
ArrayRef<const KernelStrategy *> kernelStrategies();

//===-- WgmmaKernel.cpp ----------------------------------------------------===//

/// The wgmma kernel's decode form of an op: its key range split over CTAs
/// as the split-KV strategy splits it and, without a mask or score_mod, the
/// query heads of a K/V head packed into one tile's rows. Taken for a static
/// Lq of at most 64, or whenever split-kv is given.
struct WgmmaDecodeForm {
  int64_t group = 1; // query heads packed per K/V head (1: none)
  int64_t rows = 0;  // the kernel's rows per batch·head
};
std::optional<WgmmaDecodeForm> wgmmaDecodeForm(AttentionOp op,
                                               const GPUKernelOptions &options);
/// Whether kernel=auto gives a decode op to the wgmma kernel's decode form
/// rather than the split-KV kernel: on sm_90a, when the rows of several
/// query heads pack into its tiles (no mask or score_mod). Its warpgroup
/// reads each K/V tile from shared memory once, where each of the split
/// kernel's warps reads all of it, and TMA streams the tiles.
bool wgmmaDecodePreferred(AttentionOp op, const ChipInfo &chip);

/// The wgmma kernel's decode form reading a paged cache (sm_90a, bf16/f16,
/// static query heads, query length and K/V heads, pages of a multiple of
/// 16 keys), or why not.
bool wgmmaSupportsPaged(PagedAttentionOp op, const ChipInfo &chip,
                        std::string &why);
/// Whether kernel=auto reads a paged cache with the wgmma kernel rather than
/// the split-KV kernel (the rule of wgmmaDecodePreferred).
bool wgmmaPagedPreferred(PagedAttentionOp op, const ChipInfo &chip);
/// Lowers a flash.paged_attention with the wgmma kernel's decode form: the
/// query heads of a K/V head packed into a tile's rows, the key range split
/// over CTAs, each K/V tile loaded by TMA in boxes that do not cross a page.
LogicalResult lowerPagedToWgmmaLaunch(RewriterBase &rewriter,
                                      PagedAttentionOp op,
                                      const OperandBuffers &bufs,
                                      const GPUKernelOptions &options,
                                      const ChipInfo &chip);

/// Kernel arguments, in order: tmaQ, tmaK, tmaV, out, [lse] (!llvm.ptr),
/// lq, lk, hkv, batch sizes of Q (index), captures (memrefs); for a paged
/// op lk is the block table's capacity and the table (memref<?x?xi32>), the
/// lengths (memref<?xi32>) and the pool's page count (index) follow, tmaK
/// and tmaV describing the pools as [pages·page_size, Hkv, D]; for a varlen
/// op lq and lk are the token counts, the one batch size the query heads,
/// and the offsets (memref<?xi32>) follow.
/// With spec.splitKV: then the partial outputs and lse (!llvm.ptr, f32
/// [splits, rows, Dv] and [splits, rows]), the split count and the key tiles
/// per split (index); with spec.fusedCombine, then the arrival counters
/// (!llvm.ptr, i32 per (batch·head, query block), zero at launch and left
/// zero).
gpu::GPUFuncOp buildWgmmaKernel(OpBuilder &b, Location loc,
                                gpu::GPUModuleOp module,
                                const KernelConfig &cfg,
                                const KernelSpec &spec);

//===-- WgmmaLaunch.cpp: host pieces of the TMA kernels --------------------===//

/// A TMA descriptor (device pointer) for boxes of `rows` x 64 elements,
/// 128-byte swizzled, zeros past the tensor: of [batch·heads, L, D] (box
/// 1 x rows x 64), or with `packed` of a varlen batch's [tokens, heads, D]
/// (box rows x 1 x 64: the same rows x 64 tile in shared memory).
Value tmaDescriptor(ImplicitLocOpBuilder &b, Value m3, int64_t rows,
                    bool packed = false);
/// The same for boxes of shape `box` (one row of `swizzleBytes`, 128 or 64,
/// innermost, swizzled at that span) of any memref of rank 1 to 5.
Value tmaDescriptor(ImplicitLocOpBuilder &b, Value m, ArrayRef<int64_t> box,
                    int64_t swizzleBytes = 128);
/// The rank-3 tensors a kernel's TMA descriptors describe: `a` and `b3`, or,
/// when they have no row (`rows` = 0), `standIn` for both: a non-empty tensor
/// of their element type (a descriptor needs one), never read then. Its
/// inner dim need not be theirs: the box is the same 64 columns whatever
/// the tensor's. Sizes dynamic.
std::pair<Value, Value> tensorsOrStandIns(ImplicitLocOpBuilder &b, Value rows,
                                          Value standIn, Value a, Value b3);

//===-- MemrefLaunch.cpp: host side of the memref-argument kernels ---------===//

/// What the portable and mma.sync kernels are specialised on.
struct MemrefKernelSpec {
  int64_t d = 0, dv = 0, numBatchDims = 0, numCaptures = 0;
  // Query rows and heads, as the op states them (possibly dynamic); the
  // key rows of a flash.attention.
  int64_t lq = ShapedType::kDynamic, hq = 1, hkv = 1;
  int64_t lk = ShapedType::kDynamic;
  // > 0: flash.paged_attention; K/V rows are read through the block table
  // from pages of this many keys.
  int64_t pageSize = 0;
  // flash.varlen_attention: Q, K, V and O are packed [tokens, heads, D] and
  // each block finds its sequence through the offsets (varlenSequenceBlock).
  bool varlen = false;
  Type qElem, kElem, vElem, oElem;
  MaskAttr mask;
  bool hasLse = false;
  // The op has sinks: a memref<?xT> argument after the captures, merged
  // into each finished row (finishRow).
  bool hasSinks = false;
  double scale = 1.0;
  Region *scoreMod = nullptr; // not owned; inlined per element
  /// KernelSpec::indexBound's twin.
  int64_t indexBound() const {
    if (pageSize > 0 || varlen || ShapedType::isDynamic(lq) ||
        ShapedType::isDynamic(lk))
      return 0;
    return std::max(lq, lk);
  }
};
/// The spec, or why these kernels cannot take the op (dynamic head dims, an
/// element type other than f32/f16/bf16).
FailureOr<MemrefKernelSpec> memrefKernelSpec(AttentionOp op, std::string &why);
/// The spec of a paged op (static page size, head dims and head counts).
FailureOr<MemrefKernelSpec> memrefKernelSpec(PagedAttentionOp op,
                                             std::string &why);
/// The spec of a varlen op (static head dims; one batch dim, the heads).
FailureOr<MemrefKernelSpec> memrefKernelSpec(VarlenAttentionOp op,
                                             std::string &why);

/// The kernel function `name`, in the builder's gpu.module: workgroup
/// memory (16-byte aligned tiles) and private arrays as attributions, at
/// most `threads` threads per block.
gpu::GPUFuncOp createMemrefKernelFunc(ImplicitLocOpBuilder &b,
                                      ArrayRef<Type> argTypes,
                                      ArrayRef<Type> workgroup,
                                      ArrayRef<Type> privates, int64_t threads,
                                      StringRef name = "kernel");

/// A kernel's dynamic shared memory, carved into typed views at byte
/// offsets (each 16-byte aligned by the caller's layout).
struct DynamicSmem {
  Value base;
  gpu::AddressSpaceAttr space;
  explicit DynamicSmem(ImplicitLocOpBuilder &b);
  Value view(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape, Type type,
             int64_t offset) const;
};

/// [batch..., rest...] as [prod(batch), rest...] with the outer sizes (both
/// for a rank-2 [batch·heads, L] view) dynamic, so a kernel's signature
/// depends on the head dims only.
Value dynamicOuterView(ImplicitLocOpBuilder &b, Value m, int64_t nb);

/// Their kernel arguments, in order: q, k, v, out as [batch·heads, L, D]
/// memrefs with dynamic outer sizes, [lse as [batch·heads, Lq]], hkv (the
/// K/V head count), the query's batch sizes, the captures; for a paged op
/// k and v are the pools [?, page size, ?, D] and the block table
/// [?, ?] and lengths [?] (i32) follow; for a varlen op q, k, v and out are
/// the packed [?, ?, D] and the offsets [?] (i32) follow.
struct MemrefKernelArgs {
  Value q, k, v, out, lse, hkv;
  SmallVector<Value> batchSizes, captures;
  Value sinks;
  Value blockTable, seqLens;
  Value cuSeqlensQ, cuSeqlensK;
  MemrefKernelArgs(Block &entry, const MemrefKernelSpec &spec);
};

/// The host side's view of those arguments: `args` in the order above, and
/// the sizes the launch needs.
struct MemrefLaunchArgs {
  SmallVector<Value> args;
  Value hkv, bhCount, lq, lk; // K/V heads, prod(batch sizes of Q), lengths
                              // (a paged cache's lk: the table's capacity;
                              // a varlen batch's: the token counts)
  Value sequences;            // a varlen batch's B, else null
  Value sinks;                // the sinks' argument (also in args), or null
};
/// The kernel arguments of the op's buffers, built at `b`.
MemrefLaunchArgs memrefLaunchArgs(ImplicitLocOpBuilder &b,
                                  const OperandBuffers &bufs,
                                  const MemrefKernelSpec &spec);
/// `scf.if` (Lq > 0 and batch·heads > 0), `b` left inside it: there is
/// nothing to launch for an empty query, while an empty key still launches
/// (its rows write 0 and lse = -inf).
scf::IfOp ifNonEmptyQuery(ImplicitLocOpBuilder &b, const MemrefLaunchArgs &a);

using MemrefKernelBuilder = function_ref<gpu::GPUFuncOp(
    OpBuilder &, Location, gpu::GPUModuleOp, const MemrefKernelSpec &,
    ArrayRef<Type> argTypes)>;
/// Builds the kernel with `build` and replaces `op` by its launch: a grid of
/// (ceil(Lq / rowsPerBlock), batch·heads) blocks of `threads` threads; for
/// a varlen batch ceil(Tq / rowsPerBlock) + B query blocks (each sequence
/// ends in at most one partial block), heads.
LogicalResult lowerToMemrefLaunch(RewriterBase &rewriter, Operation *op,
                                  const OperandBuffers &bufs,
                                  const MemrefKernelSpec &spec,
                                  int64_t rowsPerBlock, int64_t threads,
                                  MemrefKernelBuilder build);

/// A strategy whose kernel takes Q, K, V and O as memrefs: the host side
/// above, a grid of (query blocks of `rowsPerBlock`, batch·heads).
class MemrefKernelStrategy : public KernelStrategy {
public:
  using Builder = gpu::GPUFuncOp (*)(OpBuilder &, Location, gpu::GPUModuleOp,
                                     const MemrefKernelSpec &,
                                     ArrayRef<Type> argTypes);
  MemrefKernelStrategy(int64_t rowsPerBlock, int64_t threads, Builder build)
      : rowsPerBlock(rowsPerBlock), threads(threads), build(build) {}
  LogicalResult lower(RewriterBase &rewriter, AttentionOp op,
                      const OperandBuffers &bufs,
                      const GPUKernelOptions &options,
                      const ChipInfo &chip) const final;

private:
  int64_t rowsPerBlock, threads;
  Builder build;
};

//===-- VarlenLaunch.cpp: packed varlen batches ---------------------------===//

/// Whether a kernel takes the varlen `op` on `chip` under `options` (wgmma
/// on sm_90a for D, Dv in {64, 128}, else mma.sync; kernel= may name
/// either); otherwise `why` says why.
bool varlenAttentionSupported(VarlenAttentionOp op,
                              const GPUKernelOptions &options,
                              const ChipInfo &chip, std::string &why);
/// Lowers a flash.varlen_attention with that kernel, each block finding its
/// sequence through the offsets, or emits why it cannot.
LogicalResult lowerVarlenAttention(RewriterBase &rewriter, VarlenAttentionOp op,
                                   const OperandBuffers &bufs,
                                   const GPUKernelOptions &options,
                                   const ChipInfo &chip);
/// The mma.sync kernel's part (MmaKernel.cpp): its rule and its launch.
bool mmaSupportsVarlen(VarlenAttentionOp op, const ChipInfo &chip,
                       std::string &why);
LogicalResult lowerVarlenToMmaLaunch(RewriterBase &rewriter,
                                     VarlenAttentionOp op,
                                     const OperandBuffers &bufs);
/// The wgmma kernel's part (WgmmaLaunch.cpp).
bool wgmmaSupportsVarlen(VarlenAttentionOp op, const ChipInfo &chip,
                         std::string &why);
LogicalResult lowerVarlenToWgmmaLaunch(RewriterBase &rewriter,
                                       VarlenAttentionOp op,
                                       const OperandBuffers &bufs,
                                       const GPUKernelOptions &options,
                                       const ChipInfo &chip);

//===-- SplitKV*.cpp: decode ----------------------------------------------===//

/// How the split-KV kernel lays out one op: the Lq · group query rows of a
/// K/V head packed as tile rows (r = q·group + head in group), 16-row
/// slices over `rowWarps` warps, each tile's keys over `keyWarps` warps.
struct SplitKVConfig {
  int64_t group = 1;     // query heads per K/V head
  int64_t lq = 0;        // static query length
  int64_t rows = 0;      // lq · group
  int64_t rowWarps = 1;  // 16-row slices per CTA
  int64_t keyWarps = 1;  // warps sharing the keys of a tile
  int64_t tileKeys = 64; // keys per ring stage
  int64_t stages = 3;    // ring depth
  int64_t rowsPerBlock() const { return 16 * rowWarps; }
  int64_t rowBlocks() const { return llvm::divideCeil(rows, rowsPerBlock()); }
  int64_t keysPerWarp() const { return tileKeys / keyWarps; }
  int64_t warps() const { return rowWarps * keyWarps; }
  int64_t threads() const { return 32 * warps(); }
  int64_t ringBytes(int64_t d, int64_t dv) const;
  int64_t mergeBytes(int64_t dv) const;
  /// Dynamic shared memory: the ring, reused for the warps' merge.
  int64_t smemBytes(int64_t d, int64_t dv) const;
};
/// The layout for an op of this spec, or why it has none (a dynamic Lq or
/// head count); `stages` > 0 sets the ring depth, else it is what fits two
/// CTAs per SM.
FailureOr<SplitKVConfig> splitKVConfig(const MemrefKernelSpec &spec,
                                       std::string &why, int64_t stages = 0);

/// The split kernel. Arguments: those of MemrefKernelArgs, then the
/// partial outputs [splits, bh·Lq, Dv] and lse [splits, bh·Lq] (f32), and
/// the key tiles per split. grid = (splits, K/V batch·heads · row blocks).
gpu::GPUFuncOp buildSplitKVKernel(OpBuilder &b, Location loc,
                                  gpu::GPUModuleOp module,
                                  const MemrefKernelSpec &spec,
                                  const SplitKVConfig &cfg,
                                  ArrayRef<Type> argTypes);
/// Where mergeSplitRow reads one row's split partials. A warp takes the
/// splits sub + wpr·k (sub = 0, wpr = 1: all of them) and its lanes the
/// columns lane + 32 i.
struct SplitRowSource {
  Value splits, sub, wpr, lane; // index
  int64_t dv = 0;
  /// The f32 lse (natural log) of split `s`, a valid split.
  llvm::function_ref<Value(ImplicitLocOpBuilder &, Value s)> loadLse;
  /// The f32 partial output of split `s` at column `col` (both valid).
  llvm::function_ref<Value(ImplicitLocOpBuilder &, Value s, Value col)>
      loadOut;
  /// A statistic over the warps that share the row (each warp's value
  /// already reduced over its lanes); the identity for a warp per row.
  llvm::function_ref<Value(Value, bool isMax)> rowReduce;
};
struct SplitRowMerge {
  MaxUpdate top; // the largest lse (log2 domain)
  Value total;   // the sum of the splits' weights 2^(lse - top)
  /// This warp's share of the weighted sum, per lane column: over all the
  /// row's warps it is O · total (finishRow(top.m, total) normalises).
  SmallVector<Value> acc;
};
/// The exact merge of one row's split partials by their LSE: the max and
/// weight sum with the lanes over the splits, then the weighted sum with the
/// lanes over the columns, the splits unrolled so their loads overlap. The
/// combine kernel and the wgmma decode form's last CTA both build it.
SplitRowMerge mergeSplitRow(ImplicitLocOpBuilder &b, const SplitRowSource &src);
/// Warps per CTA of the combine kernel.
constexpr int64_t kSplitKVCombineWarps = 4;
/// The combine kernel, named `combine`. Arguments: the partial outputs and
/// lse, out [bh, Lq, Dv], [lse [bh, Lq]], [sinks [Hq] (spec.hasSinks)], and
/// the warps per row (1, 2 or 4: a CTA serves 4 / that rows).
gpu::GPUFuncOp buildSplitKVCombineKernel(OpBuilder &b, Location loc,
                                         gpu::GPUModuleOp module,
                                         const MemrefKernelSpec &spec,
                                         ArrayRef<Type> argTypes);
/// The split-KV host side, shared by the split kernel and the wgmma kernel's
/// decode form: how many CTAs split each key range, the partials and the
/// combine.
///
/// The split count for `ctas` CTAs per split, `ctasPerSM` resident per SM
/// and `keyTiles` key tiles: from the device's SM count at run time, the
/// fewest splits whose last wave is nearly as full as the best choice's,
/// at least two tiles per split.
Value splitCount(ImplicitLocOpBuilder &b, Operation *anchor, Value ctas,
                 int64_t ctasPerSM, Value keyTiles);
struct SplitPlan {
  Value splits;        // after rounding: no split left without a tile
  Value tilesPerSplit; // whole key tiles per split
  Value multi;         // splits > 1: partials and the combine
};
SplitPlan planSplits(ImplicitLocOpBuilder &b, Value splits, Value keyTiles);
/// Partial outputs [splits, rows, Dv] and lse [splits, rows], f32: each
/// split's rows normalised over its keys, and those keys' log-sum-exp.
std::pair<MemRefType, MemRefType> splitPartialTypes(MLIRContext *ctx,
                                                    int64_t dv);
/// The combine kernel's argument types for an output (and lse) memref.
SmallVector<Type> splitCombineArgTypes(MLIRContext *ctx, int64_t dv, Type out,
                                       Type lse, Type sinks = Type());
struct SplitPartials {
  Value out, lse; // views of `buffer`
  Value buffer, token;
};
/// The partials, stream-ordered on the caller's stream (zero-sized unless
/// `multi`: one split writes the output itself).
SplitPartials allocSplitPartials(ImplicitLocOpBuilder &b, Value stream,
                                 Value splits, Value multi, Value rows,
                                 int64_t dv);
/// When `multi`, launches `combine` over the `rows` rows of `out` [bh, Lq,
/// Dv] (and `lse` [bh, Lq], or null; with `sinks` [Hq], or null, merged
/// into each row); then frees the partials.
void combineAndFreePartials(ImplicitLocOpBuilder &b, gpu::GPUFuncOp combine,
                            const SplitPartials &p, Value out, Value lse,
                            Value sinks, Value splits, Value multi, Value rows,
                            Value stream);
/// Frees the partials in stream order, after the launches before it.
void freeSplitPartials(ImplicitLocOpBuilder &b, const SplitPartials &p);

/// Replaces `op` (a flash.attention or flash.paged_attention) by the split
/// count's computation, the partials' buffers and the two launches.
LogicalResult lowerToSplitKVLaunch(RewriterBase &rewriter, Operation *op,
                                   const OperandBuffers &bufs,
                                   const MemrefKernelSpec &spec,
                                   const SplitKVConfig &cfg,
                                   const GPUKernelOptions &options,
                                   const ChipInfo &chip);

/// Lowers a flash.paged_attention through its block table with the kernel
/// options name (kernel=auto: the wgmma kernel where wgmmaPagedPreferred,
/// else the split-KV kernel), or emits why it cannot.
LogicalResult lowerPagedAttention(RewriterBase &rewriter, PagedAttentionOp op,
                                  const OperandBuffers &bufs,
                                  const GPUKernelOptions &options,
                                  const ChipInfo &chip);
/// Whether the kernel lowerPagedAttention picks takes `op` on `chip`;
/// otherwise `why` says why.
bool pagedAttentionSupported(PagedAttentionOp op,
                             const GPUKernelOptions &options,
                             const ChipInfo &chip, std::string &why);

//===-- Grad*.cpp: flash.attention_grad -----------------------------------===//

/// The memrefs behind a flash.attention_grad's tensor operands.
/// Whether every read of a capture in `scoreMod` is a top-level
/// tensor.extract, which the kernels turn into loads; otherwise emits why.
LogicalResult checkCaptureReads(Region &scoreMod, int64_t numBatchDims);

struct GradOperandBuffers {
  Value q, k, v, o, dO, lse;       // inputs
  SmallVector<Value> captures;     // the score_mod's, in order
  Value dq, dk, dv;                // destinations
  SmallVector<Value> captureGrads; // one per float capture, in order
};
/// Reads them off the op, or emits why it cannot be lowered.
FailureOr<GradOperandBuffers> gradOperandBuffers(AttentionGradOp op);

/// How the backward kernel lays out one op: a CTA owns `blockKeys` keys of
/// one K/V head and walks the query blocks of `blockQueries` rows of every
/// query head of its group. The mma.sync kernel (GradKernel.cpp) gives each
/// warp 16 keys; the wgmma kernel (GradWgmmaKernel.cpp) a producer
/// warpgroup and two consumer warpgroups of 64 keys each.
/// Keys per consumer warpgroup of the backward's wgmma kernel (its wgmma
/// M), and the side of a staged capture box there.
constexpr int64_t kGradWgKeys = 64;

/// A capture the backward's wgmma producer stages per step
/// (CaptureStaging.cpp): boxes of 64 keys by 64 query rows, each in the
/// part of the step's dSᵀ slot that the consumer warpgroup owning those
/// keys writes only after it has read the box, `offset` bytes into it.
/// Rows of 64 elements: the 128-byte swizzle for 16-bit elements, the
/// 64-byte one for bytes.
struct GradStagedCapture {
  StagedCapture read;
  int64_t offset = 0;
  int64_t rowBytes() const { return kGradWgKeys * read.elementBytes; }
  int64_t boxBytes() const { return kGradWgKeys * rowBytes(); }
};

struct GradKernelConfig {
  Type elem;                  // bf16 or f16
  int64_t d = 0, dv = 0;      // head dims
  int64_t blockKeys = 64;     // keys per CTA
  int64_t blockQueries = 64;  // query rows per step
  MaskAttr mask;
  double scale = 1.0;
  bool wgmma = false;         // the sm_90a kernel
  bool bulkReduceDq = false;  // dQ by bulk reductions (sm_90), else atomics
  bool deterministic = false; // those reductions in key-block order
  /// CTAs per key block, each owning D / colSplit columns of dK and dQ and
  /// Dv / colSplit of dV (heads wider than 128, whose dK and dV do not fit
  /// one CTA's registers); the mma.sync kernel only.
  int64_t colSplit = 1;
  /// With a score_mod: the region (not owned), whether each capture has a
  /// gradient, and the types of the kernels' trailing arguments for it
  /// (gradScoreModArgs).
  Region *scoreMod = nullptr;
  SmallVector<bool> captureHasGrad;
  SmallVector<Type> scoreModArgTypes;
  /// Whether captures may be staged in shared memory (stage-captures; the
  /// wgmma kernel), and those that are (lowerAttentionGrad, from the
  /// capture buffers' types): the kernel's last arguments are their TMA
  /// descriptors.
  bool stageCaptures = false;
  SmallVector<GradStagedCapture> staged;
  /// The larger of Lq and Lk where both are static (else 0): what bounds a
  /// score_mod's index arithmetic (KernelSpec::indexBound's twin).
  int64_t indexBound = 0;
  int64_t warps() const { return wgmma ? 12 : blockKeys / 16; }
  int64_t threads() const { return 32 * warps(); }
  /// Query-row padding of the f32 side buffers (lse·log2 e, rowsum(dO ∘ O),
  /// the dQ accumulator), so whole blocks are copied without bounds: a
  /// multiple of every kernel's blockQueries.
  static constexpr int64_t kRowPad = 128;
  int64_t smemBytes() const;
};
/// (CaptureStaging.cpp) The captures of `cfg`'s score_mod (of buffer types
/// `captureTypes`) the backward's wgmma kernel stages per step
/// (GradStagedCapture): 16-bit and 8-bit elements, as many as fit a warpgroup's
/// 8 KiB of the dSᵀ slot.
SmallVector<GradStagedCapture>
gradStageableCaptures(const GradKernelConfig &cfg, int64_t numBatchDims,
                      ArrayRef<MemRefType> captureTypes);
/// The layout for `op` under `options`, or why the backward kernel cannot
/// take it (the chip, element types, head dims, a score_mod).
FailureOr<GradKernelConfig> gradKernelConfig(AttentionGradOp op,
                                             const GPUKernelOptions &options,
                                             const ChipInfo &chip,
                                             std::string &why);

/// A score_mod's operands in a key-block kernel, its trailing arguments:
/// the captures' memrefs, the f32 gradient accumulator of each capture that
/// has a gradient (zeroed before the launch; null here for the others) and
/// the query's batch sizes (index), from which a step's batch·head gives
/// the region's batch indices.
struct GradScoreModArgs {
  Region *region = nullptr;
  SmallVector<Value> captures, grads, batchSizes;
};
GradScoreModArgs gradScoreModArgs(Block &entry, const GradKernelConfig &cfg);

/// Pᵀ and dSᵀ of a key-block kernel's score fragment (rows = keys,
/// columns = queries), one element at a time, shared by both kernels:
///   P  = 2^(score_mod(scale·S)·log2 e − lse·log2 e)  (the element mask
///        applied when `masked`),
///   dS = P ∘ (dP − delta) · d score_mod/dt,
/// and each float capture read's dS·∂score_mod/∂c gathered for flush().
class GradFragment {
public:
  /// `mod` null without a score_mod; `batchIdx` the step's batch indices.
  GradFragment(const GradKernelConfig &cfg, const GradScoreModArgs *mod,
               ArrayRef<Value> batchIdx, Value lq, Value lk, bool masked);
  struct Element {
    Value p, ds;
  };
  /// Element (key, query) with score s, dP value dp and its query's
  /// lse·log2 e and delta. `keySlot` and `querySlot` number the thread's
  /// distinct keys and queries: elements that share one share the index.
  /// `staged`, per capture, the element read from a staged tile (null: from
  /// the capture's buffer).
  Element element(ImplicitLocOpBuilder &b, Value s, Value dp, Value lse2,
                  Value delta, Value key, Value query, int64_t keySlot,
                  int64_t querySlot, ArrayRef<Value> staged = {});
  /// Whether this is the element-masked branch's fragment.
  bool isMasked() const { return masked; }
  /// Adds the gathered capture gradients to their accumulators, summed
  /// first over the elements that read one capture element (and over the
  /// warp where all of its lanes read the same one). The warp must be
  /// converged.
  void flush(ImplicitLocOpBuilder &b);

private:
  /// Whether (query, key) is visible: the query's constant offset against
  /// the queries the key sees past the query's base, built once per key
  /// slot and base (the thread's elements share both).
  Value visible(ImplicitLocOpBuilder &b, Value key, Value query,
                int64_t keySlot);

  const GradKernelConfig &cfg;
  const GradScoreModArgs *mod;
  SmallVector<Value> batchIdx;
  Value lq, lk;
  bool masked;
  struct KeySpan {
    Value base;
    VisibleSpan span;
  };
  DenseMap<int64_t, KeySpan> keySpans;
  struct Pending {
    unsigned capture;
    SmallVector<Value> indices;
    Value sum;
    bool wholeWarp;
  };
  SmallVector<std::pair<std::tuple<unsigned, int64_t, int64_t>, Pending>>
      pending;
};

/// A step's whole fragment of `n` elements: the element mask only under
/// `needsMask` (scf.if: the masked elements in its then branch), each
/// element from `element(frag, i)` with that branch's GradFragment, which is
/// flushed at the branch's end. Returns (Pᵀ, dSᵀ).
std::pair<SmallVector<Value>, SmallVector<Value>> buildGradFragment(
    ImplicitLocOpBuilder &b, const GradKernelConfig &cfg,
    const GradScoreModArgs *mod, ArrayRef<Value> batchIdx, Value lq, Value lk,
    Value needsMask, int64_t n,
    function_ref<GradFragment::Element(GradFragment &, int64_t)> element);

/// The key-block kernel, `kernel`. Arguments: q, k, v, do ([bh, L, D]
/// memrefs, dynamic outer sizes), lse·log2 e and delta = rowsum(dO ∘ O)
/// ([bh, Lq padded] f32), the dQ accumulator ([bh, Lq padded, D] f32, added
/// to atomically), dk, dv, the query heads per K/V head and the K/V
/// batch·head count, then with `deterministic` the per-(bh, query block)
/// turn counters ([bh, Lq padded] i32, zeroed by prep), then a score_mod's
/// (GradScoreModArgs). grid = (key blocks, K/V batch·heads).
gpu::GPUFuncOp buildGradKernel(OpBuilder &b, Location loc,
                               gpu::GPUModuleOp module,
                               const GradKernelConfig &cfg,
                               ArrayRef<Type> argTypes);
/// The sm_90a key-block kernel, `kernel`. Arguments (!llvm.ptr, then index):
/// TMA descriptors of q, k, v, do ([bh, L, D] views, boxes of
/// blockQueries / blockKeys rows), lse·log2 e, delta, the dQ accumulator,
/// dk, dv (as buildGradKernel's), then lq, lk, the padded row count, the
/// query heads per K/V head and the K/V batch·head count, then a
/// score_mod's (GradScoreModArgs). Same grid.
gpu::GPUFuncOp buildGradWgmmaKernel(OpBuilder &b, Location loc,
                                    gpu::GPUModuleOp module,
                                    const GradKernelConfig &cfg);
int64_t gradWgmmaSmemBytes(const GradKernelConfig &cfg);
/// The per-row preprocessing kernel, `prep`: delta, lse·log2 e (+inf for a
/// row that saw no key and for the padding, so its P is 0) and a zeroed dQ
/// accumulator. Arguments: o, do, lse, the two row buffers, the accumulator,
/// the batch·head count, [the turn counters, zeroed too]. grid = (padded
/// rows / 4, batch·heads).
gpu::GPUFuncOp buildGradPrepKernel(OpBuilder &b, Location loc,
                                   gpu::GPUModuleOp module,
                                   ArrayRef<Type> argTypes);
/// The dQ conversion, `dq`: dq = scale · accumulator in dq's element type.
/// Arguments: the accumulator, dq, the batch·head count.
/// grid = (ceil(Lq · D / kGradDqPerBlock), batch·heads).
constexpr int64_t kGradDqPerBlock = 4 * 128;
gpu::GPUFuncOp buildGradDqKernel(OpBuilder &b, Location loc,
                                 gpu::GPUModuleOp module, double scale,
                                 ArrayRef<Type> argTypes);
/// The rounding of a capture's f32 gradient, `round`: dst = src in dst's
/// element type, both flat [n]. grid = ceil(n / kRoundThreads) CTAs.
constexpr int64_t kRoundThreads = 256;
gpu::GPUFuncOp buildRoundKernel(OpBuilder &b, Location loc,
                                gpu::GPUModuleOp module,
                                ArrayRef<Type> argTypes);
/// Marks a kernel module whose query is of 16 bits or fewer: its scores
/// reach P and O through a 16-bit rounding, and its tanh may be the
/// hardware's.
constexpr llvm::StringLiteral kLowPrecisionOperandsAttr =
    "flash.low_precision_operands";
/// The kernels' f32 divisions and tanh, approximate (KernelMath.cpp).
void approximateKernelMath(gpu::GPUModuleOp module);
/// Lets the kernels' f32 multiplies and adds contract into FMAs
/// (KernelMath.cpp).
void contractKernelMath(gpu::GPUModuleOp module);

/// Replaces `op` by the side buffers and the three launches.
LogicalResult lowerAttentionGrad(RewriterBase &rewriter, AttentionGradOp op,
                                 const GradOperandBuffers &bufs,
                                 const GradKernelConfig &cfg);

} // namespace mlir::flash::gpu_lowering

#endif // FLASH_LIB_CONVERSION_FLASHTOGPU_KERNELSTRATEGIES_H
