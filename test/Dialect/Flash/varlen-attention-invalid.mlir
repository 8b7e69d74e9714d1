// RUN: flash-opt %s -split-input-file -verify-diagnostics

func.func @query_rank(%q: tensor<20x4x1x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o: tensor<20x4x8xf32>) {
  // expected-error @+1 {{'query' must be [Tq, Hq, D], got 'tensor<20x4x1x16xf32>'}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x1x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>) outs(%o : tensor<20x4x8xf32>) scale(0.25) -> tensor<20x4x8xf32>
  return
}

// -----

func.func @key_tokens(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<24x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o: tensor<20x4x8xf32>) {
  // expected-error @+1 {{the key token count Tk differs: 'key' has 25, 'value' has 24}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<24x2x8xf32>) seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>) outs(%o : tensor<20x4x8xf32>) scale(0.25) -> tensor<20x4x8xf32>
  return
}

// -----

func.func @head_dim(%q: tensor<20x4x32xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o: tensor<20x4x8xf32>) {
  // expected-error @+1 {{the head dim D differs: 'query' has 32, 'key' has 16}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x32xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>) outs(%o : tensor<20x4x8xf32>) scale(0.25) -> tensor<20x4x8xf32>
  return
}

// -----

func.func @groups(%q: tensor<20x3x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o: tensor<20x3x8xf32>) {
  // expected-error @+1 {{the K/V head count 2 of 'key' must divide the query head count 3}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x3x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>) outs(%o : tensor<20x3x8xf32>) scale(0.25) -> tensor<20x3x8xf32>
  return
}

// -----

func.func @offsets_count(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<5xi32>, %o: tensor<20x4x8xf32>) {
  // expected-error @+1 {{the number of sequences + 1 differs: 'cu_seqlens_q' has 4, 'cu_seqlens_k' has 5}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<4xi32>, tensor<5xi32>) outs(%o : tensor<20x4x8xf32>) scale(0.25) -> tensor<20x4x8xf32>
  return
}

// -----

func.func @offsets_i64(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi64>, %ck: tensor<4xi64>, %o: tensor<20x4x8xf32>) {
  // expected-error @+1 {{'cu_seqlens_q' must have i32 elements, got 'i64'}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<4xi64>, tensor<4xi64>) outs(%o : tensor<20x4x8xf32>) scale(0.25) -> tensor<20x4x8xf32>
  return
}

// -----

func.func @no_offsets(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<0xi32>, %ck: tensor<0xi32>, %o: tensor<20x4x8xf32>) {
  // expected-error @+1 {{'cu_seqlens_q' must hold B + 1 >= 1 offsets, got 0}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<0xi32>, tensor<0xi32>) outs(%o : tensor<20x4x8xf32>) scale(0.25) -> tensor<20x4x8xf32>
  return
}

// -----

func.func @output_tokens(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o: tensor<21x4x8xf32>) {
  // expected-error @+1 {{the query token count Tq differs: output init has 21, 'query' has 20}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>) outs(%o : tensor<21x4x8xf32>) scale(0.25) -> tensor<21x4x8xf32>
  return
}

// -----

func.func @lse_layout(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o: tensor<20x4x8xf32>, %l: tensor<20x4xf32>) {
  // expected-error @+1 {{log-sum-exp init must be f32 [Hq, Tq], got 'tensor<20x4xf32>'}}
  %r:2 = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>) seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>) outs(%o, %l : tensor<20x4x8xf32>, tensor<20x4xf32>) scale(0.25) -> tensor<20x4x8xf32>, tensor<20x4xf32>
  return
}

// -----

func.func @elem_mismatch(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xbf16>, %v: tensor<25x2x8xbf16>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o: tensor<20x4x8xf32>) {
  // expected-error @+1 {{'key' and 'value' must have the element type of 'query' ('f32'), got 'bf16' and 'bf16'}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xbf16>, tensor<25x2x8xbf16>) seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>) outs(%o : tensor<20x4x8xf32>) scale(0.25) -> tensor<20x4x8xf32>
  return
}

// -----

// The sinks are per query head: dim 1 of the packed query, not its tokens.
func.func @sinks_per_token(%q: tensor<20x4x16xf32>, %k: tensor<30x2x16xf32>, %v: tensor<30x2x24xf32>,
                           %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<20x4x24xf32>, %s: tensor<20xf32>) {
  // expected-error @+1 {{'sinks' 'tensor<20xf32>' must have one logit per query head (4 in 'query' 'tensor<20x4x16xf32>')}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<30x2x16xf32>, tensor<30x2x24xf32>) seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<20x4x24xf32>) sinks(%s : tensor<20xf32>) scale(0.25) -> tensor<20x4x24xf32>
  return
}

// -----

func.func @sinks_2d(%q: tensor<20x4x16xf32>, %k: tensor<30x2x16xf32>, %v: tensor<30x2x24xf32>,
                    %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<20x4x24xf32>, %s: tensor<1x4xf32>) {
  // expected-error @+1 {{'sinks' must be a 1-D tensor of f32, f16 or bf16 (one logit per query head), got 'tensor<1x4xf32>'}}
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<30x2x16xf32>, tensor<30x2x24xf32>) seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<20x4x24xf32>) sinks(%s : tensor<1x4xf32>) scale(0.25) -> tensor<20x4x24xf32>
  return
}
