// Row log-sum-exp exported: when the softmax's LSE is also a result of the
// function (kept for the backward pass), the fused op produces it as its
// second result instead of the chain being refused. Shapes: Lq = 10,
// Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @lse_max_plus_log_sum_returned
// CHECK: %[[A:.+]]:2 = flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: outs(%{{.+}}, %{{.+}} : tensor<2x10x8xf32>, tensor<2x10xf32>) scale(0.25) -> tensor<2x10x8xf32>, tensor<2x10xf32>
// CHECK-NOT: math.log
// CHECK: return %[[A]]#0, %[[A]]#1
// Decomposed softmax (F-L1); lse = max + log(sum) in two row generics.
func.func @lse_max_plus_log_sum_returned(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s0 = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %sum_e = tensor.empty() : tensor<2x10xf32>
  %sum_ef = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sum_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.divf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %lg_e = tensor.empty() : tensor<2x10xf32>
  %lg = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<2x10xf32>) outs(%lg_e : tensor<2x10xf32>) {
  ^bb0(%y0: f32, %ro: f32):
    %l = math.log %y0 : f32
    linalg.yield %l : f32
  } -> tensor<2x10xf32>
  %lse_e = tensor.empty() : tensor<2x10xf32>
  %lse = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%max, %lg : tensor<2x10xf32>, tensor<2x10xf32>) outs(%lse_e : tensor<2x10xf32>) {
  ^bb0(%y0: f32, %y1: f32, %ro: f32):
    %a = arith.addf %y0, %y1 : f32
    linalg.yield %a : f32
  } -> tensor<2x10xf32>
  return %o, %lse : tensor<2x10x8xf32>, tensor<2x10xf32>
}

// -----

// CHECK-LABEL: func @lse_keepdim_f16_one_generic
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: -> tensor<2x10x8xf32>, tensor<2x10xf32>
// CHECK: %[[X:.+]] = tensor.expand_shape %[[A]]#1 {{\[}}[0], [1, 2]] output_shape [2, 10, 1] : tensor<2x10xf32> into tensor<2x10x1xf32>
// CHECK: %[[T:.+]] = linalg.generic {{.+}} ins(%[[X]] : tensor<2x10x1xf32>)
// CHECK: arith.truncf
// CHECK-NOT: math.log
// CHECK: return %[[A]]#0, %[[T]] : tensor<2x10x8xf32>, tensor<2x10x1xf16>
// The LSE written keepdim ([B, Lq, 1]) and rounded to f16 in one generic:
// the fused f32 LSE is reshaped and cast to the user's type.
// TWIN: tol=1e-3
func.func @lse_keepdim_f16_one_generic(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10x1xf16>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s0 = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %sum_e = tensor.empty() : tensor<2x10xf32>
  %sum_ef = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sum_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.divf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %lk_e = tensor.empty() : tensor<2x10x1xf16>
  %lse = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sum, %max : tensor<2x10xf32>, tensor<2x10xf32>) outs(%lk_e : tensor<2x10x1xf16>) {
  ^bb0(%y0: f32, %y1: f32, %ro: f16):
    %l = math.log %y0 : f32
    %a = arith.addf %y1, %l : f32
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<2x10x1xf16>
  return %o, %lse : tensor<2x10x8xf32>, tensor<2x10x1xf16>
}

// -----

// CHECK-LABEL: func @lse_softmax_spelling_lse_returned
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: -> tensor<2x10x8xf32>, tensor<2x10xf32>
// CHECK-NOT: math.exp
// CHECK: return %[[A]]#0, %[[A]]#1
// The log-sum-exp softmax spelling (F-T3, buddy): P = exp(S - lse); the lse
// inside the chain is also returned.
func.func @lse_softmax_spelling_lse_returned(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s0 = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %sum_e = tensor.empty() : tensor<2x10xf32>
  %sum_ef = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sum_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %lg_e = tensor.empty() : tensor<2x10xf32>
  %lg = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<2x10xf32>) outs(%lg_e : tensor<2x10xf32>) {
  ^bb0(%y0: f32, %ro: f32):
    %l = math.log %y0 : f32
    linalg.yield %l : f32
  } -> tensor<2x10xf32>
  %lse_e = tensor.empty() : tensor<2x10xf32>
  %lse = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%max, %lg : tensor<2x10xf32>, tensor<2x10xf32>) outs(%lse_e : tensor<2x10xf32>) {
  ^bb0(%y0: f32, %y1: f32, %ro: f32):
    %a = arith.addf %y0, %y1 : f32
    linalg.yield %a : f32
  } -> tensor<2x10xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %lse : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o, %lse : tensor<2x10x8xf32>, tensor<2x10xf32>
}

// -----

// CHECK-LABEL: func @lse_log_sum_exp_without_max
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: -> tensor<2x10x8xf32>, tensor<2x10xf32>
// CHECK-NOT: math.log
// CHECK: return %[[A]]#0, %[[A]]#1
// Softmax without the max subtraction (F-T2); log(sum(exp(S))) is the LSE.
func.func @lse_log_sum_exp_without_max(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s0 = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %z = math.exp %x0 : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %sum_e = tensor.empty() : tensor<2x10xf32>
  %sum_ef = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sum_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.divf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %lg_e = tensor.empty() : tensor<2x10xf32>
  %lg = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<2x10xf32>) outs(%lg_e : tensor<2x10xf32>) {
  ^bb0(%y0: f32, %ro: f32):
    %l = math.log %y0 : f32
    linalg.yield %l : f32
  } -> tensor<2x10xf32>
  return %o, %lg : tensor<2x10x8xf32>, tensor<2x10xf32>
}

// -----

// CHECK-LABEL: func @lse_tosa_keepdim_rocmlir
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: scale(0.25) -> tensor<4x10x8xf32>, tensor<4x10xf32>
// CHECK: %[[X:.+]] = tensor.expand_shape %[[A]]#1
// CHECK-NOT: math.log
// CHECK: return %[[A]]#0, %[[X]] : tensor<4x10x8xf32>, tensor<4x10x1xf32>
// rocMLIR's LSE output in TOSA: reduce_max + log(reduce_sum), keepdim.
func.func @lse_tosa_keepdim_rocmlir(%q: tensor<4x10x16xf32>, %k: tensor<4x12x16xf32>, %v: tensor<4x12x8xf32>) -> (tensor<4x10x8xf32>, tensor<4x10x1xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x12x16xf32>) -> tensor<4x16x12xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x10x16xf32>, tensor<4x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x12xf32>
  %c = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<4x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %m = tosa.reduce_max %ss {axis = 2 : i32} : (tensor<4x10x12xf32>) -> tensor<4x10x1xf32>
  %d = tosa.sub %ss, %m : (tensor<4x10x12xf32>, tensor<4x10x1xf32>) -> tensor<4x10x12xf32>
  %e = tosa.exp %d : (tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<4x10x12xf32>) -> tensor<4x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<4x10x12xf32>, tensor<4x10x1xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x10x12xf32>, tensor<4x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x8xf32>
  %lg = tosa.log %su : (tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  %lse = tosa.add %m, %lg : (tensor<4x10x1xf32>, tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  return %o, %lse : tensor<4x10x8xf32>, tensor<4x10x1xf32>
}
