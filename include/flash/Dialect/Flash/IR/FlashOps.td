//===- FlashOps.td - flash.attention -----------------------*- tablegen -*-===//
#ifndef FLASH_OPS
#define FLASH_OPS

include "flash/Dialect/Flash/IR/FlashDialect.td"
include "flash/Dialect/Flash/IR/FlashAttrs.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

def Flash_AttentionOp : Flash_Op<"attention", [
    AttrSizedOperandSegments,
    DestinationStyleOpInterface,
    IsolatedFromAbove,
    RecursiveMemoryEffects,
    RecursivelySpeculatable,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "fused scaled dot-product attention";
  let description = [{
    Computes, for every batch index `b...` (any number of leading dims, e.g.
    batch and heads) and query row `i`:

    ```
    s[j]   = score_mod(scale * sum_d query[b, i, d] * key[b', j, d], b, i, j)
    s[j]   = -inf where the mask forbids (i, j)
    p      = softmax(s)                     (a row with no finite s gives p = 0)
    out[b, i, e] = sum_j p[j] * value[b', j, e]
    lse[b, i]    = log sum_j exp(s[j])      (-inf for a fully masked row)
    ```

    With `sinks` (a float tensor `[Hq]`, one learned logit per query head, as
    gpt-oss uses; the op needs a heads dim), each row's softmax also counts
    the sink as a key whose value is zero: `p = exp(s) / (exp(sinks[h]) +
    sum_j exp(s[j]))` and `lse = log(exp(sinks[h]) + sum_j exp(s[j]))`, so
    a fully masked row gives 0 and `lse = sinks[h]`. Equivalently, from the
    result `(o, lse)` without sinks: `lse' = logaddexp(lse, sinks[h])`,
    `o' = o * exp(lse - lse')`. Like the captures, `sinks` is whole in a tile
    and read at the absolute head.

    `b'` equals `b` except in the last batch dim (heads): when key/value have
    `Hkv` heads and query has `Hq = G * Hkv`, query head `h` reads key/value
    head `h / G` (grouped-query attention; `Hkv = 1` is multi-query).

    Accumulation is f32 whatever the element types. The op is destination
    style: `outs` holds the output init and, when the log-sum-exp is wanted,
    an f32 init of shape `[batch..., Lq]`; results match the inits.

    The optional `score_mod` region is isolated from above. Its arguments are
    the scaled score (f32), its indices (one `index` per batch dim, then the
    query row, then the key column) and one argument per `captures` operand
    (tensors such as a bias or a boolean mask, read with `tensor.extract`). It
    yields the new f32 score with `flash.yield`.

    A tile of a larger attention carries `offsets(%b..., %i) query_len(%n)`:
    one `index` per batch dim, then one for the query row, and the query
    length `Lq` of the whole op. The op then computes its own rows as rows
    `b + %b`, `i + %i` of that larger op: the score_mod's batch and query
    indices and the mask see these absolute positions, and a `bottom_right`
    mask aligns to `%n` instead of the op's own `Lq` (`off = Lk - %n`). The
    key axis is never tiled, so the key column and `Lk` stay the op's own;
    captures are whole tensors, read at the absolute indices. Grouped-query
    heads pair up by the op's own shapes (local query head `h` reads local
    key/value head `h / G`): tiling slices K/V to match. Tiling through
    `TilingInterface` adds these operands whenever the op has a mask or a
    score_mod; without either they change nothing.

    ```mlir
    // Rows [%i, %i + 16) of a 2x8x128-row causal attention, heads [%h, %h + 4)
    // reading K/V heads [%h / 4, %h / 4 + 1).
    %t = flash.attention ins(%qt, %kt, %vt : tensor<1x4x16x64xbf16>,
                                 tensor<1x1x200x64xbf16>, tensor<1x1x200x32xbf16>)
           outs(%ot : tensor<1x4x16x32xbf16>)
           offsets(%b, %h, %i) query_len(%c128)
           scale(0.125) mask(causal, bottom_right) -> tensor<1x4x16x32xbf16>
    ```

    ```mlir
    %o = flash.attention ins(%q, %k, %v : tensor<2x8x128x64xbf16>,
                                 tensor<2x2x200x64xbf16>, tensor<2x2x200x32xbf16>)
           outs(%init : tensor<2x8x128x32xbf16>)
           scale(0.125) mask(causal, bottom_right) -> tensor<2x8x128x32xbf16>

    %o:2 = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>,
                                   tensor<4x70x64xf32>, tensor<4x70x48xf32>)
           outs(%init, %lse : tensor<4x100x48xf32>, tensor<4x100xf32>)
           captures(%bias : tensor<100x70xf32>) scale(0.125)
           score_mod {
           ^bb0(%s: f32, %b: index, %i: index, %j: index, %bias_t: tensor<100x70xf32>):
             %x = tensor.extract %bias_t[%i, %j] : tensor<100x70xf32>
             %r = arith.addf %s, %x : f32
             flash.yield %r : f32
           } -> tensor<4x100x48xf32>, tensor<4x100xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$query,
    AnyRankedTensor:$key,
    AnyRankedTensor:$value,
    Variadic<AnyRankedTensor>:$inits,
    Variadic<AnyRankedTensor>:$captures,
    Optional<AnyRankedTensor>:$sinks,
    Variadic<Index>:$offsets,
    Optional<Index>:$query_len,
    F32Attr:$scale,
    OptionalAttr<Flash_MaskAttr>:$mask);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region MaxSizedRegion<1>:$score_mod);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,` type($value) `)`
    `outs` `(` $inits `:` type($inits) `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`offsets` `(` $offsets^ `)` `query_len` `(` $query_len `)`)?
    `scale` `(` custom<Scale>($scale) `)`
    (`mask` `(` custom<MaskClause>($mask)^ `)`)?
    attr-dict
    (`score_mod` $score_mod^)?
    `->` type($results)
  }];

  let builders = [
    OpBuilder<(ins "Value":$query, "Value":$key, "Value":$value,
                   "ValueRange":$inits, "ValueRange":$captures,
                   "float":$scale, "MaskAttr":$mask)>
  ];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;

  let extraClassDeclaration = [{
    /// Number of leading batch dims (rank - 2).
    int64_t getNumBatchDims() {
      return getQueryType().getRank() - 2;
    }
    RankedTensorType getQueryType() {
      return ::llvm::cast<RankedTensorType>(getQuery().getType());
    }
    RankedTensorType getKeyType() {
      return ::llvm::cast<RankedTensorType>(getKey().getType());
    }
    RankedTensorType getValueType() {
      return ::llvm::cast<RankedTensorType>(getValue().getType());
    }
    Value getOutputInit() { return getInits()[0]; }
    RankedTensorType getOutputType() {
      return ::llvm::cast<RankedTensorType>(getOutputInit().getType());
    }
    bool hasLse() { return getInits().size() == 2; }
    Value getLseInit() { return hasLse() ? getInits()[1] : Value(); }
    Value getOutput() { return getResults()[0]; }
    Value getLse() { return hasLse() ? getResults()[1] : Value(); }
    bool hasScoreMod() { return !getScoreMod().empty(); }
    /// Whether the op is a tile of a larger attention (`offsets` and
    /// `query_len` present): its mask and score_mod see absolute indices.
    bool hasOffsets() { return !getOffsets().empty(); }
    /// The batch offsets (one per batch dim); empty without offsets.
    ValueRange getBatchOffsets() {
      return hasOffsets() ? getOffsets().drop_back() : ValueRange();
    }
    /// The query-row offset; null without offsets.
    Value getRowOffset() { return hasOffsets() ? getOffsets().back() : Value(); }
    /// The mask, with an absent attribute read as `none`.
    MaskAttr getMaskOrNone();
    /// Query heads per key/value head (1 unless grouped-query attention).
    /// Only meaningful when the head dims are static.
    int64_t getGroupSize();

    MutableOperandRange getDpsInitsMutable() { return getInitsMutable(); }
  }];
}

def Flash_AttentionGradOp : Flash_Op<"attention_grad", [
    AttrSizedOperandSegments,
    DestinationStyleOpInterface,
    IsolatedFromAbove,
    RecursiveMemoryEffects,
    RecursivelySpeculatable,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "the gradient of flash.attention, recomputing P from the LSE";
  let description = [{
    The backward pass of the `flash.attention` with the same `query`, `key`,
    `value`, `scale`, `mask`, `captures` and `score_mod`: given that op's
    output `out`, its cotangent `grad_out` and its log-sum-exp `lse`, computes

    ```
    s[i, j]  = mask(score_mod(scale * q[i] · k[j], b, i, j))   (as the forward)
    p[i, j]  = exp(s[i, j] - lse[i])                  (0 where lse = -inf)
    dv[j]    = sum_i p[i, j] * grad_out[i]
    dp[i, j] = grad_out[i] · v[j]
    ds[i, j] = p[i, j] * (dp[i, j] - sum_e grad_out[i, e] * out[i, e])
    dt[i, j] = ds[i, j] * d score_mod / d t   at t = scale * q[i] · k[j]
    dq[i]    = scale * sum_j dt[i, j] * k[j]
    dk[j]    = scale * sum_i dt[i, j] * q[i]
    dc[x]    = sum over the (i, j) whose score_mod read c[x] of
               ds[i, j] * d score_mod / d c[x]          (each float capture)
    ```

    so the probabilities are recomputed from the saved row statistics, never
    stored by the forward. With grouped-query attention `dk` and `dv` are
    summed over the query heads that share a key/value head. The derivative
    of the score_mod region is derived from its ops (add, sub, mul, div, neg,
    exp, log, tanh, abs, max/min, select, float casts, capture reads); an op
    that changes the score without a derivative is refused by the verifier,
    naming it. A float capture gets a gradient when each read of it
    (`tensor.extract`) indexes it by region index arguments only, as an
    additive bias does; an integer or i1 capture (a boolean mask) has none.

    `outs` holds the inits of `dq` (shape of `query`), `dk` (of `key`),
    `dv` (of `value`), then one init per float capture (its shape); the
    results overwrite them, in their element types (accumulation is f32).
    `lse` is f32 `[batch..., Lq]`, `out` and `grad_out` `[batch..., Lq, Dv]`.

    ```mlir
    %dq, %dk, %dv = flash.attention_grad
        ins(%q, %k, %v, %o, %do, %lse : tensor<4x100x64xf32>, tensor<4x70x64xf32>,
            tensor<4x70x48xf32>, tensor<4x100x48xf32>, tensor<4x100x48xf32>,
            tensor<4x100xf32>)
        outs(%dq0, %dk0, %dv0 : tensor<4x100x64xf32>, tensor<4x70x64xf32>,
             tensor<4x70x48xf32>)
        scale(0.125) mask(causal)
        -> tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x48xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$query,
    AnyRankedTensor:$key,
    AnyRankedTensor:$value,
    AnyRankedTensor:$out,
    AnyRankedTensor:$grad_out,
    AnyRankedTensor:$lse,
    Variadic<AnyRankedTensor>:$inits,
    Variadic<AnyRankedTensor>:$captures,
    F32Attr:$scale,
    OptionalAttr<Flash_MaskAttr>:$mask);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region MaxSizedRegion<1>:$score_mod);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `,` $out `,` $grad_out `,` $lse `:`
      type($query) `,` type($key) `,` type($value) `,` type($out) `,`
      type($grad_out) `,` type($lse) `)`
    `outs` `(` $inits `:` type($inits) `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    `scale` `(` custom<Scale>($scale) `)`
    (`mask` `(` custom<MaskClause>($mask)^ `)`)?
    attr-dict
    (`score_mod` $score_mod^)?
    `->` type($results)
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;

  let extraClassDeclaration = [{
    int64_t getNumBatchDims() { return getQueryType().getRank() - 2; }
    RankedTensorType getQueryType() {
      return ::llvm::cast<RankedTensorType>(getQuery().getType());
    }
    RankedTensorType getKeyType() {
      return ::llvm::cast<RankedTensorType>(getKey().getType());
    }
    RankedTensorType getValueType() {
      return ::llvm::cast<RankedTensorType>(getValue().getType());
    }
    bool hasScoreMod() { return !getScoreMod().empty(); }
    /// The mask, with an absent attribute read as `none`.
    MaskAttr getMaskOrNone();
    Value getGradQueryInit() { return getInits()[0]; }
    Value getGradKeyInit() { return getInits()[1]; }
    Value getGradValueInit() { return getInits()[2]; }
    /// The captures that get a gradient (float element type), in order; the
    /// init of the k-th is getInits()[3 + k].
    SmallVector<unsigned> getDifferentiableCaptures();

    MutableOperandRange getDpsInitsMutable() { return getInitsMutable(); }
  }];
}

def Flash_PagedAttentionOp : Flash_Op<"paged_attention", [
    AttrSizedOperandSegments,
    DestinationStyleOpInterface,
    IsolatedFromAbove,
    RecursiveMemoryEffects,
    RecursivelySpeculatable,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "attention of new queries against a paged KV cache";
  let description = [{
    Decoding reads K and V from a cache that is allocated in fixed-size
    pages, as serving engines keep it (vLLM, FlashInfer): `key_cache` and
    `value_cache` are a pool of pages `[num_pages, page_size, Hkv, D]` /
    `[..., Dv]`, and sequence `b` owns the pages `block_table[b, 0..]` in
    order and its first `seq_lens[b]` positions. For every batch index `b`,
    query head `h` and row `i` of `query [B, Hq, Lq, D]`, with
    `n = clamp(seq_lens[b], 0, max_pages * page_size)` and `G = Hq / Hkv`:

    ```
    key j  (0 <= j < n) = key_cache[page(b, j), j mod page_size, h / G, :]
    page(b, j)          = clamp(block_table[b, j / page_size], 0, num_pages - 1)
    out[b, h, i]        = attention of query[b, h, i] over those keys and
                          the values at the same places, scaled by `scale`
    lse[b, h, i]        = their log-sum-exp (-inf when no key is visible)
    ```

    The `Lq` queries are the last `Lq` positions of their sequence, so a
    mask is `bottom_right` and aligns to each sequence's own length:
    `causal` lets row `i` see keys `j <= i + n - Lq`. Positions past `n`
    are never read as keys; the clamps make a block table that points
    anywhere read inside the pool (the result is then the caller's
    garbage, never an out-of-bounds access). A row that sees no key gives
    0 and lse = -inf. `block_table` and `seq_lens` are i32, as the engines
    store them. Accumulation is f32. With `sinks` (`[Hq]`, one learned
    logit per query head, gpt-oss), each row's softmax counts the sink as
    one more key whose value is zero, as for flash.attention: a row that
    sees no key then gives 0 and lse = sinks[h].

    The optional `score_mod` region is flash.attention's (isolated from
    above, arguments the scaled f32 score, the indices `b, h, i, j`, one
    tensor per `captures` operand; it yields the new score), applied before
    the mask: `i` is the query row (0 <= i < Lq) and `j` the key's position
    in its sequence (0 <= j < n), so the query's own position is
    `i + n - Lq` (capture `seq_lens` to compute it). Its result counts for
    the keys that exist (j < n) only, but it may be evaluated for any
    `j < max_pages * page_size`: a capture indexed by `j` covers that
    capacity, as it would the keys of the gathered cache.

    ```mlir
    %o, %lse = flash.paged_attention
        ins(%q, %kc, %vc : tensor<4x32x1x128xbf16>, tensor<512x16x8x128xbf16>,
            tensor<512x16x8x128xbf16>)
        pages(%table, %lens : tensor<4x64xi32>, tensor<4xi32>)
        outs(%init, %lse0 : tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>)
        scale(0.0883883) mask(causal, bottom_right)
        -> tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$query,
    AnyRankedTensor:$key_cache,
    AnyRankedTensor:$value_cache,
    AnyRankedTensor:$block_table,
    AnyRankedTensor:$seq_lens,
    Variadic<AnyRankedTensor>:$inits,
    Variadic<AnyRankedTensor>:$captures,
    Optional<AnyRankedTensor>:$sinks,
    F32Attr:$scale,
    OptionalAttr<Flash_MaskAttr>:$mask);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region MaxSizedRegion<1>:$score_mod);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key_cache `,` $value_cache `:` type($query) `,`
      type($key_cache) `,` type($value_cache) `)`
    `pages` `(` $block_table `,` $seq_lens `:` type($block_table) `,`
      type($seq_lens) `)`
    `outs` `(` $inits `:` type($inits) `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    `scale` `(` custom<Scale>($scale) `)`
    (`mask` `(` custom<MaskClause>($mask)^ `)`)?
    attr-dict
    (`score_mod` $score_mod^)?
    `->` type($results)
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;

  let extraClassDeclaration = [{
    RankedTensorType getQueryType() {
      return ::llvm::cast<RankedTensorType>(getQuery().getType());
    }
    RankedTensorType getKeyCacheType() {
      return ::llvm::cast<RankedTensorType>(getKeyCache().getType());
    }
    RankedTensorType getValueCacheType() {
      return ::llvm::cast<RankedTensorType>(getValueCache().getType());
    }
    RankedTensorType getBlockTableType() {
      return ::llvm::cast<RankedTensorType>(getBlockTable().getType());
    }
    Value getOutputInit() { return getInits()[0]; }
    RankedTensorType getOutputType() {
      return ::llvm::cast<RankedTensorType>(getOutputInit().getType());
    }
    bool hasLse() { return getInits().size() == 2; }
    Value getLseInit() { return hasLse() ? getInits()[1] : Value(); }
    /// Keys per page (dim 1 of the caches).
    int64_t getPageSize() { return getKeyCacheType().getDimSize(1); }
    /// The mask, with an absent attribute read as `none`.
    MaskAttr getMaskOrNone();
    bool hasScoreMod() { return !getScoreMod().empty(); }

    MutableOperandRange getDpsInitsMutable() { return getInitsMutable(); }
  }];
}

def Flash_VarlenAttentionOp : Flash_Op<"varlen_attention", [
    AttrSizedOperandSegments,
    DestinationStyleOpInterface,
    Pure,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "attention over a packed batch of variable-length sequences";
  let description = [{
    Prefill of several sequences of different lengths in one call, packed
    without padding as FlashAttention's varlen interface takes them:
    `query [Tq, Hq, D]`, `key [Tk, Hkv, D]`, `value [Tk, Hkv, Dv]` hold the
    tokens of all sequences one after another, and the i32 offsets
    `cu_seqlens_q`, `cu_seqlens_k` (`[B + 1]`, non-decreasing, starting at
    0) say where each starts. For every sequence `b`, with the offsets
    clamped into the tensors,

    ```
    q0 = clamp(cu_seqlens_q[b], 0, Tq)   q1 = clamp(cu_seqlens_q[b+1], q0, Tq)
    k0 = clamp(cu_seqlens_k[b], 0, Tk)   k1 = clamp(cu_seqlens_k[b+1], k0, Tk)
    out[q0 + i, h]  = attention of query[q0 + i, h] over key[k0 + j, h / G]
                      and value[k0 + j, h / G], 0 <= j < k1 - k0, with the
                      mask over (i, j) at this sequence's own lengths
                      Lq = q1 - q0, Lk = k1 - k0 (so bottom_right aligns
                      each sequence's queries to the end of its keys)
    lse[h, q0 + i]  = their log-sum-exp (-inf when no key is visible)
    ```

    `G = Hq / Hkv` (grouped-query attention). Sequences never see each
    other's keys, and no padding is computed. Rows of `out` and `lse` that
    no sequence covers keep what their inits hold (destination style).
    The clamps make any offsets read inside the tensors; offsets that are
    not non-decreasing give the caller's garbage, never an out-of-bounds
    access. The LSE is `[Hq, Tq]`, so a caller can merge the result with
    another partial one. Accumulation is f32. With `sinks` (`[Hq]`, one
    learned logit per query head, gpt-oss), each row's softmax counts the
    sink as one more key whose value is zero, as for flash.attention: a row
    that sees no key then gives 0 and lse = sinks[h].

    ```mlir
    %o, %lse = flash.varlen_attention
        ins(%q, %k, %v : tensor<4096x32x128xbf16>, tensor<4096x8x128xbf16>,
            tensor<4096x8x128xbf16>)
        seqlens(%cu_q, %cu_k : tensor<9xi32>, tensor<9xi32>)
        outs(%init, %lse0 : tensor<4096x32x128xbf16>, tensor<32x4096xf32>)
        scale(0.0883883) mask(causal, bottom_right)
        -> tensor<4096x32x128xbf16>, tensor<32x4096xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$query,
    AnyRankedTensor:$key,
    AnyRankedTensor:$value,
    AnyRankedTensor:$cu_seqlens_q,
    AnyRankedTensor:$cu_seqlens_k,
    Variadic<AnyRankedTensor>:$inits,
    Optional<AnyRankedTensor>:$sinks,
    F32Attr:$scale,
    OptionalAttr<Flash_MaskAttr>:$mask);
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,`
      type($key) `,` type($value) `)`
    `seqlens` `(` $cu_seqlens_q `,` $cu_seqlens_k `:` type($cu_seqlens_q) `,`
      type($cu_seqlens_k) `)`
    `outs` `(` $inits `:` type($inits) `)`
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    `scale` `(` custom<Scale>($scale) `)`
    (`mask` `(` custom<MaskClause>($mask)^ `)`)?
    attr-dict
    `->` type($results)
  }];

  let hasVerifier = 1;

  let extraClassDeclaration = [{
    RankedTensorType getQueryType() {
      return ::llvm::cast<RankedTensorType>(getQuery().getType());
    }
    RankedTensorType getKeyType() {
      return ::llvm::cast<RankedTensorType>(getKey().getType());
    }
    RankedTensorType getValueType() {
      return ::llvm::cast<RankedTensorType>(getValue().getType());
    }
    Value getOutputInit() { return getInits()[0]; }
    RankedTensorType getOutputType() {
      return ::llvm::cast<RankedTensorType>(getOutputInit().getType());
    }
    bool hasLse() { return getInits().size() == 2; }
    Value getLseInit() { return hasLse() ? getInits()[1] : Value(); }
    /// The number of sequences B (dim 0 of the offsets, minus one).
    int64_t getNumSequences() {
      int64_t n = ::llvm::cast<RankedTensorType>(
          getCuSeqlensQ().getType()).getDimSize(0);
      return ShapedType::isDynamic(n) ? n : n - 1;
    }
    /// The mask, with an absent attribute read as `none`.
    MaskAttr getMaskOrNone();

    MutableOperandRange getDpsInitsMutable() { return getInitsMutable(); }
  }];
}

def Flash_YieldOp : Flash_Op<"yield", [Pure, ReturnLike, Terminator,
                                       ParentOneOf<["AttentionOp", "AttentionGradOp",
                                                   "PagedAttentionOp"]>]> {
  let summary = "yields the modified score of a score_mod region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // FLASH_OPS
