// Splat scales on the scores, on Q, on K or split over both fold into one
// scalar. Shapes: Lq = 10, Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @scale_on_q_multiply
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// q * 0.25 before QKᵀ (Inductor 9/10, IREE).
func.func @scale_on_q_multiply(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qs_e = tensor.empty() : tensor<2x10x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%q : tensor<2x10x16xf32>) outs(%qs_e : tensor<2x10x16xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x16xf32>
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%qs, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @scale_on_k_divide
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// k / 4 before QKᵀ.
func.func @scale_on_k_divide(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ks_e = tensor.empty() : tensor<2x12x16xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x12x16xf32>) outs(%ks_e : tensor<2x12x16xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 4.0 : f32
    %y = arith.divf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x12x16xf32>
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %ks : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @scale_split_over_q_and_k
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// sqrt(scale) on both Q and K (PyTorch math SDPA).
func.func @scale_split_over_q_and_k(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qs_e = tensor.empty() : tensor<2x10x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%q : tensor<2x10x16xf32>) outs(%qs_e : tensor<2x10x16xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.5 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x16xf32>
  %ks_e = tensor.empty() : tensor<2x12x16xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x12x16xf32>) outs(%ks_e : tensor<2x12x16xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.5 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x12x16xf32>
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%qs, %ks : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @scale_splat_tensor_broadcast
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(0.125) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// Scores times a broadcast splat tensor (tosa.mul by a folded reciprocal).
func.func @scale_splat_tensor_broadcast(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %c = arith.constant dense<0.125> : tensor<1x1x1xf32>
  %ss_e = tensor.empty() : tensor<2x10x12xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (0, 0, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %c : tensor<2x10x12xf32>, tensor<1x1x1xf32>) outs(%ss_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.mulf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @identity_residues_then_divide
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(0.125) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// baddbmm residues s * 1 + 0 around a divide by sqrt(d) (IREE's torch import).
func.func @identity_residues_then_divide(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %ss_e = tensor.empty() : tensor<2x10x12xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%ss_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %z = arith.constant 0.0 : f32
    %a = arith.mulf %x0, %one : f32
    %b = arith.addf %a, %z : f32
    %c8 = arith.constant 8.0 : f32
    %y = arith.divf %b, %c8 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @scale_on_q_and_scores
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// A scale on Q and another on the scores fold into one.
func.func @scale_on_q_and_scores(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qs_e = tensor.empty() : tensor<2x10x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%q : tensor<2x10x16xf32>) outs(%qs_e : tensor<2x10x16xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.5 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x16xf32>
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%qs, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %ss_e = tensor.empty() : tensor<2x10x12xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%ss_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 2.0 : f32
    %y = arith.divf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}
