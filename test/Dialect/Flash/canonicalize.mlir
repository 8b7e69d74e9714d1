// RUN: flash-opt %s -split-input-file -canonicalize | FileCheck %s

// Rounding the f32 result to bf16 afterwards is the op's own output rounding.
// CHECK-LABEL: func.func @fold_truncation_generic
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4x100x48xbf16>
// CHECK: %[[R:.+]]:2 = flash.attention {{.*}} outs(%[[E]], %{{.*}} : tensor<4x100x48xbf16>, tensor<4x100xf32>) captures
// CHECK: score_mod
// CHECK: } -> tensor<4x100x48xbf16>, tensor<4x100xf32>
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @fold_truncation_generic(%q: tensor<4x100x64xbf16>, %k: tensor<4x70x64xbf16>, %v: tensor<4x70x48xbf16>, %bias: tensor<100x70xf32>, %l: tensor<4x100xf32>) -> (tensor<4x100x48xbf16>, tensor<4x100xf32>) {
  %e = tensor.empty() : tensor<4x100x48xf32>
  %r:2 = flash.attention ins(%q, %k, %v : tensor<4x100x64xbf16>, tensor<4x70x64xbf16>, tensor<4x70x48xbf16>)
         outs(%e, %l : tensor<4x100x48xf32>, tensor<4x100xf32>) captures(%bias : tensor<100x70xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<100x70xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<100x70xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<4x100x48xf32>, tensor<4x100xf32>
  %e2 = tensor.empty() : tensor<4x100x48xbf16>
  %t = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r#0 : tensor<4x100x48xf32>) outs(%e2 : tensor<4x100x48xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  } -> tensor<4x100x48xbf16>
  return %t, %r#1 : tensor<4x100x48xbf16>, tensor<4x100xf32>
}

// -----

// CHECK-LABEL: func.func @fold_truncf_on_tensor
// CHECK: flash.attention {{.*}} -> tensor<100x48xf16>
// CHECK-NOT: arith.truncf
func.func @fold_truncf_on_tensor(%q: tensor<100x64xf16>, %k: tensor<70x64xf16>, %v: tensor<70x48xf16>) -> tensor<100x48xf16> {
  %e = tensor.empty() : tensor<100x48xf32>
  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf16>, tensor<70x64xf16>, tensor<70x48xf16>)
         outs(%e : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
  %t = arith.truncf %r : tensor<100x48xf32> to tensor<100x48xf16>
  return %t : tensor<100x48xf16>
}

// -----

// The f32 result is also returned: rounding it would lose it.
// CHECK-LABEL: func.func @keep_when_f32_result_used
// CHECK: flash.attention {{.*}} -> tensor<100x48xf32>
// CHECK: arith.truncf
func.func @keep_when_f32_result_used(%q: tensor<100x64xf16>, %k: tensor<70x64xf16>, %v: tensor<70x48xf16>) -> (tensor<100x48xf16>, tensor<100x48xf32>) {
  %e = tensor.empty() : tensor<100x48xf32>
  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf16>, tensor<70x64xf16>, tensor<70x48xf16>)
         outs(%e : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
  %t = arith.truncf %r : tensor<100x48xf32> to tensor<100x48xf16>
  return %t, %r : tensor<100x48xf16>, tensor<100x48xf32>
}

// -----

// A generic that does more than round is not the op's output rounding.
// CHECK-LABEL: func.func @keep_scaled_truncation
// CHECK: flash.attention {{.*}} -> tensor<100x48xf32>
// CHECK: linalg.generic
func.func @keep_scaled_truncation(%q: tensor<100x64xf16>, %k: tensor<70x64xf16>, %v: tensor<70x48xf16>) -> tensor<100x48xf16> {
  %e = tensor.empty() : tensor<100x48xf32>
  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf16>, tensor<70x64xf16>, tensor<70x48xf16>)
         outs(%e : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
  %e2 = tensor.empty() : tensor<100x48xf16>
  %t = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%r : tensor<100x48xf32>) outs(%e2 : tensor<100x48xf16>) {
  ^bb0(%x: f32, %o: f16):
    %two = arith.constant 2.0 : f32
    %s = arith.mulf %x, %two : f32
    %y = arith.truncf %s : f32 to f16
    linalg.yield %y : f16
  } -> tensor<100x48xf16>
  return %t : tensor<100x48xf16>
}

// -----

// Zero offsets with the op's own Lq are no tile at all.
// CHECK-LABEL: func.func @drop_identity_offsets
// CHECK: flash.attention
// CHECK-NOT: offsets
// CHECK-SAME: scale(0.125) mask(causal, bottom_right)
func.func @drop_identity_offsets(%q: tensor<2x16x64xf32>, %k: tensor<2x70x64xf32>, %v: tensor<2x70x32xf32>, %o: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %r = flash.attention ins(%q, %k, %v : tensor<2x16x64xf32>, tensor<2x70x64xf32>, tensor<2x70x32xf32>)
         outs(%o : tensor<2x16x32xf32>) offsets(%c0, %c0) query_len(%c16) scale(0.125) mask(causal, bottom_right) -> tensor<2x16x32xf32>
  return %r : tensor<2x16x32xf32>
}

// -----

// The same with a dynamic Lq read off the query.
// CHECK-LABEL: func.func @drop_identity_offsets_dynamic
// CHECK-NOT: offsets
// CHECK: return
func.func @drop_identity_offsets_dynamic(%q: tensor<?x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x32xf32>, %o: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %q, %c0 : tensor<?x64xf32>
  %r = flash.attention ins(%q, %k, %v : tensor<?x64xf32>, tensor<70x64xf32>, tensor<70x32xf32>)
         outs(%o : tensor<?x32xf32>) offsets(%c0) query_len(%n) scale(0.125) mask(causal) -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

// Without mask and score_mod, offsets move nothing.
// CHECK-LABEL: func.func @drop_unused_offsets
// CHECK: flash.attention
// CHECK-NOT: offsets
// CHECK-SAME: scale(0.125) -> tensor<2x16x32xf32>
func.func @drop_unused_offsets(%q: tensor<2x16x64xf32>, %k: tensor<2x70x64xf32>, %v: tensor<2x70x32xf32>, %o: tensor<2x16x32xf32>, %b: index, %i: index) -> tensor<2x16x32xf32> {
  %c100 = arith.constant 100 : index
  %r = flash.attention ins(%q, %k, %v : tensor<2x16x64xf32>, tensor<2x70x64xf32>, tensor<2x70x32xf32>)
         outs(%o : tensor<2x16x32xf32>) offsets(%b, %i) query_len(%c100) scale(0.125) -> tensor<2x16x32xf32>
  return %r : tensor<2x16x32xf32>
}

// -----

// A real tile keeps them.
// CHECK-LABEL: func.func @keep_tile_offsets
// CHECK: offsets(%{{.*}}, %{{.*}}) query_len(%{{.*}}) scale(0.125) mask(causal)
func.func @keep_tile_offsets(%q: tensor<2x16x64xf32>, %k: tensor<2x70x64xf32>, %v: tensor<2x70x32xf32>, %o: tensor<2x16x32xf32>, %b: index, %i: index) -> tensor<2x16x32xf32> {
  %c100 = arith.constant 100 : index
  %r = flash.attention ins(%q, %k, %v : tensor<2x16x64xf32>, tensor<2x70x64xf32>, tensor<2x70x32xf32>)
         outs(%o : tensor<2x16x32xf32>) offsets(%b, %i) query_len(%c100) scale(0.125) mask(causal) -> tensor<2x16x32xf32>
  return %r : tensor<2x16x32xf32>
}
