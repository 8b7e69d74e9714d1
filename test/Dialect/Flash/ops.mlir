// RUN: flash-opt %s -split-input-file | FileCheck %s
// Printing and re-parsing must give the same IR (generic form too).
// RUN: flash-opt %s -split-input-file | flash-opt -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file -mlir-print-op-generic | flash-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @no_batch
// CHECK: flash.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<100x64xf32>, tensor<70x64xf32>, tensor<70x48xf32>) outs(%{{.*}} : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
func.func @no_batch(%q: tensor<100x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x48xf32>, %o: tensor<100x48xf32>) -> tensor<100x48xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf32>, tensor<70x64xf32>, tensor<70x48xf32>)
         outs(%o : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
  return %r : tensor<100x48xf32>
}

// -----

// CHECK-LABEL: func.func @two_batch_dims_bf16
// CHECK: scale(0.0883883461) -> tensor<2x8x100x32xbf16>
func.func @two_batch_dims_bf16(%q: tensor<2x8x100x64xbf16>, %k: tensor<2x8x70x64xbf16>, %v: tensor<2x8x70x32xbf16>, %o: tensor<2x8x100x32xbf16>) -> tensor<2x8x100x32xbf16> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x8x100x64xbf16>, tensor<2x8x70x64xbf16>, tensor<2x8x70x32xbf16>)
         outs(%o : tensor<2x8x100x32xbf16>) scale(0.0883883476) -> tensor<2x8x100x32xbf16>
  return %r : tensor<2x8x100x32xbf16>
}

// -----

// CHECK-LABEL: func.func @f16_in_f32_out
// CHECK: outs(%{{.*}} : tensor<3x100x32xf32>) scale(1.0)
func.func @f16_in_f32_out(%q: tensor<3x100x64xf16>, %k: tensor<3x70x64xf16>, %v: tensor<3x70x32xf16>, %o: tensor<3x100x32xf32>) -> tensor<3x100x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<3x100x64xf16>, tensor<3x70x64xf16>, tensor<3x70x32xf16>)
         outs(%o : tensor<3x100x32xf32>) scale(1.0) -> tensor<3x100x32xf32>
  return %r : tensor<3x100x32xf32>
}

// -----

// CHECK-LABEL: func.func @gqa
// CHECK: tensor<2x8x100x64xf16>, tensor<2x2x70x64xf16>, tensor<2x2x70x32xf16>
func.func @gqa(%q: tensor<2x8x100x64xf16>, %k: tensor<2x2x70x64xf16>, %v: tensor<2x2x70x32xf16>, %o: tensor<2x8x100x32xf16>) -> tensor<2x8x100x32xf16> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x8x100x64xf16>, tensor<2x2x70x64xf16>, tensor<2x2x70x32xf16>)
         outs(%o : tensor<2x8x100x32xf16>) scale(0.125) -> tensor<2x8x100x32xf16>
  return %r : tensor<2x8x100x32xf16>
}

// -----

// CHECK-LABEL: func.func @mqa
// CHECK: tensor<8x100x64xf32>, tensor<1x70x64xf32>
func.func @mqa(%q: tensor<8x100x64xf32>, %k: tensor<1x70x64xf32>, %v: tensor<1x70x32xf32>, %o: tensor<8x100x32xf32>) -> tensor<8x100x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<8x100x64xf32>, tensor<1x70x64xf32>, tensor<1x70x32xf32>)
         outs(%o : tensor<8x100x32xf32>) scale(0.125) -> tensor<8x100x32xf32>
  return %r : tensor<8x100x32xf32>
}

// -----

// CHECK-LABEL: func.func @causal_top_left
// CHECK: scale(0.125) mask(causal) -> tensor<4x100x32xf32>
func.func @causal_top_left(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) -> tensor<4x100x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>)
         outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(causal) -> tensor<4x100x32xf32>
  return %r : tensor<4x100x32xf32>
}

// -----

// An explicit top_left alignment is the default and prints without it.
// CHECK-LABEL: func.func @causal_explicit_top_left
// CHECK: mask(causal) ->
func.func @causal_explicit_top_left(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) -> tensor<4x100x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>)
         outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(causal, top_left) -> tensor<4x100x32xf32>
  return %r : tensor<4x100x32xf32>
}

// -----

// CHECK-LABEL: func.func @causal_bottom_right
// CHECK: mask(causal, bottom_right)
func.func @causal_bottom_right(%q: tensor<4x70x64xf32>, %k: tensor<4x100x64xf32>, %v: tensor<4x100x32xf32>, %o: tensor<4x70x32xf32>) -> tensor<4x70x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x70x64xf32>, tensor<4x100x64xf32>, tensor<4x100x32xf32>)
         outs(%o : tensor<4x70x32xf32>) scale(0.125) mask(causal, bottom_right) -> tensor<4x70x32xf32>
  return %r : tensor<4x70x32xf32>
}

// -----

// CHECK-LABEL: func.func @sliding_window
// CHECK: mask(sliding_window, 16, bottom_right)
func.func @sliding_window(%q: tensor<4x70x64xf32>, %k: tensor<4x100x64xf32>, %v: tensor<4x100x32xf32>, %o: tensor<4x70x32xf32>) -> tensor<4x70x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x70x64xf32>, tensor<4x100x64xf32>, tensor<4x100x32xf32>)
         outs(%o : tensor<4x70x32xf32>) scale(0.125) mask(sliding_window, 16, bottom_right) -> tensor<4x70x32xf32>
  return %r : tensor<4x70x32xf32>
}

// -----

// CHECK-LABEL: func.func @with_lse
// CHECK: outs(%{{.*}}, %{{.*}} : tensor<4x100x32xf32>, tensor<4x100xf32>)
// CHECK-SAME: -> tensor<4x100x32xf32>, tensor<4x100xf32>
func.func @with_lse(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %l: tensor<4x100xf32>) -> (tensor<4x100x32xf32>, tensor<4x100xf32>) {
  %r:2 = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>)
         outs(%o, %l : tensor<4x100x32xf32>, tensor<4x100xf32>) scale(0.125) -> tensor<4x100x32xf32>, tensor<4x100xf32>
  return %r#0, %r#1 : tensor<4x100x32xf32>, tensor<4x100xf32>
}

// -----

// CHECK-LABEL: func.func @bias_score_mod
// CHECK: captures(%{{.*}} : tensor<100x70xf32>) scale(0.125) score_mod {
// CHECK: ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %[[I:.+]]: index, %[[J:.+]]: index, %[[B:.+]]: tensor<100x70xf32>):
// CHECK:   %[[X:.+]] = tensor.extract %[[B]][%[[I]], %[[J]]]
// CHECK:   %[[R:.+]] = arith.addf %[[S]], %[[X]] : f32
// CHECK:   flash.yield %[[R]] : f32
// CHECK: } -> tensor<4x100x32xf32>
func.func @bias_score_mod(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>, %bias: tensor<100x70xf32>) -> tensor<4x100x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>)
         outs(%o : tensor<4x100x32xf32>) captures(%bias : tensor<100x70xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<100x70xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<100x70xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<4x100x32xf32>
  return %r : tensor<4x100x32xf32>
}

// -----

// Soft-capping needs no capture: cap * tanh(s / cap).
// CHECK-LABEL: func.func @softcap_score_mod
// CHECK: scale(0.125) mask(causal) score_mod {
// CHECK: math.tanh
func.func @softcap_score_mod(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x32xf32>, %o: tensor<4x100x32xf32>) -> tensor<4x100x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x32xf32>)
         outs(%o : tensor<4x100x32xf32>) scale(0.125) mask(causal)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index):
           %cap = arith.constant 30.0 : f32
           %d = arith.divf %s, %cap : f32
           %t = math.tanh %d : f32
           %y = arith.mulf %t, %cap : f32
           flash.yield %y : f32
         } -> tensor<4x100x32xf32>
  return %r : tensor<4x100x32xf32>
}

// -----

// A boolean padding mask [batch, Lk] and an ALiBi slope per head together.
// CHECK-LABEL: func.func @padding_mask_and_alibi
// CHECK: captures(%{{.*}}, %{{.*}} : tensor<2x70xi1>, tensor<8xf32>)
func.func @padding_mask_and_alibi(%q: tensor<2x8x100x64xf32>, %k: tensor<2x8x70x64xf32>, %v: tensor<2x8x70x32xf32>, %o: tensor<2x8x100x32xf32>, %keep: tensor<2x70xi1>, %slopes: tensor<8xf32>) -> tensor<2x8x100x32xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x8x100x64xf32>, tensor<2x8x70x64xf32>, tensor<2x8x70x32xf32>)
         outs(%o : tensor<2x8x100x32xf32>) captures(%keep, %slopes : tensor<2x70xi1>, tensor<8xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %kt: tensor<2x70xi1>, %st: tensor<8xf32>):
           %slope = tensor.extract %st[%h] : tensor<8xf32>
           %d = arith.subi %j, %i : index
           %di = arith.index_cast %d : index to i64
           %df = arith.sitofp %di : i64 to f32
           %bias = arith.mulf %slope, %df : f32
           %s2 = arith.addf %s, %bias : f32
           %keepit = tensor.extract %kt[%b, %j] : tensor<2x70xi1>
           %ninf = arith.constant 0xFF800000 : f32
           %y = arith.select %keepit, %s2, %ninf : f32
           flash.yield %y : f32
         } -> tensor<2x8x100x32xf32>
  return %r : tensor<2x8x100x32xf32>
}

// -----

// Lengths and batch are dynamic, as for serving; D and Dv stay static.
// CHECK-LABEL: func.func @dynamic_lengths
// CHECK: tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>, tensor<?x8x?x80xbf16>
func.func @dynamic_lengths(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x8x?x64xbf16>, %v: tensor<?x8x?x80xbf16>, %o: tensor<?x8x?x80xbf16>) -> tensor<?x8x?x80xbf16> {
  %r = flash.attention ins(%q, %k, %v : tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>, tensor<?x8x?x80xbf16>)
         outs(%o : tensor<?x8x?x80xbf16>) scale(0.125) mask(causal, bottom_right) -> tensor<?x8x?x80xbf16>
  return %r : tensor<?x8x?x80xbf16>
}

// -----

// The mask also exists as a standalone attribute.
// CHECK-LABEL: func.func @mask_attribute
// CHECK: test.masks = [#flash.mask<none>, #flash.mask<causal, bottom_right>, #flash.mask<sliding_window, 128>]
func.func @mask_attribute() attributes {test.masks = [#flash.mask<none>, #flash.mask<causal, bottom_right>, #flash.mask<sliding_window, 128>]} {
  return
}

// -----

// A tile of a larger attention: offsets per batch dim, then the query row,
// and the query length the bottom-right mask aligns to.
// CHECK-LABEL: func.func @tile_offsets
// CHECK-SAME: %[[B:[a-z0-9]+]]: index, %[[H:[a-z0-9]+]]: index, %[[I:[a-z0-9]+]]: index, %[[N:[a-z0-9]+]]: index
// CHECK: outs(%{{.*}} : tensor<1x4x16x32xbf16>) offsets(%[[B]], %[[H]], %[[I]]) query_len(%[[N]]) scale(0.125) mask(causal, bottom_right) -> tensor<1x4x16x32xbf16>
func.func @tile_offsets(%q: tensor<1x4x16x64xbf16>, %k: tensor<1x1x200x64xbf16>, %v: tensor<1x1x200x32xbf16>, %o: tensor<1x4x16x32xbf16>,
                        %b: index, %h: index, %i: index, %n: index) -> tensor<1x4x16x32xbf16> {
  %r = flash.attention ins(%q, %k, %v : tensor<1x4x16x64xbf16>, tensor<1x1x200x64xbf16>, tensor<1x1x200x32xbf16>)
         outs(%o : tensor<1x4x16x32xbf16>) offsets(%b, %h, %i) query_len(%n)
         scale(0.125) mask(causal, bottom_right) -> tensor<1x4x16x32xbf16>
  return %r : tensor<1x4x16x32xbf16>
}

// -----

// Offsets come after the captures and before the scale.
// CHECK-LABEL: func.func @tile_offsets_score_mod
// CHECK: captures(%{{.*}} : tensor<100x70xf32>) offsets(%{{.*}}, %{{.*}}) query_len(%{{.*}}) scale(0.125)
// CHECK: score_mod
func.func @tile_offsets_score_mod(%q: tensor<1x10x64xf32>, %k: tensor<1x70x64xf32>, %v: tensor<1x70x48xf32>, %o: tensor<1x10x48xf32>,
                                  %bias: tensor<100x70xf32>, %b: index, %i: index) -> tensor<1x10x48xf32> {
  %c100 = arith.constant 100 : index
  %r = flash.attention ins(%q, %k, %v : tensor<1x10x64xf32>, tensor<1x70x64xf32>, tensor<1x70x48xf32>)
         outs(%o : tensor<1x10x48xf32>) captures(%bias : tensor<100x70xf32>) offsets(%b, %i) query_len(%c100) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %bb: index, %ii: index, %jj: index, %bt: tensor<100x70xf32>):
           %x = tensor.extract %bt[%ii, %jj] : tensor<100x70xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<1x10x48xf32>
  return %r : tensor<1x10x48xf32>
}

// -----

// CHECK-LABEL: func.func @sinks
// CHECK: outs(%{{.*}} : tensor<2x4x100x32xbf16>) sinks(%{{.*}} : tensor<4xf32>) scale(0.125) mask(causal)
func.func @sinks(%q: tensor<2x4x100x64xbf16>, %k: tensor<2x2x70x64xbf16>, %v: tensor<2x2x70x32xbf16>, %o: tensor<2x4x100x32xbf16>, %s: tensor<4xf32>) -> tensor<2x4x100x32xbf16> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x4x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x32xbf16>)
         outs(%o : tensor<2x4x100x32xbf16>) sinks(%s : tensor<4xf32>) scale(0.125) mask(causal) -> tensor<2x4x100x32xbf16>
  return %r : tensor<2x4x100x32xbf16>
}
