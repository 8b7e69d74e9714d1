// Between QKᵀ and the softmax: causal masks in every spelling become the
// causal mask kind; biases, padding and KV-length selects, soft-capping and
// ALiBi become score_mod with captures. Shapes: Lq = 10, Lk = 12, D = 16,
// Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @causal_select_index_finfo_min
// CHECK: flash.attention
// CHECK-SAME: scale(1.0) mask(causal) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// where(i >= j, s, finfo.min) from linalg.index compares: causal (Inductor 18).
func.func @causal_select_index_finfo_min(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %fill = arith.constant -3.40282347E+38 : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi sge, %i, %j : index
    %y = arith.select %c, %x0, %fill : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @causal_select_fill_first_minus_1e9
// CHECK: flash.attention
// CHECK-SAME: scale(1.0) mask(causal) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// select(j > i, -1e9, s): the fill on the true side, unsigned compare.
func.func @causal_select_fill_first_minus_1e9(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %fill = arith.constant -1.0e+09 : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %y = arith.select %c, %fill, %x0 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @causal_additive_mask_tensor_torch
// CHECK: flash.attention
// CHECK-SAME: scale(1.0) mask(causal) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// torch-mlir's is_causal: an additive 0/-inf mask tensor from index compares.
func.func @causal_additive_mask_tensor_torch(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %cm_e = tensor.empty() : tensor<10x12xf32>
  %cm = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} outs(%cm_e : tensor<10x12xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %c = arith.cmpi sge, %i64, %j64 : i64
    %y = arith.select %c, %zero, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %cm : tensor<2x10x12xf32>, tensor<10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.addf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @causal_constant_triangle
// CHECK: flash.attention
// CHECK-SAME: scale(0.125) mask(causal) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: arith.constant dense
// A folded constant lower triangle added to the scaled scores (rocMLIR).
func.func @causal_constant_triangle(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %tri = arith.constant dense<[[[0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09]]]> : tensor<1x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (0, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %tri : tensor<2x10x12xf32>, tensor<1x10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %c8 = arith.constant 0.125 : f32
    %a = arith.mulf %x0, %c8 : f32
    %y = arith.addf %a, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @causal_bottom_right
// CHECK: flash.attention
// CHECK-SAME: mask(causal, bottom_right) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// Causal aligned to the bottom right (decode with a KV cache): j <= i + Lk - Lq.
func.func @causal_bottom_right(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %fill = arith.constant 0xFF800000 : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c2 = arith.constant 2 : index
    %d = arith.addi %i, %c2 : index
    %c = arith.cmpi sle, %j, %d : index
    %y = arith.select %c, %x0, %fill : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @additive_bias_broadcast
// CHECK: flash.attention
// CHECK-SAME: captures(%{{.+}} : tensor<10x12xf32>) scale(1.0) score_mod
// CHECK: ^bb0(%[[S:.+]]: f32, %[[B:.+]]: index, %[[I:.+]]: index, %[[J:.+]]: index, %[[T:.+]]: tensor<10x12xf32>):
// CHECK: %[[X:.+]] = tensor.extract %[[T]][%[[I]], %[[J]]]
// CHECK: %[[R:.+]] = arith.addf %[[S]], %[[X]]
// CHECK: flash.yield %[[R]]
// An additive bias broadcast over the batch (attn_mask, ALiBi tables).
func.func @additive_bias_broadcast(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %bias: tensor<10x12xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %bias : tensor<2x10x12xf32>, tensor<10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.addf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @padding_mask_select
// CHECK: flash.attention
// CHECK-SAME: captures(%{{.+}} : tensor<2x12xi1>) scale(1.0) score_mod
// CHECK: arith.select
// A boolean key-padding mask (DistilBERT masked_fill with -inf).
func.func @padding_mask_select(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %pad: tensor<2x12xi1>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %pad : tensor<2x10x12xf32>, tensor<2x12xi1>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %m: i1, %o: f32):
    %y = arith.select %m, %x0, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @kv_length_select_scalar
// CHECK: %[[L:.+]] = tensor.from_elements %{{.+}} : tensor<index>
// CHECK: flash.attention
// CHECK-SAME: captures(%[[L]] : tensor<index>)
// TWIN: arg3=range=3,12
// A KV-cache length read from a scalar: select(j < len, s, -65504).
func.func @kv_length_select_scalar(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %len: index) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %fill = arith.constant -6.550400e+04 : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi slt, %j, %len : index
    %y = arith.select %c, %x0, %fill : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @softcap_tanh
// CHECK: flash.attention
// CHECK-SAME: scale(0.200000003) score_mod
// CHECK: math.tanh
// CHECK: arith.mulf
// Soft-capping cap * tanh(s / cap) (Gemma): the divide folds into scale.
func.func @softcap_tanh(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %cap = arith.constant 5.0 : f32
    %a = arith.divf %x0, %cap : f32
    %t = math.tanh %a : f32
    %y = arith.mulf %t, %cap : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @alibi_index_bias
// CHECK: flash.attention
// CHECK-SAME: captures(%{{.+}} : tensor<2xf32>) scale(1.0) score_mod
// CHECK: ^bb0(%{{.+}}: f32, %[[B:.+]]: index, %[[I:.+]]: index, %[[J:.+]]: index, %[[T:.+]]: tensor<2xf32>):
// CHECK: tensor.extract %[[T]][%[[B]]]
// CHECK: arith.subi %[[J]], %[[I]]
// ALiBi: a per-batch slope times (j - i) from linalg.index.
func.func @alibi_index_bias(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %slope: tensor<2xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %slope : tensor<2x10x12xf32>, tensor<2xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %d = arith.subi %j, %i : index
    %d64 = arith.index_cast %d : index to i64
    %df = arith.sitofp %d64 : i64 to f32
    %b = arith.mulf %x1, %df : f32
    %y = arith.addf %x0, %b : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @causal_then_additive_bias
// CHECK: flash.attention
// CHECK-SAME: mask(causal) score_mod
// CHECK-NOT: arith.cmpi
// CHECK: arith.addf
// CHECK-NOT: arith.select
// where(causal, s, finfo.min) + attn_mask (Inductor 19, GPT-2): causal kind plus a bias.
func.func @causal_then_additive_bias(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %bias: tensor<10x12xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %bias : tensor<2x10x12xf32>, tensor<10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %fill = arith.constant -3.40282347E+38 : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi sge, %i, %j : index
    %m = arith.select %c, %x0, %fill : f32
    %y = arith.addf %m, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @sliding_window_index_compares
// CHECK: flash.attention
// CHECK-SAME: scale(1.0) mask(sliding_window, 4) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// Sliding-window (local) attention: i - 4 < j <= i, from two index compares.
func.func @sliding_window_index_compares(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%sm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %out_arg: f32):
    %fill = arith.constant 0xFF800000 : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c3 = arith.constant 3 : index
    %lo = arith.subi %i, %c3 : index
    %past = arith.cmpi sle, %j, %i : index
    %near = arith.cmpi sge, %j, %lo : index
    %ok = arith.andi %past, %near : i1
    %y = arith.select %ok, %x0, %fill : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @head_split_of_scores_around_mask_add
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<2x1x10x12xf32>)
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<6x10x16xf32>, tensor<6x12x16xf32>, tensor<6x12x8xf32>)
// CHECK-SAME: captures(%[[M]] : tensor<2x1x10x12xf32>) scale(0.25) score_mod
// CHECK: arith.divsi %{{.+}}, %c3
// CHECK: tensor.extract
// CHECK-NOT: tensor.collapse_shape
// Inductor pattern 24: bmm on [B*H, L, D], the scores viewed as [B, H, Lq,
// Lk] for a per-batch mask add and viewed back. The non-unit collapse is
// traced as a head split: the mask is read at batch (b*H + h) floordiv H.
func.func @head_split_of_scores_around_mask_add(%q: tensor<6x10x16xf32>, %k: tensor<6x12x16xf32>, %v: tensor<6x12x8xf32>, %mask: tensor<2x1x10x12xf32>) -> tensor<6x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %qk_e = tensor.empty() : tensor<6x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<6x10x12xf32>) -> tensor<6x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<6x10x16xf32>, tensor<6x12x16xf32>) outs(%qk_f : tensor<6x10x12xf32>) -> tensor<6x10x12xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 3, 10, 12] : tensor<6x10x12xf32> into tensor<2x3x10x12xf32>
  %m_e = tensor.empty() : tensor<2x3x10x12xf32>
  %sm4 = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, 0, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x3x10x12xf32>, tensor<2x1x10x12xf32>) outs(%m_e : tensor<2x3x10x12xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    %z = arith.addf %y, %m : f32
    linalg.yield %z : f32
  } -> tensor<2x3x10x12xf32>
  %sm = tensor.collapse_shape %sm4 [[0, 1], [2], [3]] : tensor<2x3x10x12xf32> into tensor<6x10x12xf32>
  %softmax_e = tensor.empty() : tensor<6x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<6x10x12xf32>) outs(%softmax_e : tensor<6x10x12xf32>) -> tensor<6x10x12xf32>
  %pv_e = tensor.empty() : tensor<6x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<6x10x8xf32>) -> tensor<6x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<6x10x12xf32>, tensor<6x12x8xf32>) outs(%pv_f : tensor<6x10x8xf32>) -> tensor<6x10x8xf32>
  return %o : tensor<6x10x8xf32>
}
