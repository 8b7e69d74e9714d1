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

def FlashGPUFunctionBoundaryPass
    : Pass<"flash-gpu-function-boundary", "::mlir::ModuleOp"> {
  let summary = "Give functions on tensors a boundary of device buffers and "
                "a stream, and every flash op's operands device buffers";
  let description = [{
    The first step of a whole function on the GPU (flash-gpu-pipeline runs
    it after the raise). In each `func.func` whose arguments or results are
    tensors:

    - a tensor argument becomes a memref of the same shape (identity
      layout, device memory), read through `bufferization.to_tensor
      restrict` (not writable: the caller's inputs are never written);
    - a tensor result becomes a trailing memref argument that the caller
      allocates, written with `bufferization.materialize_in_destination`;
      other results stay results;
    - the caller's stream is appended (`!llvm.ptr {flash.stream}`) and the
      function gets `llvm.emit_c_interface`.

    Then, in every function, a flash op whose result is materialized in a
    caller's buffer writes into it (flash-attention-into-destination), and
    each other tensor operand of a flash op that is not yet a view of a
    buffer gets one: a `memref.alloc` filled by `materialize_in_destination`
    (an init that is a `tensor.empty` is not filled), viewed with
    `to_tensor restrict`. That is the form convert-flash-to-gpu lowers. In a
    device function, `tensor.from_elements` of host scalars (a sequence
    length a score_mod captures) becomes a linalg.generic, so that a kernel
    writes it into device memory.

    A function on tensors that is called in the module is refused (its
    callers pass tensors); unranked tensors and tensors with an encoding
    are refused.

    ```mlir
    func.func @f(%q: tensor<8x64x32xbf16>, %k: tensor<8x80x32xbf16>,
                 %v: tensor<8x80x32xbf16>) -> tensor<8x64x32xbf16>
    // becomes
    func.func @f(%q: memref<8x64x32xbf16>, %k: memref<8x80x32xbf16>,
                 %v: memref<8x80x32xbf16>, %out: memref<8x64x32xbf16>,
                 %stream: !llvm.ptr {flash.stream}) attributes {llvm.emit_c_interface}
    ```
  }];
  let dependentDialects = [
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def FlashMapLoopsToGridPass
    : Pass<"flash-map-loops-to-grid", "::mlir::func::FuncOp"> {
  let summary = "Map each outermost host scf.parallel to a 1-D grid of "
                "blocks and threads";
  let description = [{
    Each outermost `scf.parallel` that is not mapped yet is collapsed to
    one dimension, tiled by `block-size`, and the tile loop mapped to
    `block_x`, the loop within a tile to `thread_x` (attributes of
    `gpu-map-parallel-loops`): one thread per point of the parallel
    iteration space, any rank and size, reductions sequential within a
    thread. `convert-parallel-loops-to-gpu` then turns them into
    `gpu.launch`. flash-gpu-pipeline runs it on what bufferization and
    `convert-linalg-to-parallel-loops` made of the ops around an attention.
    A parallel loop with reduction results is refused.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "threads per block">,
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::arith::ArithDialect",
  ];
}

def FlashGPUStreamOrderPass
    : Pass<"flash-gpu-stream-order", "::mlir::func::FuncOp"> {
  let summary = "Order a device function's allocations and launches on its "
                "stream argument";
  let description = [{
    In a function with a `flash.stream` argument (flash-gpu-function-boundary
    or convert-flash-to-gpu added it): `memref.alloc` / `memref.dealloc`
    become `gpu.alloc` / `gpu.dealloc` and synchronous `gpu.launch_func`
    become asynchronous, all depending on the stream (as the attention
    launches do), so every kernel of the function runs in order on the
    caller's stream and nothing waits on the host. An allocation without a
    dealloc (bufferization leaves them to a deallocation pass, whose
    ownership analysis refuses TMA descriptors and launches) is freed at the
    end of its block, after every kernel queued before. A constant global
    (bufferization's home for dense constants) is in host memory: the
    kernels get a device copy made with `gpu.memcpy` on the stream. A load,
    store or copy of
    a memref left in the host code would read device memory there and is
    an error naming the op. Runs after `gpu-kernel-outlining`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def FlashSpecializeKernelConstantsPass
    : Pass<"flash-specialize-kernel-constants", "::mlir::ModuleOp"> {
  let summary = "Fold the constant integer operands of a kernel's only "
                "launch into the kernel";
  let description = [{
    A kernel takes its sizes (sequence lengths, head and batch counts) as
    arguments, so that one body serves static and dynamic shapes alike; for
    a static shape the launch passes constants. Where a `gpu.func` has
    exactly one `gpu.launch_func` and every use of its symbol is that
    launch, each integer or index argument the launch passes as a constant
    is replaced in the kernel body by that constant (the signature and the
    launch are unchanged). The kernel's index arithmetic then folds as a
    compiler's specialization on constants does: divisions by a length
    become multiplies, tile counts and trip counts constants, and values
    that were live across a loop (and spilled) immediates. A kernel
    launched from two places keeps its arguments, and so does an argument
    only known at run time. flash-gpu-pipeline runs it after the launches are
    outlined and canonicalized, before the NVVM lowering.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
  ];
}

def FlashTensorMapKernelParamsPass
    : Pass<"flash-tensormap-kernel-params", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Pass each TMA descriptor to a kernel by value, as a "
                "grid-constant parameter";
  let description = [{
    Runs on kernels already lowered to NVVM (`llvm.func` with
    `nvvm.kernel`). A kernel pointer argument whose every use is the
    tensor-map operand of a TMA op (`nvvm.cp.async.bulk.tensor.*`,
    `nvvm.prefetch tensormap`) becomes a 128-byte by-value parameter
    (`llvm.byval = !llvm.array<16 x i64>`, `llvm.align = 64`,
    `nvvm.grid_constant`), as CUDA's `__grid_constant__ const CUtensorMap`:
    the kernel addresses the map in parameter space, so the host passes its
    bytes in the launch and nothing is uploaded to device memory, cached or
    kept alive for a CUDA graph. The runtime (lib/Runtime) tells such a
    parameter from a pointer by the sizes the driver reports. Arguments
    with any other use keep their pointer. flash-gpu-pipeline runs it
    between the kernels' NVVM lowering and their serialization.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
  ];
}

#endif // FLASH_CONVERSION_PASSES
