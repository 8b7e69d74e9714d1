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

    The kernels are strategies of one attention tile program (the walk
    over visible K/V tiles, the online softmax, score_mod and mask, the
    epilogue); the pass applies one pattern per strategy
    (`populateFlashToGPUPatterns`), the first whose legality check takes
    the op (or the one `kernel=` names). Its options, shared with
    `flash-gpu-pipeline`, are declared once in
    `include/flash/Conversion/GPUKernelOptions.def` (`--help` lists them):
    chip, kernel, block-m, block-n, warpgroups, stages, split-pv, overlap,
    defer-pv, pingpong, persistent, producer-regs, consumer-regs, ctas-per-sm.

    After: `nvgpu.tma.create.descriptor` for Q, K, V and
    `gpu.launch_func async [%stream] @flash_attention_0::@kernel` in
    `@attn(..., %stream: !llvm.ptr)`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
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
