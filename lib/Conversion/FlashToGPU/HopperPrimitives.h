//===- HopperPrimitives.h - TMA, mbarriers and wgmma for sm_90a kernels ---===//
//
// Thin builders over the NVVM ops (and the one inline-PTX instruction NVVM
// lacks) that the sm_90a strategy stages tiles and issues matmuls with, and
// the shared-memory map of its K/V ring.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_LIB_CONVERSION_FLASHTOGPU_HOPPERPRIMITIVES_H
#define FLASH_LIB_CONVERSION_FLASHTOGPU_HOPPERPRIMITIVES_H

#include "TileProgram.h"

namespace mlir::flash::gpu_lowering {

/// `base + bytes` on a shared-memory pointer (`bytes` is i64).
Value smemOffset(ImplicitLocOpBuilder &b, Value base, Value bytes);
Value smemOffset(ImplicitLocOpBuilder &b, Value base, int64_t bytes);

/// Declares the module's dynamic shared memory, `extern __shared__
/// __align__(1024) char flash_smem[]`; `b` at the end of the gpu.module body.
void declareSwizzledSmem(ImplicitLocOpBuilder &b);
/// That memory's base rounded up to 1024 B, the 128-byte swizzle's atom
/// (the launch requests 1 KiB of slack for it).
Value swizzledSmemBase(ImplicitLocOpBuilder &b);

void mbarInit(ImplicitLocOpBuilder &b, Value bar, int64_t count);
void mbarWait(ImplicitLocOpBuilder &b, Value bar, Value parityI32);
void mbarArrive(ImplicitLocOpBuilder &b, Value bar);
void mbarArriveExpectTx(ImplicitLocOpBuilder &b, Value bar, int64_t bytes);
/// One TMA box into shared memory, completing on `bar`; coordinates are
/// innermost first, i32.
void tmaLoad(ImplicitLocOpBuilder &b, Value dst, Value desc,
             ArrayRef<Value> coords, Value bar);

/// tid / 128 (index) broadcast from lane 0: the same value, but one that
/// ptxas knows is warp-uniform, so the descriptors and shared-memory
/// offsets derived from it stay in uniform registers.
Value uniformWarpgroupIndex(ImplicitLocOpBuilder &b, Value tid);

/// A wgmma shared-memory matrix descriptor for a 128B-swizzled tile, kept
/// as its two 32-bit words. Only the low word (start address >> 4, leading
/// byte offset) moves with the tile, slot and k16 step; the high word
/// (stride byte offset, swizzle) is a constant. Offsets are 32-bit adds to
/// the low word, which ptxas keeps in uniform registers where the address
/// is warp-uniform: built as one 64-bit value, every wgmma paid a 64-bit
/// add with carry and two moves into uniform registers (a quarter of the
/// tile loop's instructions, bench/NOTES run 68). The 14-bit address field
/// never carries into the next: shared memory ends below 2^18 bytes.
struct WgmmaDesc {
  Value lo;        // i32
  uint32_t hi = 0; // the constant high word
  /// The descriptor of the tile `bytes` (a multiple of 16) further on.
  WgmmaDesc plus(ImplicitLocOpBuilder &b, int64_t bytes) const;
  /// The same with an i32 count of 16-byte units.
  WgmmaDesc plusUnits(ImplicitLocOpBuilder &b, Value unitsI32) const;
  /// The i64 the wgmma instruction takes.
  Value value(ImplicitLocOpBuilder &b) const;
};
/// The descriptor of the tile at `ptr` (lbo/sbo in bytes).
WgmmaDesc wgmmaDescriptor(ImplicitLocOpBuilder &b, Value ptr, int64_t lboBytes,
                          int64_t sboBytes);
/// An accumulator of m64nN f32: a struct of N/2 f32 per thread.
LLVM::LLVMStructType accType(MLIRContext *ctx, int64_t n);
/// acc (+)= A·B with A and B in shared memory (m64nNk16), K-major unless
/// transposed (MN-major: A stored [k][m], B stored [k][n]).
Value wgmmaSS(ImplicitLocOpBuilder &b, Value acc, const WgmmaDesc &descA,
              const WgmmaDesc &descB, int64_t n, Type elemType, bool accumulate,
              bool transA = false, bool transB = false);
/// acc += A·B with A in registers (four packed i32) and B MN-major in shared
/// memory (m64nNk16). NVVM has no op for register A, so this is inline PTX.
Value wgmmaRS(ImplicitLocOpBuilder &b, Value acc, ArrayRef<Value> aRegs,
              const WgmmaDesc &descB, int64_t n, Type elemType);
void wgmmaFence(ImplicitLocOpBuilder &b);
/// One PTX statement with side effects, for the instructions NVVM has no op
/// for (bulk copies and reductions, proxy fences).
void inlinePtx(ImplicitLocOpBuilder &b, StringRef text, ValueRange operands,
               StringRef constraints);
/// Orders this thread's generic-proxy shared-memory writes before the async
/// proxy's reads (wgmma operands, bulk copies out of shared memory).
void fenceProxyAsyncShared(ImplicitLocOpBuilder &b);
/// A shared-memory pointer as the 32-bit address PTX's shared operands take.
Value sharedAddress32(ImplicitLocOpBuilder &b, Value ptr);
/// Passes an accumulator through an empty asm statement so that LLVM cannot
/// move reads of its registers above a preceding wgmma wait.
Value fenceRegisters(ImplicitLocOpBuilder &b, Value acc);

} // namespace mlir::flash::gpu_lowering

#endif // FLASH_LIB_CONVERSION_FLASHTOGPU_HOPPERPRIMITIVES_H
