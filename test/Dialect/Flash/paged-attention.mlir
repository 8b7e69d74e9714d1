// RUN: flash-opt %s -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file | flash-opt -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file -mlir-print-op-generic | flash-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @decode_gqa_lse
// CHECK: flash.paged_attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x32x1x128xbf16>, tensor<512x16x8x128xbf16>, tensor<512x16x8x128xbf16>)
// CHECK-SAME: pages(%{{.*}}, %{{.*}} : tensor<4x64xi32>, tensor<4xi32>)
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>)
// CHECK-SAME: scale(0.0883883{{[0-9]*}}) -> tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>
func.func @decode_gqa_lse(%q: tensor<4x32x1x128xbf16>, %kc: tensor<512x16x8x128xbf16>,
                          %vc: tensor<512x16x8x128xbf16>, %t: tensor<4x64xi32>, %n: tensor<4xi32>,
                          %o: tensor<4x32x1x128xbf16>, %l: tensor<4x32x1xf32>)
    -> (tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>) {
  %r:2 = flash.paged_attention ins(%q, %kc, %vc : tensor<4x32x1x128xbf16>, tensor<512x16x8x128xbf16>, tensor<512x16x8x128xbf16>)
      pages(%t, %n : tensor<4x64xi32>, tensor<4xi32>)
      outs(%o, %l : tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>)
      scale(0.0883883) -> tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>
  return %r#0, %r#1 : tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>
}

// -----

// Speculative decoding: 6 new queries, causal within each sequence; dynamic
// pool and batch sizes, a page size that is not a power of two, Dv != D.
// CHECK-LABEL: func.func @spec_causal_dynamic
// CHECK: flash.paged_attention {{.*}} pages({{.*}} : tensor<?x?xi32>, tensor<?xi32>)
// CHECK-SAME: scale(0.125) mask(causal, bottom_right) -> tensor<?x4x6x48xf32>
func.func @spec_causal_dynamic(%q: tensor<?x4x6x64xf32>, %kc: tensor<?x48x2x64xf32>,
                               %vc: tensor<?x48x2x48xf32>, %t: tensor<?x?xi32>, %n: tensor<?xi32>,
                               %o: tensor<?x4x6x48xf32>) -> tensor<?x4x6x48xf32> {
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<?x4x6x64xf32>, tensor<?x48x2x64xf32>, tensor<?x48x2x48xf32>)
      pages(%t, %n : tensor<?x?xi32>, tensor<?xi32>)
      outs(%o : tensor<?x4x6x48xf32>)
      scale(0.125) mask(causal, bottom_right) -> tensor<?x4x6x48xf32>
  return %r : tensor<?x4x6x48xf32>
}

// -----

// gpt-oss served from a paged cache: a learned sink logit per query head.
// CHECK-LABEL: func.func @sinks_window
// CHECK: flash.paged_attention {{.*}} outs(%{{.*}} : tensor<2x8x1x64xbf16>) sinks(%{{.*}} : tensor<8xf32>)
// CHECK-SAME: scale(0.125) mask(sliding_window, 128, bottom_right) -> tensor<2x8x1x64xbf16>
func.func @sinks_window(%q: tensor<2x8x1x64xbf16>, %kc: tensor<40x16x2x64xbf16>,
                        %vc: tensor<40x16x2x64xbf16>, %t: tensor<2x20xi32>, %n: tensor<2xi32>,
                        %o: tensor<2x8x1x64xbf16>, %s: tensor<8xf32>) -> tensor<2x8x1x64xbf16> {
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<2x8x1x64xbf16>, tensor<40x16x2x64xbf16>, tensor<40x16x2x64xbf16>)
      pages(%t, %n : tensor<2x20xi32>, tensor<2xi32>)
      outs(%o : tensor<2x8x1x64xbf16>) sinks(%s : tensor<8xf32>)
      scale(0.125) mask(sliding_window, 128, bottom_right) -> tensor<2x8x1x64xbf16>
  return %r : tensor<2x8x1x64xbf16>
}

// -----

// A score_mod with a capture: soft-capping and a per-head bias along the
// key's position in its sequence.
// CHECK-LABEL: func.func @score_mod
// CHECK: flash.paged_attention {{.*}} outs(%{{.*}} : tensor<2x8x1x64xbf16>) captures(%{{.*}} : tensor<8x64xf32>) sinks(%{{.*}} : tensor<8xf32>)
// CHECK-SAME: scale(0.125) score_mod {
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<8x64xf32>):
// CHECK: math.tanh
// CHECK: tensor.extract
// CHECK: flash.yield
// CHECK: } -> tensor<2x8x1x64xbf16>
func.func @score_mod(%q: tensor<2x8x1x64xbf16>, %kc: tensor<40x16x2x64xbf16>,
                     %vc: tensor<40x16x2x64xbf16>, %t: tensor<2x4xi32>, %n: tensor<2xi32>,
                     %o: tensor<2x8x1x64xbf16>, %bias: tensor<8x64xf32>, %s: tensor<8xf32>) -> tensor<2x8x1x64xbf16> {
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<2x8x1x64xbf16>, tensor<40x16x2x64xbf16>, tensor<40x16x2x64xbf16>)
      pages(%t, %n : tensor<2x4xi32>, tensor<2xi32>)
      outs(%o : tensor<2x8x1x64xbf16>) captures(%bias : tensor<8x64xf32>) sinks(%s : tensor<8xf32>)
      scale(0.125) score_mod {
      ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<8x64xf32>):
        %cap = arith.constant 30.0 : f32
        %d = arith.divf %x, %cap : f32
        %th = math.tanh %d : f32
        %y = arith.mulf %th, %cap : f32
        %e = tensor.extract %c[%h, %j] : tensor<8x64xf32>
        %z = arith.addf %y, %e : f32
        flash.yield %z : f32
      } -> tensor<2x8x1x64xbf16>
  return %r : tensor<2x8x1x64xbf16>
}
