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
