// RUN: flash-opt %s -split-input-file -verify-diagnostics

func.func @query_rank(%q: tensor<4x1x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                      %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x1x48xf32>) {
  // expected-error @+1 {{'query' must be [B, Hq, Lq, D], got 'tensor<4x1x64xf32>'}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x1x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x1x48xf32>) scale(0.125) -> tensor<4x1x48xf32>
  return
}

// -----

func.func @page_size_mismatch(%q: tensor<4x4x1x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x32x2x48xf32>,
                              %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x1x48xf32>) {
  // expected-error @+1 {{the page size differs: 'key_cache' has 16, 'value_cache' has 32}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x1x64xf32>, tensor<9x16x2x64xf32>, tensor<9x32x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x1x48xf32>) scale(0.125) -> tensor<4x4x1x48xf32>
  return
}

// -----

func.func @head_dim(%q: tensor<4x4x1x32xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                    %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x1x48xf32>) {
  // expected-error @+1 {{the head dim D differs: 'query' has 32, 'key_cache' has 64}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x1x32xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x1x48xf32>) scale(0.125) -> tensor<4x4x1x48xf32>
  return
}

// -----

func.func @groups(%q: tensor<4x3x1x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                  %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x3x1x48xf32>) {
  // expected-error @+1 {{the K/V head count 2 of 'key_cache' must divide the query head count 3}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x3x1x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x3x1x48xf32>) scale(0.125) -> tensor<4x3x1x48xf32>
  return
}

// -----

func.func @table_batch(%q: tensor<4x4x1x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                       %t: tensor<5x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x1x48xf32>) {
  // expected-error @+1 {{the batch size differs: 'block_table' has 5, 'query' has 4}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x1x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<5x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x1x48xf32>) scale(0.125) -> tensor<4x4x1x48xf32>
  return
}

// -----

func.func @table_type(%q: tensor<4x4x1x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                      %t: tensor<4x3xi64>, %n: tensor<4xi32>, %o: tensor<4x4x1x48xf32>) {
  // expected-error @+1 {{'block_table' must have i32 elements, got 'i64'}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x1x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi64>, tensor<4xi32>) outs(%o : tensor<4x4x1x48xf32>) scale(0.125) -> tensor<4x4x1x48xf32>
  return
}

// -----

func.func @top_left(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                    %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>) {
  // expected-error @+1 {{the queries of a KV cache are the last Lq positions of each sequence: the mask must be bottom_right}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x2x48xf32>) scale(0.125) mask(causal) -> tensor<4x4x2x48xf32>
  return
}

// -----

func.func @lse_shape(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                     %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>, %l: tensor<4x4xf32>) {
  // expected-error @+1 {{log-sum-exp init must be f32 [B, Hq, Lq], got 'tensor<4x4xf32>'}}
  %r:2 = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o, %l : tensor<4x4x2x48xf32>, tensor<4x4xf32>) scale(0.125) -> tensor<4x4x2x48xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @zero_page(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x0x2x64xf32>, %vc: tensor<9x0x2x48xf32>,
                     %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>) {
  // expected-error @+1 {{'key_cache' page size must be positive, got 0}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x0x2x64xf32>, tensor<9x0x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x2x48xf32>) scale(0.125) -> tensor<4x4x2x48xf32>
  return
}

// -----

func.func @sinks_per_kv_head(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                             %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'sinks' 'tensor<2xf32>' must have one logit per query head (4 in 'query' 'tensor<4x4x2x64xf32>')}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x2x48xf32>) sinks(%s : tensor<2xf32>) scale(0.125) -> tensor<4x4x2x48xf32>
  return
}

// -----

func.func @sinks_integer(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                         %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{'sinks' must be a 1-D tensor of f32, f16 or bf16 (one logit per query head), got 'tensor<4xi32>'}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x2x48xf32>) sinks(%s : tensor<4xi32>) scale(0.125) -> tensor<4x4x2x48xf32>
  return
}

// -----

func.func @captures_without_score_mod(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                                      %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{has 1 captures but no score_mod region to read them}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x2x48xf32>) captures(%c : tensor<4xf32>) scale(0.125) -> tensor<4x4x2x48xf32>
  return
}

// -----

func.func @score_mod_three_indices(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                                   %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>) {
  // expected-error @+1 {{score_mod region must take 5 arguments (the f32 score, 4 indices, 0 captures), got 4}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x2x48xf32>) scale(0.125) score_mod {
  ^bb0(%s: f32, %h: index, %i: index, %j: index):
    flash.yield %s : f32
  } -> tensor<4x4x2x48xf32>
  return
}

// -----

func.func @score_mod_capture_type(%q: tensor<4x4x2x64xf32>, %kc: tensor<9x16x2x64xf32>, %vc: tensor<9x16x2x48xf32>,
                                  %t: tensor<4x3xi32>, %n: tensor<4xi32>, %o: tensor<4x4x2x48xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{score_mod argument #5 has type 'tensor<4xf16>' but capture #0 has type 'tensor<4xf32>'}}
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<4x4x2x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x48xf32>) pages(%t, %n : tensor<4x3xi32>, tensor<4xi32>) outs(%o : tensor<4x4x2x48xf32>) captures(%c : tensor<4xf32>) scale(0.125) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<4xf16>):
    flash.yield %s : f32
  } -> tensor<4x4x2x48xf32>
  return
}
