// Deferred normalisation (catalogue F-X): the second matmul reads the
// unnormalised exponentials and its result is divided by the row sum
// afterwards, as IREE's decomposition and online attention write it. The
// division commutes with the matmul, so this is the same flash.attention.
// Shapes: Lq = 10, Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @deferred_divide_after_pv
// CHECK: %[[A:.+]] = flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: return %[[A]]
// O = (exp(S - max) . V) / sum, divided with a projected map over Dv.
func.func @deferred_divide_after_pv(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>) {
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
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %ou = linalg.batch_matmul ins(%exp, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %n_e = tensor.empty() : tensor<2x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ou, %sum : tensor<2x10x8xf32>, tensor<2x10xf32>) outs(%n_e : tensor<2x10x8xf32>) {
  ^bb0(%u: f32, %w: f32, %r0: f32):
    %d = arith.divf %u, %w : f32
    linalg.yield %d : f32
  } -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @deferred_reciprocal_multiply_without_max
// CHECK: %[[A:.+]] = flash.attention
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: return %[[A]]
// No max subtraction; the row reciprocal is computed first and multiplies
// the PV result (rcp * O, operands swapped).
func.func @deferred_reciprocal_multiply_without_max(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>) {
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
  %rcp_e = tensor.empty() : tensor<2x10xf32>
  %rcp = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<2x10xf32>) outs(%rcp_e : tensor<2x10xf32>) {
  ^bb0(%y0: f32, %ro: f32):
    %one = arith.constant 1.0 : f32
    %d = arith.divf %one, %y0 : f32
    linalg.yield %d : f32
  } -> tensor<2x10xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %ou = linalg.batch_matmul ins(%exp, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %n_e = tensor.empty() : tensor<2x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ou, %rcp : tensor<2x10x8xf32>, tensor<2x10xf32>) outs(%n_e : tensor<2x10x8xf32>) {
  ^bb0(%u: f32, %w: f32, %r0: f32):
    %d = arith.mulf %w, %u : f32
    linalg.yield %d : f32
  } -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @deferred_after_truncf_bf16
// CHECK: %[[A:.+]] = flash.attention
// CHECK-SAME: outs(%{{.+}} : tensor<2x10x8xbf16>) scale(0.25) -> tensor<2x10x8xbf16>
// CHECK-NOT: linalg.generic
// CHECK: return %[[A]]
// The unnormalised f32 result is rounded to bf16 first, then divided in f32
// and rounded again (mixed precision frontends).
// TWIN: tol=1e-2
func.func @deferred_after_truncf_bf16(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xbf16>) {
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
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %ou = linalg.batch_matmul ins(%exp, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %t_e = tensor.empty() : tensor<2x10x8xbf16>
  %ot = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ou : tensor<2x10x8xf32>) outs(%t_e : tensor<2x10x8xbf16>) {
  ^bb0(%x0: f32, %o: bf16):
    %t = arith.truncf %x0 : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x10x8xbf16>
  %n_e = tensor.empty() : tensor<2x10x8xbf16>
  %o = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ot, %sum : tensor<2x10x8xbf16>, tensor<2x10xf32>) outs(%n_e : tensor<2x10x8xbf16>) {
  ^bb0(%u: bf16, %w: f32, %r0: bf16):
    %x = arith.extf %u : bf16 to f32
    %d = arith.divf %x, %w : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x10x8xbf16>
  return %o : tensor<2x10x8xbf16>
}

// -----

// CHECK-LABEL: func @deferred_in_body_reciprocal_with_lse
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: -> tensor<2x10x8xf32>, tensor<2x10xf32>
// CHECK-NOT: linalg.generic
// CHECK: return %[[A]]#0, %[[A]]#1
// Online-attention epilogue: O_un * (1 / sum) in one body, and the
// max + log(sum) kept as well.
func.func @deferred_in_body_reciprocal_with_lse(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10xf32>) {
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
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %ou = linalg.batch_matmul ins(%exp, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %n_e = tensor.empty() : tensor<2x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ou, %sum : tensor<2x10x8xf32>, tensor<2x10xf32>) outs(%n_e : tensor<2x10x8xf32>) {
  ^bb0(%u: f32, %w: f32, %r0: f32):
    %one = arith.constant 1.0 : f32
    %rz = arith.divf %one, %w : f32
    %d = arith.mulf %u, %rz : f32
    linalg.yield %d : f32
  } -> tensor<2x10x8xf32>
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
