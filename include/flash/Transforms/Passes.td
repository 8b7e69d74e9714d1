//===- Passes.td - flash transformation passes -------------*- tablegen -*-===//
#ifndef FLASH_TRANSFORMS_PASSES
#define FLASH_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FlashDecomposeAttentionPass : Pass<"flash-decompose-attention"> {
  let summary = "Lower flash.attention to unfused linalg (the reference)";
  let description = [{
    Rewrites every `flash.attention` into the computation it stands for,
    materialising the full score matrix: a contraction for `scale * Q Kᵀ`,
    one elementwise generic applying `score_mod` and the mask, a softmax
    (max, exp, sum, guarded so that a fully masked row gives zeros), and a
    contraction with V. It defines the op's meaning executably: every fused
    lowering is checked against it. It is O(L²) in memory by construction.

    Grouped-query K/V are broadcast to the query's heads first. The indices
    the score_mod and mask see include a tile's `offsets`, and a bottom-right
    mask aligns to its `query_len`.

    `flash.attention_grad` is decomposed the same way: the scores and P are
    recomputed from the saved log-sum-exp, then dV = Pᵀ dO, dP = dO Vᵀ,
    dS = P (dP - rowsum(dO ∘ O)), the score_mod's derivative, dQ, dK and the
    capture gradients as contractions and reductions over the score matrix.

    Before:
    ```mlir
    %o = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>,
             tensor<4x70x64xf32>, tensor<4x70x48xf32>)
           outs(%init : tensor<4x100x48xf32>) scale(0.125)
           -> tensor<4x100x48xf32>
    ```
    After: `linalg.generic` contractions and reductions over a
    `tensor<4x100x70xf32>` score matrix.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FlashUnpageAttentionPass : Pass<"flash-unpage-attention"> {
  let summary = "Lower flash.paged_attention to a gather of its pages and a "
                "flash.attention";
  let description = [{
    The paged form's meaning, written with the ops every other lowering
    takes: each cache is gathered through the block table into
    `[B, Hkv, max_pages * page_size, D]` (page indices clamped into the
    pool), and the result is a `flash.attention` on those keys and values
    whose score_mod masks, per sequence, the positions past
    `clamp(seq_lens[b], 0, capacity)` and the causal / window bound at that
    sequence's own diagonal (the queries are its last Lq positions).
    `flash-cpu-pipeline` runs it first; the GPU lowers the paged op itself,
    reading through the block table.

    Before:
    ```mlir
    %o = flash.paged_attention ins(%q, %kc, %vc : ...) pages(%t, %n : ...)
           outs(%init : ...) scale(0.125) mask(causal, bottom_right) -> ...
    ```
    After: two `linalg.generic` gathers, two per-sequence `[B]` i64 bounds,
    and a `flash.attention` with a score_mod capturing them.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FlashUnpackVarlenAttentionPass : Pass<"flash-unpack-varlen-attention"> {
  let summary = "Lower flash.varlen_attention to a loop of flash.attention, "
                "one per packed sequence";
  let description = [{
    The varlen form's meaning, written with the ops every other lowering
    takes: an `scf.for` over the sequences carries the output (and LSE);
    each step slices its sequence's rows out of the packed query, key and
    value (offsets clamped into the tensors), transposes them to
    `[heads, L, D]`, runs one `flash.attention` with the op's scale and
    mask at that sequence's lengths, and inserts the result back into its
    rows. `flash-cpu-pipeline` runs it first; the GPU lowers the varlen op
    itself.

    Before:
    ```mlir
    %o = flash.varlen_attention ins(%q, %k, %v : ...) seqlens(%cq, %ck : ...)
           outs(%init : ...) scale(0.125) mask(causal, bottom_right) -> ...
    ```
    After: `scf.for %b` with `tensor.extract_slice`, `linalg.transpose`,
    `flash.attention` and `tensor.insert_slice` in its body.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FlashTileAttentionPass : Pass<"flash-tile-attention"> {
  let summary = "Tile flash.attention into an online-softmax loop nest";
  let description = [{
    Rewrites every `flash.attention` into the fused algorithm: an
    `scf.forall` over the batch dims and blocks of `block-q` query rows, and
    inside it `scf.for` loops over blocks of `block-kv` keys carrying the
    running row max `m`, running sum `l` and accumulator `acc`:

    ```
    s   = score_mod(scale * q kᵀ, indices), masked to -inf
    m'  = max(m, rowmax s);  p = exp(s - m');  α = exp(m - m')
    l'  = α l + rowsum p;    acc' = α acc + p v
    out = acc / l;           lse = m + log l
    ```

    Tiles are static `block-q x block-kv` tensors, so nothing of size
    Lq x Lk is ever formed. Reads past Lq/Lk are clamped and their values
    replaced (zeros for Q/K/V, -inf for scores). Causal and sliding-window
    masks bound the key loop, so fully masked tiles are never visited; only
    the tiles crossing a mask edge or the Lk tail evaluate the mask. A row
    that sees no finite score yields 0 and lse = -inf. Query head `h` reads
    key/value head `h / (Hq / Hkv)`. Dynamic batch, Lq, Lk (and D) work.
    A tile of a larger op (`offsets`, `query_len`) bounds its key loop,
    masks and calls score_mod by its absolute rows.

    Before:
    ```mlir
    %o = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>,
             tensor<4x70x64xf32>, tensor<4x70x48xf32>)
           outs(%init : tensor<4x100x48xf32>) scale(0.125)
           -> tensor<4x100x48xf32>
    ```
    After (block-q = block-kv = 64):
    ```mlir
    %o = scf.forall (%b, %qb) in (4, 2) shared_outs(%out = %init) {
      ... %q tile: tensor<64x64xf32>
      %r:3 = scf.for %j = ... step %c64 iter_args(%m = .., %l = .., %acc = ..)
          -> (tensor<64xf32>, tensor<64xf32>, tensor<64x48xf32>) { ... }
      scf.forall.in_parallel { tensor.parallel_insert_slice ... }
    }
    ```
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", /*default=*/"64",
           "Query rows per tile">,
    Option<"blockKv", "block-kv", "int64_t", /*default=*/"64",
           "Key/value rows per tile">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FlashRaiseAttentionPass : Pass<"flash-raise-attention"> {
  let summary = "Recognize matmul-softmax-matmul attention and rewrite it to "
                "flash.attention";
  let description = [{
    Runs on every function-like op (FunctionOpInterface) in the op it is
    scheduled on: nested on func.func as the pipelines do, or on a module
    (upstream mlir-opt's `builtin.module(flash-raise-attention)`), or on
    another compiler's functions.

    Finds attention written as two contractions around a softmax, in the
    shapes ML frontends emit (linalg named ops, generics with any loop order,
    linalg.contract, linalg.softmax or its decompositions, TOSA), and
    replaces it with one `flash.attention`. Matching starts at each
    contraction (the candidate P·V), classifies every dimension from the
    indexing maps, and reads the chain backwards on use-def edges:

    - softmax over the key axis: max/sub/exp/sum/div or reciprocal-multiply,
      keepdim, projected or broadcast maps, fused generics, two-result
      argmax max, NaN-initialised maxnumf, no max subtraction, the
      log-sum-exp spelling, `linalg.softmax`;
    - splat multiplies/divides on the scores, on Q or on K fold into `scale`;
    - a select or additive 0/-inf term whose predicate is `j <= i + off`
      (index compares or a constant triangle) becomes `mask(causal)`;
    - any other elementwise computation of the scores is cloned into
      `score_mod`, the tensors it reads becoming `captures`;
    - transposes of Q/K/V/O fold into the operand layout; K/V that repeat
      fewer heads in interleaved order become grouped-query attention.
    - K and V gathered through one block table from page pools
      (`[pages, page_size, Hkv, D]`, reshaped to `[B, pages · page_size,
      Hkv, D]`) and masked at each sequence's length, or not at all, become
      `flash.paged_attention` over the pools (PagedGather.cpp).

    Everything else that looks like attention is left alone: softmax over
    the wrong axis, intermediates with other users, partial softmax, wrong
    reduction inits, masks or dropout after the softmax, integer softmax.
    With `remarks=true` every candidate that was not rewritten emits a remark
    at the op where the chain broke, saying why.

    TOSA input is first normalised with upstream tosa-to-linalg(-named),
    tosa-to-arith and tosa-to-tensor (only in functions that contain TOSA).

    Before (schematic):
    ```mlir
    %s = linalg.batch_matmul indexing_maps = [...(b, i, d), (b, j, d)...]
    %p = linalg.softmax dimension(2) ins(%s * 0.125 ...)
    %o = linalg.batch_matmul ins(%p, %v ...)
    ```
    After:
    ```mlir
    %o = flash.attention ins(%q, %k, %v : ...) outs(%init : ...) scale(0.125)
    ```
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark for every attention candidate that was not "
           "rewritten, at the link of the chain that broke">,
    Option<"normalizeTosa", "normalize-tosa", "bool", /*default=*/"true",
           "Lower TOSA to linalg first (in functions that contain TOSA)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::flash::FlashDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FlashDecomposeAggregatedOpsPass : Pass<"flash-decompose-aggregated-ops"> {
  let summary = "Decompose linalg aggregate ops (linalg.softmax) into generics";
  let description = [{
    Upstream code generation has no lowering for `linalg.softmax` and other
    linalg ops implementing `AggregatedOpInterface`. This pass expands them
    into the linalg ops they stand for (max, sub, exp, sum, div), so that IR
    that was not fused, e.g. the unfused original of a benchmark, still
    compiles. Only linalg ops are expanded: `flash.attention` implements the
    interface too, and stays fused (flash-decompose-attention unfuses it).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FlashAttentionIntoDestinationPass
    : Pass<"flash-attention-into-destination", "func::FuncOp"> {
  let summary = "Let flash.attention and flash.attention_grad write "
                "straight into the memrefs their results are materialized in";
  let description = [{
    A function written on tensors and wrapped for a caller's buffers ends in
    `bufferization.materialize_in_destination %r in restrict writable %out`
    while the op's init is a `tensor.empty`. The op overwrites its whole
    init, so the init can be the destination itself: this pass replaces the
    empty init with `bufferization.to_tensor %out restrict writable`, the
    destination-passing form that GPU code generation needs (the kernel
    stores into the caller's buffer, no temporary). Only done when the
    result has no other use and the memref is not read as a tensor
    elsewhere in the function. The forward's output and each result of the
    gradient (dq, dk, dv, capture gradients) are handled alike.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def FlashReadOnlyTensorArgumentsPass
    : Pass<"flash-read-only-tensor-arguments"> {
  let summary = "Mark functions' tensor arguments as not writable by "
                "bufferization";
  let description = [{
    Sets `bufferization.writable = false` on every tensor argument of every
    function-like op with a body (where no such attribute is set), so that
    one-shot bufferization with function boundaries never writes into the
    caller's input buffers: an elementwise op lowered in place, whose init is
    an argument, writes a new buffer instead. flash-cpu-pipeline runs it
    before bufferizing, so a function on tensors keeps its value semantics
    for C callers.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def FlashExpandFloatConversionsPass
    : Pass<"flash-expand-float-conversions"> {
  let summary = "Expand conversions to and from bf16/f16 into integer "
                "arithmetic";
  let description = [{
    LLVM lowers `fptrunc` to bf16 (and f16 conversions on a CPU without
    F16C) to calls of compiler-runtime builtins such as `__truncsfbf2`,
    `__extendhfsf2` and `__truncsfhf2`. Not every C runtime has them
    (Debian 12's libgcc lacks `__truncsfbf2`), so code that calls them fails
    to load on a machine that was never told to install compiler-rt. This
    pass rewrites every `arith.truncf` and `arith.extf` between the listed
    narrow types and f32/f64 into the integer arithmetic those builtins
    perform, bit for bit: round to nearest even, gradual underflow to
    subnormals, overflow to infinity, and NaN kept as NaN with its sign,
    the quiet bit set and the payload truncated (widened on extension).

    Arithmetic on the narrow types themselves should first be moved to f32
    with `arith-emulate-unsupported-floats` / `math-extend-to-supported-types`
    so that only conversions are left; `flash-cpu-pipeline` does both.

    Before:
    ```mlir
    %h = arith.truncf %x : f32 to bf16
    ```
    After: `arith.bitcast %x : f32 to i32`, shifts, masks, an add of the
    rounding bias and `arith.select`s for NaN and the other classes, then
    `arith.trunci` to i16 and `arith.bitcast` to bf16.
  }];
  let options = [
    ListOption<"types", "types", "std::string",
               "Narrow float types whose conversions are expanded (bf16, f16)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect"
  ];
}

def FlashMemrefCopyToLinalgPass : Pass<"flash-memref-copy-to-linalg"> {
  let summary = "Rewrite memref.copy into linalg.copy";
  let description = [{
    finalize-memref-to-llvm lowers a `memref.copy` whose buffers are not
    statically contiguous (dynamic-size tiles, strided subviews, as the tiled
    gradient's bufferization leaves) to a call of `memrefCopy` from MLIR's
    runner-utils library, which a library built for a user's process does
    not link. As `linalg.copy` it becomes a loop nest under
    convert-linalg-to-loops; `flash-cpu-pipeline` runs it after
    bufferization.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

#endif // FLASH_TRANSFORMS_PASSES
