// RUN: flash-opt %s -split-input-file -verify-diagnostics

func.func @query_rank_1(%q: tensor<64xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %o: tensor<64xf32>) {
  // expected-error @+1 {{'query' must have rank >= 2 ([batch..., Lq, D]), got 'tensor<64xf32>'}}
  %r = flash.attention ins(%q, %k, %v : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) outs(%o : tensor<64xf32>) scale(0.125) -> tensor<64xf32>
  return
}

// -----

func.func @key_rank(%q: tensor<4x100x64xf32>, %k: tensor<70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'key' has rank 2 ('tensor<70x64xf32>') but 'query' has rank 3}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @value_rank(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'value' has rank 2 ('tensor<70x32xf32>') but 'query' has rank 3}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @output_rank(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<100x32xf32>) {
  // expected-error @+1 {{'output init' has rank 2 ('tensor<100x32xf32>') but 'query' has rank 3}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<100x32xf32>) scale(0.125) -> tensor<100x32xf32>
  return
}

// -----

func.func @integer_query(%q: tensor<4x100x64xi32>, %k: tensor<4x70x64xi32>, %v: tensor<4x70x32xi32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'query' element type must be bf16, f16 or f32, got 'i32'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xi32>, tensor<4x70x64xi32>, tensor<4x70x32xi32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @f64_query(%q: tensor<4x100x64xf64>, %k: tensor<4x70x64xf64>, %v: tensor<4x70x32xf64>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'query' element type must be bf16, f16 or f32, got 'f64'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf64>, tensor<4x70x64xf64>, tensor<4x70x32xf64>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @key_type_mismatch(%q: tensor<4x100x64xbf16>, %k: tensor<4x70x64xf16>, %v: tensor<4x70x32xbf16>, %o: tensor<4x100x32xbf16>) {
  // expected-error @+1 {{'key' element type 'f16' does not match 'query' element type 'bf16'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xbf16>, tensor<4x70x64xf16>, tensor<4x70x32xbf16>) outs(%o : tensor<4x100x32xbf16>) scale(0.125) -> tensor<4x100x32xbf16>
  return
}

// -----

func.func @value_type_mismatch(%q: tensor<4x100x64xf16>, %k: tensor<4x70x64xf16>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf16>) {
  // expected-error @+1 {{'value' element type 'f32' does not match 'query' element type 'f16'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf16>, tensor<4x70x64xf16>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf16>) scale(0.125) -> tensor<4x100x32xf16>
  return
}

// -----

func.func @output_type(%q: tensor<4x100x64xf16>, %k: tensor<4x70x64xf16>, %v: tensor<4x70x32xf16>, %o: tensor<4x100x32xi8>) {
  // expected-error @+1 {{output init element type must be bf16, f16 or f32, got 'i8'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf16>, tensor<4x70x64xf16>, tensor<4x70x32xf16>) outs(%o : tensor<4x100x32xi8>) scale(0.125) -> tensor<4x100x32xi8>
  return
}

// -----

func.func @head_dim_mismatch(%q: tensor<4x100x64xf32>, %k: tensor<4x70x48xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'key' head dim D = 48 does not match 'query' head dim D = 64 (query 'tensor<4x100x64xf32>', key 'tensor<4x70x48xf32>')}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x48xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @kv_length_mismatch(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x71x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'value' sequence length Lk = 71 does not match 'key' sequence length Lk = 70}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x71x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @dv_mismatch(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x16xf32>) {
  // expected-error @+1 {{output init value dim Dv = 16 does not match 'value' dim Dv = 32}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x16xf32>) scale(0.125) -> tensor<4x100x16xf32>
  return
}

// -----

func.func @lq_mismatch(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x99x32xf32>) {
  // expected-error @+1 {{output init sequence length Lq = 99 does not match 'query' sequence length Lq = 100}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x99x32xf32>) scale(0.125) -> tensor<4x99x32xf32>
  return
}

// -----

func.func @batch_mismatch(%q: tensor<2x8x100x64xf32>, %k: tensor<3x8x70x64xf32>, %v: tensor<3x8x70x32xf32>, %o: tensor<2x8x100x32xf32>) {
  // expected-error @+1 {{'key' batch dim #0 = 3 does not match 'query' batch dim #0 = 2}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x8x100x64xf32>, tensor<3x8x70x64xf32>, tensor<3x8x70x32xf32>) outs(%o : tensor<2x8x100x32xf32>) scale(0.125) -> tensor<2x8x100x32xf32>
  return
}

// -----

func.func @value_batch_mismatch(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<5x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'value' batch dim #0 = 5 does not match 'key' batch dim #0 = 4}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<5x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @output_batch_mismatch(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<5x100x32xf32>) {
  // expected-error @+1 {{output init batch dim #0 = 5 does not match 'query' batch dim #0 = 4}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<5x100x32xf32>) scale(0.125) -> tensor<5x100x32xf32>
  return
}

// -----

func.func @gqa_not_divisible(%q: tensor<2x6x100x64xf32>, %k: tensor<2x4x70x64xf32>, %v: tensor<2x4x70x32xf32>, %o: tensor<2x6x100x32xf32>) {
  // expected-error @+1 {{'query' heads (batch dim #1 = 6) must be a multiple of 'key'/'value' heads (4)}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x6x100x64xf32>, tensor<2x4x70x64xf32>, tensor<2x4x70x32xf32>) outs(%o : tensor<2x6x100x32xf32>) scale(0.125) -> tensor<2x6x100x32xf32>
  return
}

// -----

func.func @gqa_more_kv_heads(%q: tensor<2x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<2x100x32xf32>) {
  // expected-error @+1 {{'query' heads (batch dim #0 = 2) must be a multiple of 'key'/'value' heads (4)}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<2x100x32xf32>) scale(0.125) -> tensor<2x100x32xf32>
  return
}

// -----

func.func @lse_type(%q: tensor<4x100x64xf16>, %k: tensor<4x70x64xf16>, %v: tensor<4x70x32xf16>, %o: tensor<4x100x32xf16>, %l: tensor<4x100xf16>) {
  // expected-error @+1 {{log-sum-exp init must have f32 elements, got 'f16'}}
  %r:2 = flash.attention ins(%q, %k, %v : tensor<4x100x64xf16>, tensor<4x70x64xf16>, tensor<4x70x32xf16>) outs(%o, %l : tensor<4x100x32xf16>, tensor<4x100xf16>) scale(0.125) -> tensor<4x100x32xf16>, tensor<4x100xf16>
  return
}

// -----

func.func @lse_shape(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %l: tensor<4x70xf32>) {
  // expected-error @+1 {{log-sum-exp init must have shape [batch..., Lq] = [4x100], got 'tensor<4x70xf32>'}}
  %r:2 = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o, %l : tensor<4x100x32xf32>, tensor<4x70xf32>) scale(0.125) -> tensor<4x100x32xf32>, tensor<4x70xf32>
  return
}

// -----

func.func @result_type(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{result #0 type 'tensor<4x100x32xf16>' does not match its init type 'tensor<4x100x32xf32>'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) -> tensor<4x100x32xf16>
  return
}

// -----

func.func @scale_inf(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{'scale' must be a finite f32, got +Inf (1.0e39 is beyond the f32 range)}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(1.0e39) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @scale_minus_huge(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{'scale' must be a finite f32, got -Inf (-1e39 is beyond the f32 range)}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(-1e39) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_nan_bits(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{'scale' must be a finite f32, got NaN}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(0x7FC00000) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_inf_bits(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{'scale' must be a finite f32, got +Inf}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(0x7F800000) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_minus_inf_bits(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{'scale' must be a finite f32, got -Inf}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(0xFF800000) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_wide_hex(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{hex 'scale' 0x1FFFFFFFF is wider than an f32 bit pattern}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(0x1FFFFFFFF) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_negative_hex(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{a hex f32 bit pattern for 'scale' takes no minus sign}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(-0x3E000000) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_bool(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{expected a number for 'scale'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(true) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_bad_exponent(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{expected a number for 'scale', got '1x3'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(1x3) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_missing_exponent(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{expected an exponent after '1e'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(1e) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_inf_word(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{expected floating point literal}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(inf) -> tensor<4x8xf32>
  return
}

// -----

func.func @scale_nan_word(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{expected floating point literal}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(nan) -> tensor<4x8xf32>
  return
}

// -----

func.func @zero_query_head_dim(%q: tensor<4x0xf32>, %k: tensor<4x0xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{'query' head dim D must be at least 1, got 0 ('tensor<4x0xf32>')}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x0xf32>, tensor<4x0xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(1.0) -> tensor<4x8xf32>
  return
}

// -----

func.func @zero_value_head_dim(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x0xf32>, %o: tensor<4x0xf32>) {
  // expected-error @+1 {{'value' head dim Dv must be at least 1, got 0 ('tensor<4x0xf32>')}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x0xf32>) outs(%o : tensor<4x0xf32>) scale(1.0) -> tensor<4x0xf32>
  return
}

// -----

func.func @zero_output_head_dim(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x?xf32>, %o: tensor<4x0xf32>) {
  // expected-error @+1 {{output init head dim Dv must be at least 1, got 0 ('tensor<4x0xf32>')}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x?xf32>) outs(%o : tensor<4x0xf32>) scale(1.0) -> tensor<4x0xf32>
  return
}

// -----

func.func @zero_key_head_dim(%q: tensor<2x4x?xf32>, %k: tensor<2x4x0xf32>, %v: tensor<2x4x8xf32>, %o: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'key' head dim D must be at least 1, got 0 ('tensor<2x4x0xf32>')}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x4x?xf32>, tensor<2x4x0xf32>, tensor<2x4x8xf32>) outs(%o : tensor<2x4x8xf32>) scale(1.0) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @window_beyond_any_length(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{sliding_window mask window must be below 2^62 keys, longer than any sequence, got 4611686018427387904 (a window that covers every key is a causal mask)}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(1.0) mask(sliding_window, 4611686018427387904) -> tensor<4x8xf32>
  return
}

// -----

func.func @window_int64_max(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{sliding_window mask window must be below 2^62 keys, longer than any sequence, got 9223372036854775807}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(1.0) mask(sliding_window, 9223372036854775807, bottom_right) -> tensor<4x8xf32>
  return
}

// -----

func.func @window_beyond_int64(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{integer value too large}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) scale(1.0) mask(sliding_window, 9223372036854775808) -> tensor<4x8xf32>
  return
}

// -----

func.func @captures_without_region(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %c0: tensor<100x70xf32>) {
  // expected-error @+1 {{has 1 captures but no score_mod region to read them}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) captures(%c0 : tensor<100x70xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @region_arity(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{score_mod region must take 4 arguments (the f32 score, 3 indices, 0 captures), got 3}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) score_mod {
  ^bb0(%s: f32, %i: index, %j: index):
    flash.yield %s : f32
  } -> tensor<4x100x32xf32>
  return
}

// -----

func.func @region_score_type(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{score_mod argument #0 (the score) must be f32, got 'f16'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) score_mod {
  ^bb0(%s: f16, %b: index, %i: index, %j: index):
    %z = arith.constant 0.0 : f32
    flash.yield %z : f32
  } -> tensor<4x100x32xf32>
  return
}

// -----

func.func @region_index_type(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{score_mod argument #2 (an index) must be index, got 'i32'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) score_mod {
  ^bb0(%s: f32, %b: index, %i: i32, %j: index):
    flash.yield %s : f32
  } -> tensor<4x100x32xf32>
  return
}

// -----

func.func @region_capture_type(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %c0: tensor<100x70xf32>) {
  // expected-error @+1 {{score_mod argument #4 has type 'tensor<70xf32>' but capture #0 has type 'tensor<100x70xf32>'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) captures(%c0 : tensor<100x70xf32>) scale(0.125) score_mod {
  ^bb0(%s: f32, %b: index, %i: index, %j: index, %c: tensor<70xf32>):
    flash.yield %s : f32
  } -> tensor<4x100x32xf32>
  return
}

// -----

func.func @three_inits(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %l: tensor<4x100xf32>) {
  // expected-error @+1 {{expects 1 or 2 inits (output, then optional log-sum-exp), got 3}}
  %r:3 = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o, %l, %l : tensor<4x100x32xf32>, tensor<4x100xf32>, tensor<4x100xf32>) scale(0.125) -> tensor<4x100x32xf32>, tensor<4x100xf32>, tensor<4x100xf32>
  return
}

// -----

func.func @yield_wrong_type(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) score_mod {
  ^bb0(%s: f32, %b: index, %i: index, %j: index):
    // expected-error @+1 {{'flash.yield' op must yield exactly one f32 score, got 2 value(s)}}
    flash.yield %s, %s : f32, f32
  } -> tensor<4x100x32xf32>
  return
}

// -----

func.func @yield_outside_attention(%x: f32) {
  // expected-error @+1 {{'flash.yield' op expects parent op to be one of 'flash.attention, flash.attention_grad, flash.paged_attention'}}
  flash.yield %x : f32
}

// -----

func.func @region_reads_from_above(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %x: f32) {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) score_mod {
  ^bb0(%s: f32, %b: index, %i: index, %j: index):
    // expected-error @+1 {{using value defined outside the region}}
    %y = arith.addf %s, %x : f32
    flash.yield %y : f32
  } -> tensor<4x100x32xf32>
  return
}

// -----

func.func @window_zero(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{sliding_window mask needs a window of at least 1 key, got 0}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(sliding_window) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @window_on_causal(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{only a sliding_window mask takes a window, got 16 on a causal mask}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(causal, 16) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @alignment_on_none(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{a none mask has no alignment}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(none, bottom_right) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @unknown_mask_kind(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{unknown mask kind 'diagonal' (expected none, causal or sliding_window)}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(diagonal) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @unknown_alignment(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) {
  // expected-error @+1 {{unknown mask alignment 'center' (expected top_left or bottom_right)}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(causal, center) -> tensor<4x100x32xf32>
  return
}

// -----

// expected-error @+1 {{sliding_window mask needs a window of at least 1 key, got -4}}
func.func @negative_window_attr() attributes {test.m = #flash.mask<sliding_window, -4>} {
  return
}

// -----

func.func @offsets_count(%q: tensor<2x4x16x64xf32>, %k: tensor<2x4x70x64xf32>, %v: tensor<2x4x70x32xf32>, %o: tensor<2x4x16x32xf32>, %x: index, %n: index) {
  // expected-error @+1 {{expects 3 offsets (one per batch dim, then the query row) for 'query' 'tensor<2x4x16x64xf32>', got 2}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x4x16x64xf32>, tensor<2x4x70x64xf32>, tensor<2x4x70x32xf32>) outs(%o : tensor<2x4x16x32xf32>) offsets(%x, %x) query_len(%n) scale(0.125) mask(causal) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @offsets_negative(%q: tensor<4x16x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x16x32xf32>, %x: index, %n: index) {
  %m = arith.constant -2 : index
  // expected-error @+1 {{offset #0 (batch dim) must be non-negative, got -2}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x16x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x16x32xf32>) offsets(%m, %x) query_len(%n) scale(0.125) mask(causal) -> tensor<4x16x32xf32>
  return
}

// -----

func.func @offsets_past_query_len(%q: tensor<4x16x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x16x32xf32>, %x: index) {
  %c90 = arith.constant 90 : index
  %c100 = arith.constant 100 : index
  // expected-error @+1 {{query rows [90, 106) (offset 90, Lq = 16) exceed 'query_len' = 100}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x16x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x16x32xf32>) offsets(%x, %c90) query_len(%c100) scale(0.125) mask(causal, bottom_right) -> tensor<4x16x32xf32>
  return
}

// -----

func.func @negative_query_len(%q: tensor<4x16x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x16x32xf32>, %x: index) {
  %m = arith.constant -1 : index
  // expected-error @+1 {{'query_len' must be non-negative, got -1}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x16x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x16x32xf32>) offsets(%x, %x) query_len(%m) scale(0.125) -> tensor<4x16x32xf32>
  return
}

// -----

// The generic form can spell offsets without a query_len, and the reverse.
func.func @offsets_without_query_len(%q: tensor<16x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x32xf32>, %o: tensor<16x32xf32>, %x: index) {
  // expected-error @+1 {{has 'offsets' but no 'query_len', the query length of the attention it is a tile of}}
  %r = "flash.attention"(%q, %k, %v, %o, %x) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1, 0>, scale = 1.250000e-01 : f32}> ({}) : (tensor<16x64xf32>, tensor<70x64xf32>, tensor<70x32xf32>, tensor<16x32xf32>, index) -> tensor<16x32xf32>
  return
}

// -----

func.func @query_len_without_offsets(%q: tensor<16x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x32xf32>, %o: tensor<16x32xf32>, %n: index) {
  // expected-error @+1 {{has a 'query_len' but no 'offsets'; a tile needs both}}
  %r = "flash.attention"(%q, %k, %v, %o, %n) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 1>, scale = 1.250000e-01 : f32}> ({}) : (tensor<16x64xf32>, tensor<70x64xf32>, tensor<70x32xf32>, tensor<16x32xf32>, index) -> tensor<16x32xf32>
  return
}

// -----

func.func @offsets_not_index(%q: tensor<16x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x32xf32>, %o: tensor<16x32xf32>, %x: i64, %n: index) {
  // expected-error @+1 {{operand #4 must be variadic of index, but got 'i64'}}
  %r = "flash.attention"(%q, %k, %v, %o, %x, %n) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1, 1>, scale = 1.250000e-01 : f32}> ({}) : (tensor<16x64xf32>, tensor<70x64xf32>, tensor<70x32xf32>, tensor<16x32xf32>, i64, index) -> tensor<16x32xf32>
  return
}

// -----

func.func @tile_longer_than_query_len(%q: tensor<4x16x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x16x32xf32>, %x: index) {
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{'query' has Lq = 16 rows, more than 'query_len' = 8 of the attention it is a tile of}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x16x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x16x32xf32>) offsets(%x, %x) query_len(%c8) scale(0.125) mask(causal) -> tensor<4x16x32xf32>
  return
}

// -----

func.func @sinks_per_head(%q: tensor<2x4x100x64xf32>, %k: tensor<2x4x70x64xf32>, %v: tensor<2x4x70x32xf32>, %o: tensor<2x4x100x32xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'sinks' 'tensor<8xf32>' must have one logit per query head (4 in 'query' 'tensor<2x4x100x64xf32>')}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x4x100x64xf32>, tensor<2x4x70x64xf32>, tensor<2x4x70x32xf32>) outs(%o : tensor<2x4x100x32xf32>) sinks(%s : tensor<8xf32>) scale(0.125) -> tensor<2x4x100x32xf32>
  return
}

// -----

func.func @sinks_rank(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{'sinks' must be a 1-D tensor of f32, f16 or bf16 (one logit per query head), got 'tensor<4x1xf32>'}}
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>) outs(%o : tensor<4x100x32xf32>) sinks(%s : tensor<4x1xf32>) scale(0.125) -> tensor<4x100x32xf32>
  return
}

// -----

func.func @sinks_no_heads(%q: tensor<100x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x32xf32>, %o: tensor<100x32xf32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'sinks' are one logit per query head, but 'query' 'tensor<100x64xf32>' has no heads dim}}
  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf32>, tensor<70x64xf32>, tensor<70x32xf32>) outs(%o : tensor<100x32xf32>) sinks(%s : tensor<1xf32>) scale(0.125) -> tensor<100x32xf32>
  return
}
