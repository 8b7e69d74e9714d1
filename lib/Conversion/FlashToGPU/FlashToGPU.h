//===- FlashToGPU.h - internals shared by the flash.attention GPU lowering ===//
//
// The kernel is assembled from a few builders, one file each: the TMA/mbarrier
// ring and wgmma wrappers (Pipeline.cpp), the online softmax on accumulator
// registers (Softmax.cpp), the kernel skeleton with its warpgroup roles
// (KernelBuilder.cpp) and the host-side launch (HostLaunch.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_LIB_CONVERSION_FLASHTOGPU_FLASHTOGPU_H
#define FLASH_LIB_CONVERSION_FLASHTOGPU_FLASHTOGPU_H

#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::flash::gpu_lowering {

/// Tunables of the kernel (the pass options).
struct KernelConfig {
  int64_t blockM = 128;
  int64_t blockN = 128;
  int64_t consumerWarpgroups = 2;
  int64_t stages = 2; // 0: automatic
  bool splitPV = false;
  bool overlap = false;
  int64_t deferPV = 0; // -1: automatic, then 0 or 1
  bool pingpong = false;
  int64_t producerRegs = 24;
  int64_t consumerRegs = 240;
  int64_t ctasPerSM = 1;
  int64_t threads() const { return 128 * (1 + consumerWarpgroups); }
};

/// What one kernel is specialised on, read off a flash.attention.
struct KernelSpec {
  Type elemType;            // bf16 or f16 (Q, K, V and O)
  int64_t headDim = 0;      // D
  int64_t valueDim = 0;     // Dv
  int64_t numBatchDims = 0; // leading dims of Q, collapsed into one grid dim
  MaskAttr mask;            // null or none: no structured mask
  bool hasLse = false;
  double scale = 1.0;
  Region *scoreMod = nullptr;          // not owned; cloned per element
  SmallVector<MemRefType> captureTypes; // memref twins of the captures
  bool hasMask() const { return mask && !mask.isNone(); }
};

/// Shared-memory map, byte offsets from a 1024-byte aligned base. Tiles are
/// stored as 64-column panels ([rows][64] elements, 128 B rows) because the
/// 128-byte swizzle that TMA writes and wgmma reads spans 128 B.
struct SmemLayout {
  int64_t qBytes, kBytes, vBytes, stageBytes;
  int64_t barOff; // mbarriers: qFull, kvFull[stages], kvEmpty[stages]
  int64_t total;  // bytes to request, with 1 KiB slack to align the base
  SmemLayout(const KernelConfig &cfg, const KernelSpec &spec);
  int64_t kOff(int64_t s) const { return qBytes + s * stageBytes; }
  int64_t vOff(int64_t s) const { return kOff(s) + kBytes; }
  int64_t qFullOff() const { return barOff; }
  int64_t kvFullOff(int64_t s) const { return barOff + 8 + 8 * s; }
  int64_t kvEmptyOff(int64_t s, int64_t stages) const {
    return barOff + 8 + 8 * stages + 8 * s;
  }
};

//===-- Pipeline.cpp: TMA, mbarriers, wgmma ------------------------------===//

Value constI32(ImplicitLocOpBuilder &b, int64_t v);
Value constI64(ImplicitLocOpBuilder &b, int64_t v);
Value constIdx(ImplicitLocOpBuilder &b, int64_t v);
Value constF32(ImplicitLocOpBuilder &b, double v);
Value toI32(ImplicitLocOpBuilder &b, Value index);
Value toI64(ImplicitLocOpBuilder &b, Value index);

/// `base + bytes` on a shared-memory pointer (`bytes` is i64).
Value smemOffset(ImplicitLocOpBuilder &b, Value base, Value bytes);
Value smemOffset(ImplicitLocOpBuilder &b, Value base, int64_t bytes);

void mbarInit(ImplicitLocOpBuilder &b, Value bar, int64_t count);
void mbarWait(ImplicitLocOpBuilder &b, Value bar, Value parityI32);
void mbarArrive(ImplicitLocOpBuilder &b, Value bar);
void mbarArriveExpectTx(ImplicitLocOpBuilder &b, Value bar, int64_t bytes);
/// One TMA box into shared memory, completing on `bar`; coordinates are
/// innermost first, i32.
void tmaLoad(ImplicitLocOpBuilder &b, Value dst, Value desc,
             ArrayRef<Value> coords, Value bar);

/// wgmma shared-memory matrix descriptor for a 128B-swizzled tile at `ptr`
/// (lbo/sbo in bytes).
Value wgmmaDescriptor(ImplicitLocOpBuilder &b, Value ptr, int64_t lboBytes,
                      int64_t sboBytes);
/// An accumulator of m64nN f32: a struct of N/2 f32 per thread.
LLVM::LLVMStructType accType(MLIRContext *ctx, int64_t n);
/// acc (+)= A·B with A and B K-major in shared memory (m64nNk16).
Value wgmmaSS(ImplicitLocOpBuilder &b, Value acc, Value descA, Value descB,
              int64_t n, Type elemType, bool accumulate);
/// acc += A·B with A in registers (four packed i32) and B MN-major in shared
/// memory (m64nNk16). NVVM has no op for register A, so this is inline PTX.
Value wgmmaRS(ImplicitLocOpBuilder &b, Value acc, ArrayRef<Value> aRegs,
              Value descB, int64_t n, Type elemType);
void wgmmaFence(ImplicitLocOpBuilder &b);
/// Passes an accumulator through an empty asm statement so that LLVM cannot
/// move reads of its registers above a preceding wgmma wait.
Value fenceRegisters(ImplicitLocOpBuilder &b, Value acc);
void wgmmaCommitAndWait(ImplicitLocOpBuilder &b, int64_t pending);

//===-- Softmax.cpp: online softmax on the accumulator registers ----------===//

/// Accumulator element `i` of an m64nN fragment sits at row
/// 16·warp + lane/4 + 8·((i/2)%2) and column 8·(i/4) + 2·(lane%4) + i%2.
inline int64_t fragRowHalf(int64_t i) { return (i / 2) % 2; }
inline int64_t fragColBase(int64_t i) { return 8 * (i / 4) + i % 2; }

/// Per-thread running state of its two rows (log2 domain).
struct RowState {
  Value m[2]; // running max of the log2-scaled scores
  Value l[2]; // this thread's partial row sums (quad-reduced at the end)
};

/// Hooks the kernel gives the softmax: the score in natural units
/// (scale·q·k) goes through `scoreMod` (may be null) and the per-element
/// `allowed` predicate (may be null: everything allowed).
struct ScoreContext {
  Value rowIdx[2];         // global query row of each half (index)
  Value colBase;           // global key column of the fragment's column 0
  Value laneCol;           // 2·(lane%4), index
  bool needsMask = false;  // tails or structured mask present
  std::function<Value(ImplicitLocOpBuilder &, Value, Value)> allowed;
  std::function<Value(ImplicitLocOpBuilder &, Value, Value, Value)> scoreMod;
};

/// Turns the raw QKᵀ accumulator values `s` into probabilities p (in place),
/// updates `st` and returns the per-row rescale factors alpha.
std::array<Value, 2> onlineSoftmaxStep(ImplicitLocOpBuilder &b,
                                       SmallVectorImpl<Value> &s, RowState &st,
                                       double scale, const ScoreContext &ctx);
/// Quad (4-lane) butterfly reduction.
Value quadReduce(ImplicitLocOpBuilder &b, Value v, bool isMax);
/// Packs probabilities (accumulator layout) into wgmma register-A fragments:
/// four i32 (two 16-bit values each) per k16 block.
SmallVector<Value> packA(ImplicitLocOpBuilder &b, ArrayRef<Value> p,
                         Type elemType);

//===-- KernelBuilder.cpp ------------------------------------------------===//

/// Kernel arguments, in order: tmaQ, tmaK, tmaV, out, [lse] (!llvm.ptr),
/// lq, lk, hkv, batch sizes of Q (index), captures (memrefs).
gpu::GPUFuncOp buildAttentionKernel(OpBuilder &b, Location loc,
                                    gpu::GPUModuleOp module,
                                    const KernelConfig &cfg,
                                    const KernelSpec &spec);

//===-- HostLaunch.cpp ---------------------------------------------------===//

/// The memrefs behind a flash.attention's tensor operands (the function is
/// in destination-passing style on memrefs).
struct OperandBuffers {
  Value q, k, v, out, lse; // lse null without an LSE result
  SmallVector<Value> captures;
};
/// Reads them off the op, or emits why it cannot be lowered.
FailureOr<OperandBuffers> operandBuffers(AttentionOp op);

/// Replaces `op` by the sm_90a kernel's launch on `stream` (an !llvm.ptr).
LogicalResult lowerToLaunch(AttentionOp op, const OperandBuffers &bufs,
                            const KernelConfig &cfg, Value stream,
                            int64_t kernelIndex);
/// A new gpu.module for the op's kernel at the end of its module (`mb` is
/// left inside it).
gpu::GPUModuleOp newKernelModule(OpBuilder &mb, AttentionOp op,
                                 int64_t kernelIndex);
/// gpu.launch_func of `kernel` on a (gridX, gridY) grid, asynchronous on the
/// caller's `stream` (an !llvm.ptr).
void launchOnStream(ImplicitLocOpBuilder &b, gpu::GPUFuncOp kernel,
                    Value gridX, Value gridY, int64_t threads,
                    int64_t dynamicSmemBytes, ArrayRef<Value> args,
                    Value stream);
/// The op's results become tensor views of the buffers it wrote.
void replaceWithDestinations(AttentionOp op, const OperandBuffers &bufs);

//===-- KernelIndexing.cpp: what both kernels compute the same way -------===//

struct HeadIndices {
  Value kvbh;                  // K/V batch·head of this query batch·head
  SmallVector<Value> batchIdx; // bh delinearised over the query batch dims
};
/// `bh` indexes the query's collapsed batch dims (sizes `batchSizes`, the
/// last one heads); K/V have `hkv` heads (grouped-query attention).
HeadIndices headIndices(ImplicitLocOpBuilder &b, Value bh,
                        ArrayRef<Value> batchSizes, Value hkv,
                        bool withBatchIndices);
/// [begin, end) in units of `tileRows` keys: the tiles that query rows
/// [q0, q0 + blockRows) can see under `mask` (null or none: all of them).
std::pair<Value, Value> visibleTileRange(ImplicitLocOpBuilder &b, MaskAttr mask,
                                         Value q0, int64_t blockRows, Value lq,
                                         Value lk, int64_t tileRows);
/// The score_mod region applied to one score, with its indices; captures
/// are the memrefs of the op's captures.
Value inlineScoreMod(ImplicitLocOpBuilder &b, Region &scoreMod, Value score,
                     ArrayRef<Value> batchIdx, Value row, Value col,
                     ArrayRef<Value> captures);
/// [b..., rest...] -> [prod(b), rest...] ([1, rest...] without batch dims).
Value collapseBatchDims(ImplicitLocOpBuilder &b, Value m, int64_t nb);

//===-- MemrefLaunch.cpp: host side of the memref-argument kernels ---------===//

/// What the portable and mma.sync kernels are specialised on.
struct MemrefKernelSpec {
  int64_t d = 0, dv = 0, numBatchDims = 0, numCaptures = 0;
  Type qElem, kElem, vElem, oElem;
  MaskAttr mask;
  bool hasLse = false;
  double scale = 1.0;
  Region *scoreMod = nullptr; // not owned; inlined per element
};
FailureOr<MemrefKernelSpec> memrefKernelSpec(AttentionOp op);

/// Their kernel arguments, in order: q, k, v, out as [batch·heads, L, D]
/// memrefs with dynamic outer sizes, [lse as [batch·heads, Lq]], hkv (the
/// K/V head count), the query's batch sizes, the captures.
struct MemrefKernelArgs {
  Value q, k, v, out, lse, hkv;
  SmallVector<Value> batchSizes, captures;
  MemrefKernelArgs(Block &entry, const MemrefKernelSpec &spec);
};

using MemrefKernelBuilder = function_ref<gpu::GPUFuncOp(
    OpBuilder &, Location, gpu::GPUModuleOp, const MemrefKernelSpec &,
    ArrayRef<Type> argTypes)>;
/// Builds the kernel with `build` and replaces `op` by its launch: a grid of
/// (ceil(Lq / rowsPerBlock), batch·heads) blocks of `threads` threads.
LogicalResult lowerToMemrefLaunch(AttentionOp op, const OperandBuffers &bufs,
                                  Value stream, int64_t kernelIndex,
                                  const MemrefKernelSpec &spec,
                                  int64_t rowsPerBlock, int64_t threads,
                                  MemrefKernelBuilder build);

//===-- PortableKernel.cpp -------------------------------------------------===//

/// Whether the sm_90a wgmma kernel takes this op (element type, head dims).
bool wgmmaKernelSupports(AttentionOp op, std::string *why = nullptr);
/// Replaces `op` (whose operands are views of the memrefs given) by a launch
/// of the portable kernel on `stream`: any chip, any static head dims, f32,
/// f16 or bf16, scalar f32 arithmetic without tensor cores.
LogicalResult lowerToPortableLaunch(AttentionOp op, const OperandBuffers &bufs,
                                    Value stream, int64_t kernelIndex);

//===-- MmaKernel.cpp ------------------------------------------------------===//

/// Whether the mma.sync kernel takes this op (bf16 or f16 Q/K/V, D a
/// multiple of 16 and Dv of 8, both up to 256).
bool mmaKernelSupports(AttentionOp op, std::string *why = nullptr);
/// Replaces `op` by a launch of the mma.sync (sm_80+) tensor-core kernel.
LogicalResult lowerToMmaLaunch(AttentionOp op, const OperandBuffers &bufs,
                               Value stream, int64_t kernelIndex);

} // namespace mlir::flash::gpu_lowering

#endif // FLASH_LIB_CONVERSION_FLASHTOGPU_FLASHTOGPU_H
