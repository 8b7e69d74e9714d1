// QKᵀ and PV in every contraction spelling: named ops with transposed
// indexing_maps, 5-loop generics whose reduction loop is not last,
// linalg.contract, explicit transposes, 2-D matmul, swapped PV operands.
// Shapes: Lq = 10, Lk = 12, D = 16, Dv = 8 (never square).
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @batch_matmul_transposed_maps_softmax
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: %[[O:.+]] = flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK-NOT: linalg.softmax
// CHECK: return %[[O]]
func.func @batch_matmul_transposed_maps_softmax(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %c = arith.constant 0.25 : f32
  %e1 = tensor.empty() : tensor<2x10x12xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>],
      iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%e1 : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x10x12xf32>
  %e2 = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e3 = tensor.empty() : tensor<2x10x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%f3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// The torch-mlir 4-D form: contraction generics over 5 loops with the
// reduction loop in the middle, scale by division, decomposed softmax.
// CHECK-LABEL: func @generic_5loop_reduction_not_last
// CHECK-SAME: (%[[Q:.+]]: tensor<2x3x10x16xf32>, %[[K:.+]]: tensor<2x3x12x16xf32>, %[[V:.+]]: tensor<2x3x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(0.125) -> tensor<2x3x10x8xf32>
// CHECK-NOT: linalg.generic
func.func @generic_5loop_reduction_not_last(%q: tensor<2x3x10x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>) -> tensor<2x3x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x3x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x3x10x12xf32>) -> tensor<2x3x10x12xf32>
  // loops (b, h, i, d, j): d is the reduction and sits before j.
  %s = linalg.generic {indexing_maps = [
      affine_map<(b, h, i, d, j) -> (b, h, i, d)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>,
      affine_map<(b, h, i, d, j) -> (b, h, i, j)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%q, %k : tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>) outs(%f0 : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %c8 = arith.constant 8.0 : f32
  %e1 = tensor.empty() : tensor<2x3x10x12xf32>
  %sd = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x3x10x12xf32>) outs(%e1 : tensor<2x3x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.divf %x, %c8 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %e2 = tensor.empty() : tensor<2x3x10xf32>
  %f2 = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sd : tensor<2x3x10x12xf32>) outs(%f2 : tensor<2x3x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %y = arith.maximumf %x, %acc : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10xf32>
  %e3 = tensor.empty() : tensor<2x3x10x12xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sd, %max : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%e3 : tensor<2x3x10x12xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %y = arith.subf %x, %m : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %e4 = tensor.empty() : tensor<2x3x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x3x10x12xf32>) outs(%e4 : tensor<2x3x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x3x10x12xf32>) outs(%f5 : tensor<2x3x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %y = arith.addf %x, %acc : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10xf32>
  %e6 = tensor.empty() : tensor<2x3x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%e6 : tensor<2x3x10x12xf32>) {
  ^bb0(%x: f32, %l: f32, %o: f32):
    %y = arith.divf %x, %l : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %e7 = tensor.empty() : tensor<2x3x10x8xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<2x3x10x8xf32>) -> tensor<2x3x10x8xf32>
  // loops (b, h, i, j, e): j is the reduction and sits before e.
  %o = linalg.generic {indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%p, %v : tensor<2x3x10x12xf32>, tensor<2x3x12x8xf32>) outs(%f7 : tensor<2x3x10x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x8xf32>
  return %o : tensor<2x3x10x8xf32>
}

// -----

// torch-mlir: K transposed by a yield-only generic, then a plain batch_matmul.
// CHECK-LABEL: func @transpose_generic_then_batch_matmul
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf32>, %[[K:.+]]: tensor<2x12x16xf32>, %[[V:.+]]: tensor<2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: scale(1.0)
func.func @transpose_generic_then_batch_matmul(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<2x16x12xf32>
  %kt = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, c, b)>],
      iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x12x16xf32>) outs(%et : tensor<2x16x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x16x12xf32>
  %e0 = tensor.empty() : tensor<2x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x10x16xf32>, tensor<2x16x12xf32>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e2 = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e3 = tensor.empty() : tensor<2x10x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%f3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// linalg.transpose on K and a 2-D linalg.matmul pair (no batch dims).
// CHECK-LABEL: func @linalg_transpose_matmul_2d
// CHECK-SAME: (%[[Q:.+]]: tensor<10x16xf32>, %[[K:.+]]: tensor<12x16xf32>, %[[V:.+]]: tensor<12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<10x16xf32>, tensor<12x16xf32>, tensor<12x8xf32>)
func.func @linalg_transpose_matmul_2d(%q: tensor<10x16xf32>, %k: tensor<12x16xf32>, %v: tensor<12x8xf32>) -> tensor<10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<16x12xf32>
  %kt = linalg.transpose ins(%k : tensor<12x16xf32>) outs(%et : tensor<16x12xf32>) permutation = [1, 0]
  %e0 = tensor.empty() : tensor<10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<10x12xf32>) -> tensor<10x12xf32>
  %s = linalg.matmul ins(%q, %kt : tensor<10x16xf32>, tensor<16x12xf32>) outs(%f0 : tensor<10x12xf32>) -> tensor<10x12xf32>
  %e2 = tensor.empty() : tensor<10x12xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<10x12xf32>) outs(%e2 : tensor<10x12xf32>) -> tensor<10x12xf32>
  %e3 = tensor.empty() : tensor<10x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<10x8xf32>) -> tensor<10x8xf32>
  %o = linalg.matmul ins(%p, %v : tensor<10x12xf32>, tensor<12x8xf32>) outs(%f3 : tensor<10x8xf32>) -> tensor<10x8xf32>
  return %o : tensor<10x8xf32>
}

// -----

// linalg.contract for both matmuls, K read transposed through its map.
// CHECK-LABEL: func @linalg_contract_both
// CHECK: flash.attention
// CHECK-SAME: scale(0.125)
func.func @linalg_contract_both(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %c = arith.constant dense<0.125> : tensor<2x10x12xf32>
  %e1 = tensor.empty() : tensor<2x10x12xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>],
      iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %c : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%e1 : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %y, %x : f32
    linalg.yield %m : f32
  } -> tensor<2x10x12xf32>
  %e2 = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e3 = tensor.empty() : tensor<2x10x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, i, j, e) -> (b, i, j)>, affine_map<(b, i, j, e) -> (b, j, e)>,
      affine_map<(b, i, j, e) -> (b, i, e)>]
      ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%f3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// XLA-style swapped PV: Oᵀ = Vᵀ·Pᵀ, output laid out [b, Dv, Lq]; the result
// is transposed back.
// CHECK-LABEL: func @pv_swapped_operands_transposed_output
// CHECK: %[[A:.+]] = flash.attention
// CHECK-SAME: -> tensor<2x10x8xf32>
// CHECK: linalg.transpose ins(%[[A]] : tensor<2x10x8xf32>) outs(%{{.+}} : tensor<2x8x10xf32>) permutation = [0, 2, 1]
func.func @pv_swapped_operands_transposed_output(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x8x10xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e2 = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e3 = tensor.empty() : tensor<2x8x10xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x8x10xf32>) -> tensor<2x8x10xf32>
  %o = linalg.batch_matmul indexing_maps = [
      affine_map<(b, e, i, j) -> (b, j, e)>, affine_map<(b, e, i, j) -> (b, i, j)>,
      affine_map<(b, e, i, j) -> (b, e, i)>]
      ins(%v, %p : tensor<2x12x8xf32>, tensor<2x10x12xf32>) outs(%f3 : tensor<2x8x10xf32>) -> tensor<2x8x10xf32>
  return %o : tensor<2x8x10xf32>
}

// -----

// Dynamic Lq and Lk (serving with varying lengths): the init takes its sizes
// from Q and V at run time.
// TWIN: arg0=shape=2x10x16 arg1=shape=2x12x16 arg2=shape=2x12x8 ret0=shape=2x10x8
// CHECK-LABEL: func @dynamic_sequence_lengths
// CHECK-SAME: (%[[Q:.+]]: tensor<2x?x16xf32>, %[[K:.+]]: tensor<2x?x16xf32>, %[[V:.+]]: tensor<2x?x8xf32>)
// CHECK: %[[LQ:.+]] = tensor.dim %[[Q]], %{{.+}} : tensor<2x?x16xf32>
// CHECK: %[[INIT:.+]] = tensor.empty(%[[LQ]]) : tensor<2x?x8xf32>
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x8xf32>) outs(%[[INIT]] : tensor<2x?x8xf32>)
func.func @dynamic_sequence_lengths(%q: tensor<2x?x16xf32>, %k: tensor<2x?x16xf32>, %v: tensor<2x?x8xf32>) -> tensor<2x?x8xf32> {
  %zero = arith.constant 0.0 : f32
  %c1 = arith.constant 1 : index
  %lq = tensor.dim %q, %c1 : tensor<2x?x16xf32>
  %lk = tensor.dim %k, %c1 : tensor<2x?x16xf32>
  %e0 = tensor.empty(%lq, %lk) : tensor<2x?x?xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x?x16xf32>, tensor<2x?x16xf32>) outs(%f0 : tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %e2 = tensor.empty(%lq, %lk) : tensor<2x?x?xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x?x?xf32>) outs(%e2 : tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  %e3 = tensor.empty(%lq) : tensor<2x?x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x?x?xf32>, tensor<2x?x8xf32>) outs(%f3 : tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  return %o : tensor<2x?x8xf32>
}
