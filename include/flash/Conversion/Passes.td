//===- Passes.td - flash conversion passes -----------------*- tablegen -*-===//
#ifndef FLASH_CONVERSION_PASSES
#define FLASH_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertFlashToGPUPass : Pass<"convert-flash-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower flash.attention to a Hopper flash-attention kernel and its launch";
  let description = [{
    Replaces every `flash.attention` with a `gpu.launch_func` of a kernel
    built for its configuration (element type, head dims, mask, score_mod,
    LSE) in a new `gpu.module`.

    The kernel (sm_90a) runs one CTA per (batch·head, query block): a
    producer warpgroup streams K/V tiles through a `stages`-deep shared-memory
    ring with TMA and mbarriers; `warpgroups` consumer warpgroups each own 64
    query rows, compute S = QKᵀ with wgmma from shared memory, run the online
    softmax on the accumulator registers (exp2, log2 e folded into the
    scale, score_mod inlined per element with its indices, causal/window
    tiles skipped, tails masked), and accumulate O += PV with wgmma taking P
    from registers.

    The host side expects destination-passing style on memrefs: q, k, v,
    captures and the inits must be `bufferization.to_tensor` of memrefs
    (identity layout, device memory); the output is written into the init's
    memref, and a `bufferization.materialize_in_destination` of the result
    into that memref is dropped. The enclosing function gets one more
    argument, `%stream: !llvm.ptr`, and every launch is asynchronous on it.

    Before:
    ```mlir
    func.func @attn(%q: memref<2x4x100x64xbf16>, %k: memref<2x4x70x64xbf16>,
                    %v: memref<2x4x70x64xbf16>, %o: memref<2x4x100x64xbf16>) {
      %qt = bufferization.to_tensor %q restrict : ...
      ...
      %r = flash.attention ins(%qt, %kt, %vt : ...) outs(%ot : ...) scale(0.125) -> ...
      bufferization.materialize_in_destination %r in restrict writable %o : ...
      return
    }
    ```
    Ops the wgmma kernel does not take (other chips, head dims other than
    64/128, f32 or mixed element types) get, with `kernel=auto` (the
    default), the mma.sync kernel where it applies (sm_80 and newer,
    bf16/f16, D a multiple of 16 and Dv of 8 up to 256: FlashAttention-2's
    structure, four warps of 16 query rows, the same online softmax on the
    accumulator registers), else the portable kernel (one thread per query
    row, K/V tiles staged in shared memory, the online softmax in f32 on the
    CUDA cores).

    After: `nvgpu.tma.create.descriptor` for Q, K, V and
    `gpu.launch_func async [%stream] @flash_attention_0::@kernel` in
    `@attn(..., %stream: !llvm.ptr)`.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "Target chip (sm_XY); the wgmma kernel needs sm_90a">,
    Option<"kernel", "kernel", "std::string", /*default=*/"\"auto\"",
           "Which kernel: wgmma (sm_90a tensor cores; an error where it "
           "does not apply), mma (mma.sync tensor cores, sm_80 and newer, "
           "bf16/f16, head dims multiples of 16 up to 256), portable (any "
           "chip, head dim and float type; no tensor cores), or auto (wgmma "
           "where it applies, else mma where it applies, else portable)">,
    Option<"blockM", "block-m", "int64_t", /*default=*/"0",
           "Query rows per CTA (64 per consumer warpgroup); 0: 64 when "
           "D, Dv <= 64 (two CTAs per SM), else 128">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"128",
           "Key/value rows per tile (multiple of 16, at most 256)">,
    Option<"warpgroups", "warpgroups", "int64_t", /*default=*/"0",
           "Consumer warpgroups per CTA (block-m / 64); 0: block-m / 64">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Depth of the K/V shared-memory ring; 0: 3 with defer-pv or "
           "overlap, else 2">,
    Option<"splitPV", "split-pv", "bool", /*default=*/"false",
           "Issue PV as 64-column wgmmas instead of one Dv-wide wgmma">,
    Option<"overlap", "overlap", "bool", /*default=*/"false",
           "Software-pipeline the tile loop: QK of the next tile runs during "
           "the softmax of this one (needs stages >= 3)">,
    Option<"deferPV", "defer-pv", "int64_t", /*default=*/"-1",
           "Issue PV of the previous tile right behind QK of this one, so "
           "that it runs during this tile's softmax (needs stages >= 3): "
           "1 on, 0 off, -1 automatic (on when D or Dv > 64, no overlap, "
           "stages 0 or >= 3, and three stages fit in shared memory)">,
    Option<"pingpong", "pingpong", "bool", /*default=*/"false",
           "Consumer warpgroups take turns issuing their GEMMs (named "
           "barriers), so one's softmax overlaps the other's GEMMs; no "
           "effect with one consumer warpgroup">,
    Option<"producerRegs", "producer-regs", "int64_t", /*default=*/"24",
           "setmaxnreg for the producer warpgroup (0: leave alone)">,
    Option<"consumerRegs", "consumer-regs", "int64_t", /*default=*/"240",
           "setmaxnreg for the consumer warpgroups (0: leave alone)">,
    Option<"ctasPerSM", "ctas-per-sm", "int64_t", /*default=*/"0",
           "CTAs per SM the register cap at entry must allow (launch "
           "bounds); 0: 2 with one consumer warpgroup, else 1">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // FLASH_CONVERSION_PASSES
