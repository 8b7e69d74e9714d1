// TOSA 1.0 attention as TFLite/ONNX/Dynamo frontends write it. The pass
// normalises TOSA with upstream tosa-to-linalg(-named)/-arith/-tensor first.
// Shapes: Lq = 10, Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @tosa_reciprocal_scale_additive_mask
// CHECK-SAME: (%[[Q:.+]]: tensor<4x10x16xf32>, %[[K:.+]]: tensor<4x12x16xf32>, %[[V:.+]]: tensor<4x12x8xf32>, %[[M:.+]]: tensor<1x10x12xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<4x10x16xf32>, tensor<4x12x16xf32>, tensor<4x12x8xf32>)
// CHECK-SAME: captures(%[[M]] : tensor<1x10x12xf32>) scale(0.25) score_mod
// CHECK: arith.addf
// CHECK-NOT: tosa.
// TF/buddy: K transposed, scores times reciprocal(const), additive mask,
// reduce_max/sub/exp/reduce_sum/reciprocal/mul softmax.
func.func @tosa_reciprocal_scale_additive_mask(%q: tensor<4x10x16xf32>, %k: tensor<4x12x16xf32>, %v: tensor<4x12x8xf32>, %mask: tensor<1x10x12xf32>) -> tensor<4x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x12x16xf32>) -> tensor<4x16x12xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x10x16xf32>, tensor<4x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x12xf32>
  %c = "tosa.const"() <{values = dense<4.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %r = tosa.reciprocal %c : (tensor<1x1x1xf32>) -> tensor<1x1x1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %ss = tosa.mul %s, %r, %shift : (tensor<4x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %sm = tosa.add %ss, %mask : (tensor<4x10x12xf32>, tensor<1x10x12xf32>) -> tensor<4x10x12xf32>
  %m = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<4x10x12xf32>) -> tensor<4x10x1xf32>
  %d = tosa.sub %sm, %m : (tensor<4x10x12xf32>, tensor<4x10x1xf32>) -> tensor<4x10x12xf32>
  %e = tosa.exp %d : (tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<4x10x12xf32>) -> tensor<4x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<4x10x12xf32>, tensor<4x10x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x10x12xf32>, tensor<4x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x8xf32>
  return %o : tensor<4x10x8xf32>
}

// -----

// CHECK-LABEL: func @tosa_softmax_without_max_onnx
// CHECK: flash.attention
// CHECK-SAME: scale(0.125) -> tensor<4x10x8xf32>
// CHECK-NOT: score_mod
// onnx-mlir's ONNX->TOSA softmax: exp/reduce_sum/reciprocal/mul, no max.
func.func @tosa_softmax_without_max_onnx(%q: tensor<4x10x16xf32>, %k: tensor<4x12x16xf32>, %v: tensor<4x12x8xf32>) -> tensor<4x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x12x16xf32>) -> tensor<4x16x12xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x10x16xf32>, tensor<4x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x12xf32>
  %c = "tosa.const"() <{values = dense<0.125> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<4x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %e = tosa.exp %ss : (tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<4x10x12xf32>) -> tensor<4x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<4x10x12xf32>, tensor<4x10x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x10x12xf32>, tensor<4x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x8xf32>
  return %o : tensor<4x10x8xf32>
}

// -----

// CHECK-LABEL: func @tosa_rank4_heads_reshaped_for_matmul
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<3x10x16xf32>, tensor<3x12x16xf32>, tensor<3x12x8xf32>)
// CHECK-SAME: scale(0.25)
// CHECK: tensor.expand_shape
// tosa.matmul is rank 3: [1, H, S, D] is reshaped around each matmul (buddy).
func.func @tosa_rank4_heads_reshaped_for_matmul(%q: tensor<1x3x10x16xf32>, %k: tensor<1x3x12x16xf32>, %v: tensor<1x3x12x8xf32>) -> tensor<1x3x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %qs = tosa.const_shape {values = dense<[3, 10, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %ks = tosa.const_shape {values = dense<[3, 12, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %vs = tosa.const_shape {values = dense<[3, 12, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %os = tosa.const_shape {values = dense<[1, 3, 10, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kt4 = tosa.transpose %k {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x3x12x16xf32>) -> tensor<1x3x16x12xf32>
  %kts = tosa.const_shape {values = dense<[3, 16, 12]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %q3 = tosa.reshape %q, %qs : (tensor<1x3x10x16xf32>, !tosa.shape<3>) -> tensor<3x10x16xf32>
  %kt3 = tosa.reshape %kt4, %kts : (tensor<1x3x16x12xf32>, !tosa.shape<3>) -> tensor<3x16x12xf32>
  %v3 = tosa.reshape %v, %vs : (tensor<1x3x12x8xf32>, !tosa.shape<3>) -> tensor<3x12x8xf32>
  %s = tosa.matmul %q3, %kt3, %zp, %zp : (tensor<3x10x16xf32>, tensor<3x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x10x12xf32>
  %c = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<3x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<3x10x12xf32>
  %m = tosa.reduce_max %ss {axis = 2 : i32} : (tensor<3x10x12xf32>) -> tensor<3x10x1xf32>
  %d = tosa.sub %ss, %m : (tensor<3x10x12xf32>, tensor<3x10x1xf32>) -> tensor<3x10x12xf32>
  %e = tosa.exp %d : (tensor<3x10x12xf32>) -> tensor<3x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<3x10x12xf32>) -> tensor<3x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<3x10x1xf32>) -> tensor<3x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<3x10x12xf32>, tensor<3x10x1xf32>, tensor<1xi8>) -> tensor<3x10x12xf32>
  %o3 = tosa.matmul %p, %v3, %zp, %zp : (tensor<3x10x12xf32>, tensor<3x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x10x8xf32>
  %o = tosa.reshape %o3, %os : (tensor<3x10x8xf32>, !tosa.shape<4>) -> tensor<1x3x10x8xf32>
  return %o : tensor<1x3x10x8xf32>
}

// -----

// CHECK-LABEL: func @tosa_causal_select_range_constants
// CHECK: flash.attention
// CHECK-SAME: scale(0.25) mask(causal) -> tensor<4x10x8xf32>
// CHECK-NOT: score_mod
// rocMLIR: select(greater(col_range, row_range), -inf, s) with constant ranges.
func.func @tosa_causal_select_range_constants(%q: tensor<4x10x16xf32>, %k: tensor<4x12x16xf32>, %v: tensor<4x12x8xf32>) -> tensor<4x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x12x16xf32>) -> tensor<4x16x12xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x10x16xf32>, tensor<4x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x12xf32>
  %c = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<4x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %rows = "tosa.const"() <{values = dense<[[[0], [1], [2], [3], [4], [5], [6], [7], [8], [9]]]> : tensor<1x10x1xi32>}> : () -> tensor<1x10x1xi32>
  %cols = "tosa.const"() <{values = dense<[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]]]> : tensor<1x1x12xi32>}> : () -> tensor<1x1x12xi32>
  %future = tosa.greater %cols, %rows : (tensor<1x1x12xi32>, tensor<1x10x1xi32>) -> tensor<1x10x12xi1>
  %ninf = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %sm = tosa.select %future, %ninf, %ss : (tensor<1x10x12xi1>, tensor<1x1x1xf32>, tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %m = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<4x10x12xf32>) -> tensor<4x10x1xf32>
  %d = tosa.sub %sm, %m : (tensor<4x10x12xf32>, tensor<4x10x1xf32>) -> tensor<4x10x12xf32>
  %e = tosa.exp %d : (tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<4x10x12xf32>) -> tensor<4x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<4x10x12xf32>, tensor<4x10x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x10x12xf32>, tensor<4x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x8xf32>
  return %o : tensor<4x10x8xf32>
}

// -----

// CHECK-LABEL: func @tosa_gqa_reshape_add_zeros_reshape
// CHECK-SAME: (%[[Q:.+]]: tensor<2x6x10x16xf32>, %[[K:.+]]: tensor<2x2x12x16xf32>, %[[V:.+]]: tensor<2x2x12x8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<12x10x16xf32>, tensor<4x12x16xf32>, tensor<4x12x8xf32>)
// CHECK-SAME: scale(0.25)
// buddy GQA: K/V reshaped to [B, Hkv, 1, L, D], broadcast by adding a zeros
// tensor [B, Hkv, G, L, D], reshaped to [B, Hkv*G, L, D] and then to
// [B*H, L, D] for the rank-3 tosa.matmul. Query head b*6 + h reads KV head
// b*2 + h/3: group factor 3 on the collapsed batch, K/V never repeated.
func.func @tosa_gqa_reshape_add_zeros_reshape(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>) -> tensor<2x6x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %k5s = tosa.const_shape {values = dense<[2, 2, 1, 12, 16]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v5s = tosa.const_shape {values = dense<[2, 2, 1, 12, 8]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %k5 = tosa.reshape %k, %k5s : (tensor<2x2x12x16xf32>, !tosa.shape<5>) -> tensor<2x2x1x12x16xf32>
  %v5 = tosa.reshape %v, %v5s : (tensor<2x2x12x8xf32>, !tosa.shape<5>) -> tensor<2x2x1x12x8xf32>
  %kz = "tosa.const"() <{values = dense<0.0> : tensor<2x2x3x12x16xf32>}> : () -> tensor<2x2x3x12x16xf32>
  %vz = "tosa.const"() <{values = dense<0.0> : tensor<2x2x3x12x8xf32>}> : () -> tensor<2x2x3x12x8xf32>
  %kb = tosa.add %k5, %kz : (tensor<2x2x1x12x16xf32>, tensor<2x2x3x12x16xf32>) -> tensor<2x2x3x12x16xf32>
  %vb = tosa.add %v5, %vz : (tensor<2x2x1x12x8xf32>, tensor<2x2x3x12x8xf32>) -> tensor<2x2x3x12x8xf32>
  %k4s = tosa.const_shape {values = dense<[2, 6, 12, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v4s = tosa.const_shape {values = dense<[2, 6, 12, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kr = tosa.reshape %kb, %k4s : (tensor<2x2x3x12x16xf32>, !tosa.shape<4>) -> tensor<2x6x12x16xf32>
  %vr = tosa.reshape %vb, %v4s : (tensor<2x2x3x12x8xf32>, !tosa.shape<4>) -> tensor<2x6x12x8xf32>
  %kt = tosa.transpose %kr {perms = array<i32: 0, 1, 3, 2>} : (tensor<2x6x12x16xf32>) -> tensor<2x6x16x12xf32>
  %q3s = tosa.const_shape {values = dense<[12, 10, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kt3s = tosa.const_shape {values = dense<[12, 16, 12]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v3s = tosa.const_shape {values = dense<[12, 12, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %os = tosa.const_shape {values = dense<[2, 6, 10, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %q3 = tosa.reshape %q, %q3s : (tensor<2x6x10x16xf32>, !tosa.shape<3>) -> tensor<12x10x16xf32>
  %kt3 = tosa.reshape %kt, %kt3s : (tensor<2x6x16x12xf32>, !tosa.shape<3>) -> tensor<12x16x12xf32>
  %v3 = tosa.reshape %vr, %v3s : (tensor<2x6x12x8xf32>, !tosa.shape<3>) -> tensor<12x12x8xf32>
  %s = tosa.matmul %q3, %kt3, %zp, %zp : (tensor<12x10x16xf32>, tensor<12x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x10x12xf32>
  %c = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<12x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<12x10x12xf32>
  %m = tosa.reduce_max %ss {axis = 2 : i32} : (tensor<12x10x12xf32>) -> tensor<12x10x1xf32>
  %d = tosa.sub %ss, %m : (tensor<12x10x12xf32>, tensor<12x10x1xf32>) -> tensor<12x10x12xf32>
  %e = tosa.exp %d : (tensor<12x10x12xf32>) -> tensor<12x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<12x10x12xf32>) -> tensor<12x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<12x10x1xf32>) -> tensor<12x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<12x10x12xf32>, tensor<12x10x1xf32>, tensor<1xi8>) -> tensor<12x10x12xf32>
  %o3 = tosa.matmul %p, %v3, %zp, %zp : (tensor<12x10x12xf32>, tensor<12x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x10x8xf32>
  %o = tosa.reshape %o3, %os : (tensor<12x10x8xf32>, !tosa.shape<4>) -> tensor<2x6x10x8xf32>
  return %o : tensor<2x6x10x8xf32>
}

// -----

// CHECK-LABEL: func @tosa_tile_order_add_zeros_stays_materialised
// CHECK: linalg.generic
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<12x10x16xf32>, tensor<12x12x16xf32>, tensor<12x12x8xf32>)
// The same spelling with the zeros' group dim outside the KV heads
// ([B, G, Hkv, L, D]) tiles the heads (h reads h mod Hkv): not grouped-query
// attention, so the repeated K/V stay materialised and the group size is 1.
func.func @tosa_tile_order_add_zeros_stays_materialised(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>) -> tensor<2x6x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %k5s = tosa.const_shape {values = dense<[2, 1, 2, 12, 16]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v5s = tosa.const_shape {values = dense<[2, 1, 2, 12, 8]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %k5 = tosa.reshape %k, %k5s : (tensor<2x2x12x16xf32>, !tosa.shape<5>) -> tensor<2x1x2x12x16xf32>
  %v5 = tosa.reshape %v, %v5s : (tensor<2x2x12x8xf32>, !tosa.shape<5>) -> tensor<2x1x2x12x8xf32>
  %kz = "tosa.const"() <{values = dense<0.0> : tensor<2x3x2x12x16xf32>}> : () -> tensor<2x3x2x12x16xf32>
  %vz = "tosa.const"() <{values = dense<0.0> : tensor<2x3x2x12x8xf32>}> : () -> tensor<2x3x2x12x8xf32>
  %kb = tosa.add %k5, %kz : (tensor<2x1x2x12x16xf32>, tensor<2x3x2x12x16xf32>) -> tensor<2x3x2x12x16xf32>
  %vb = tosa.add %v5, %vz : (tensor<2x1x2x12x8xf32>, tensor<2x3x2x12x8xf32>) -> tensor<2x3x2x12x8xf32>
  %k4s = tosa.const_shape {values = dense<[2, 6, 12, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v4s = tosa.const_shape {values = dense<[2, 6, 12, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kr = tosa.reshape %kb, %k4s : (tensor<2x3x2x12x16xf32>, !tosa.shape<4>) -> tensor<2x6x12x16xf32>
  %vr = tosa.reshape %vb, %v4s : (tensor<2x3x2x12x8xf32>, !tosa.shape<4>) -> tensor<2x6x12x8xf32>
  %kt = tosa.transpose %kr {perms = array<i32: 0, 1, 3, 2>} : (tensor<2x6x12x16xf32>) -> tensor<2x6x16x12xf32>
  %q3s = tosa.const_shape {values = dense<[12, 10, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kt3s = tosa.const_shape {values = dense<[12, 16, 12]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v3s = tosa.const_shape {values = dense<[12, 12, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %os = tosa.const_shape {values = dense<[2, 6, 10, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %q3 = tosa.reshape %q, %q3s : (tensor<2x6x10x16xf32>, !tosa.shape<3>) -> tensor<12x10x16xf32>
  %kt3 = tosa.reshape %kt, %kt3s : (tensor<2x6x16x12xf32>, !tosa.shape<3>) -> tensor<12x16x12xf32>
  %v3 = tosa.reshape %vr, %v3s : (tensor<2x6x12x8xf32>, !tosa.shape<3>) -> tensor<12x12x8xf32>
  %s = tosa.matmul %q3, %kt3, %zp, %zp : (tensor<12x10x16xf32>, tensor<12x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x10x12xf32>
  %c = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<12x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<12x10x12xf32>
  %m = tosa.reduce_max %ss {axis = 2 : i32} : (tensor<12x10x12xf32>) -> tensor<12x10x1xf32>
  %d = tosa.sub %ss, %m : (tensor<12x10x12xf32>, tensor<12x10x1xf32>) -> tensor<12x10x12xf32>
  %e = tosa.exp %d : (tensor<12x10x12xf32>) -> tensor<12x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<12x10x12xf32>) -> tensor<12x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<12x10x1xf32>) -> tensor<12x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<12x10x12xf32>, tensor<12x10x1xf32>, tensor<1xi8>) -> tensor<12x10x12xf32>
  %o3 = tosa.matmul %p, %v3, %zp, %zp : (tensor<12x10x12xf32>, tensor<12x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x10x8xf32>
  %o = tosa.reshape %o3, %os : (tensor<12x10x8xf32>, !tosa.shape<4>) -> tensor<2x6x10x8xf32>
  return %o : tensor<2x6x10x8xf32>
}
