// Look-alikes that must not become flash.attention, each with the remark
// that explains which link of the chain broke. Shapes: Lq = 10, Lk = 12,
// D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention=remarks=true -verify-diagnostics
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s --implicit-check-not=flash.attention

// CHECK-LABEL: func @softmax_over_query_axis
// Softmax over the query axis (rocMLIR's column softmax) while PV contracts
// the key axis.
func.func @softmax_over_query_axis(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: softmax max reduces over the query axis, but the second matmul contracts the key axis}}
  %p = linalg.softmax dimension(1) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @pv_contracts_query_axis
// The second matmul contracts the query axis (Pᵀ·V) of a key-axis softmax.
func.func @pv_contracts_query_axis(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %vq: tensor<2x10x8xf32>) -> tensor<2x12x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: softmax max reduces over the query axis, but the second matmul contracts the key axis}}
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x12x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x12x8xf32>) -> tensor<2x12x8xf32>
  %o = linalg.batch_matmul indexing_maps = [
      affine_map<(b, j, e, i) -> (b, i, j)>, affine_map<(b, j, e, i) -> (b, i, e)>,
      affine_map<(b, j, e, i) -> (b, j, e)>]
      ins(%p, %vq : tensor<2x10x12xf32>, tensor<2x10x8xf32>) outs(%pv_f : tensor<2x12x8xf32>) -> tensor<2x12x8xf32>
  return %o : tensor<2x12x8xf32>
}

// -----

// CHECK-LABEL: func @scores_have_other_user
// The raw scores are also returned.
func.func @scores_have_other_user(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: an intermediate of the attention (result of 'linalg.batch_matmul') is also used by 'func.return' outside the chain}}
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o, %s : tensor<2x10x8xf32>, tensor<2x10x12xf32>
}

// -----

// CHECK-LABEL: func @probabilities_returned
// The attention weights are returned (output_attentions).
func.func @probabilities_returned(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: an intermediate of the attention (result of 'linalg.softmax') is also used by 'func.return'}}
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o, %p : tensor<2x10x8xf32>, tensor<2x10x12xf32>
}

// -----

// CHECK-LABEL: func @row_max_has_other_user
// The row max is also returned.
func.func @row_max_has_other_user(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  // expected-remark @+1 {{attention not raised: an intermediate of the attention (result of 'linalg.generic') is also used by 'func.return'}}
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %sub_e = tensor.empty() : tensor<2x10x12xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%sub_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sub : tensor<2x10x12xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %y = math.exp %x0 : f32
    linalg.yield %y : f32
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
  return %o, %max : tensor<2x10x8xf32>, tensor<2x10xf32>
}

// -----

// CHECK-LABEL: func @no_second_matmul
// QKᵀ and softmax without a second matmul (buddy next-mhsa-core): no PV
// candidate, so the softmax itself says why nothing fused.
func.func @no_second_matmul(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x12xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: this softmax over the scores of a matmul has no second matmul (its result is not contracted with V); only attention is fused}}
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  return %p : tensor<2x10x12xf32>
}

// -----

// CHECK-LABEL: func @partial_softmax_no_sum
// Partial softmax: exp(s - max) without the normalising sum.
func.func @partial_softmax_no_sum(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: partial softmax: the exponentials are not normalised by their row sum}}
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @max_init_zero
// The row max starts from 0: a ReLU-like clamp, not a max.
func.func @max_init_zero(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%zero : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  // expected-remark @+1 {{attention not raised: softmax max starts from a constant that is not -inf, the lowest value, or NaN with maxnumf: it clamps the scores}}
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %sub_e = tensor.empty() : tensor<2x10x12xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%sub_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sub : tensor<2x10x12xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %y = math.exp %x0 : f32
    linalg.yield %y : f32
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
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @sum_init_one
// The row sum starts from 1.
func.func @sum_init_one(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %one = arith.constant 1.0 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %sub_e = tensor.empty() : tensor<2x10x12xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%sub_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sub : tensor<2x10x12xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %y = math.exp %x0 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %sum_e = tensor.empty() : tensor<2x10xf32>
  %sum_ef = linalg.fill ins(%one : f32) outs(%sum_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  // expected-remark @+1 {{attention not raised: softmax sum starts from a constant, not 0}}
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
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @mask_after_softmax
// A boolean mask applied to the probabilities (after the softmax).
func.func @mask_after_softmax(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %mask: tensor<2x10x12xi1>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pm_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: a select between the softmax and the second matmul: a mask after the softmax or dropout}}
  %pm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %mask : tensor<2x10x12xf32>, tensor<2x10x12xi1>) outs(%pm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %m: i1, %o: f32):
    %y = arith.select %m, %x0, %zero : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%pm, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @multiplicative_mask_after_softmax
// A multiplicative 0/1 mask on the probabilities.
func.func @multiplicative_mask_after_softmax(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %mask: tensor<2x10x12xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pm_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: the second matmul reads a product that is not exp * 1/sum: a multiplicative mask or dropout after the softmax}}
  %pm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %mask : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%pm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.mulf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%pm, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @dropout_between_softmax_and_pv
// Dropout with p = 0.2 between the softmax and PV (training).
func.func @dropout_between_softmax_and_pv(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %keep: tensor<2x10x12xi1>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %keep_scale = arith.constant 1.25 : f32
  %pm_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: a select between the softmax and the second matmul}}
  %pm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %keep : tensor<2x10x12xf32>, tensor<2x10x12xi1>) outs(%pm_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %m: i1, %o: f32):
    %s1 = arith.mulf %x0, %keep_scale : f32
    %y = arith.select %m, %s1, %zero : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%pm, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @integer_qk_int8
// Quantized attention: int8 Q and K with an i32 QKᵀ.
func.func @integer_qk_int8(%qi: tensor<2x10x16xi8>, %ki: tensor<2x12x16xi8>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %zi = arith.constant 0 : i32
  %qk_e = tensor.empty() : tensor<2x10x12xi32>
  %qk_f = linalg.fill ins(%zi : i32) outs(%qk_e : tensor<2x10x12xi32>) -> tensor<2x10x12xi32>
  // expected-remark @+1 {{attention not raised: the first matmul is an integer contraction (quantized attention)}}
  %si = linalg.generic {indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%qi, %ki : tensor<2x10x16xi8>, tensor<2x12x16xi8>) outs(%qk_f : tensor<2x10x12xi32>) {
  ^bb0(%a: i8, %b: i8, %acc: i32):
    %a32 = arith.extsi %a : i8 to i32
    %b32 = arith.extsi %b : i8 to i32
    %m = arith.muli %a32, %b32 : i32
    %r = arith.addi %acc, %m : i32
    linalg.yield %r : i32
  } -> tensor<2x10x12xi32>
  %sf_e = tensor.empty() : tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%si : tensor<2x10x12xi32>) outs(%sf_e : tensor<2x10x12xf32>) {
  ^bb0(%x: i32, %o: f32):
    %f = arith.sitofp %x : i32 to f32
    linalg.yield %f : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @multi_axis_softmax
// Softmax over both the query and the key axis (ONNX opset < 13 with axis = 1).
func.func @multi_axis_softmax(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2xf32>
  %max_f = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2xf32>) -> tensor<2xf32>
  // expected-remark @+1 {{attention not raised: softmax max reduces over 2 axes; only a single-axis softmax over the keys is attention}}
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a)>], iterator_types = ["parallel", "reduction", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_f : tensor<2xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %sum_e = tensor.empty() : tensor<2xf32>
  %sum_f = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a)>], iterator_types = ["parallel", "reduction", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sum_f : tensor<2xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.divf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @max_of_a_different_tensor
// The row max is taken over another tensor than the exponentiated scores.
func.func @max_of_a_different_tensor(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %bias: tensor<2x10x12xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%bias : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: the row max is taken over a different tensor than the one exponentiated}}
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
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @pv_accumulates_into_residual
// The second matmul accumulates into a residual instead of zeros.
func.func @pv_accumulates_into_residual(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %res: tensor<2x10x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  // expected-remark @+1 {{attention not raised: the second matmul accumulates into an init that is not zero}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%res : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @row_min_instead_of_max
// A row min subtracted instead of the row max.
func.func @row_min_instead_of_max(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %pinf = arith.constant 0x7F800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%pinf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  // expected-remark @+1 {{attention not raised: the reduction subtracted before exp is not a max (arith.minimumf)}}
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.minimumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %sub_e = tensor.empty() : tensor<2x10x12xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%sub_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sub : tensor<2x10x12xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %y = math.exp %x0 : f32
    linalg.yield %y : f32
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
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @denominator_sums_scores
// The denominator sums the raw scores instead of the exponentials.
func.func @denominator_sums_scores(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
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
  // expected-remark @+1 {{attention not raised: the softmax denominator sums something other than the exponentials in the numerator}}
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%sum_ef : tensor<2x10xf32>) {
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
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @reduction_before_softmax
// The scores are centred by a row reduction before the softmax: not elementwise.
func.func @reduction_before_softmax(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %mean_e = tensor.empty() : tensor<2x10xf32>
  %mean_ef = linalg.fill ins(%zero : f32) outs(%mean_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  // expected-remark @+1 {{attention not raised: the scores go through a reduction (a reduction by 'arith.addf') before the softmax, which is not elementwise}}
  %mean = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%mean_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %c_e = tensor.empty() : tensor<2x10x12xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mean : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%c_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%c : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @tosa_softmax_over_query_axis
// TOSA softmax with axis = 1 (the query axis) while tosa.matmul contracts the
// keys; the remark points at the user's own TOSA op.
func.func @tosa_softmax_over_query_axis(%q: tensor<4x10x16xf32>, %k: tensor<4x12x16xf32>, %v: tensor<4x12x8xf32>) -> tensor<4x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x12x16xf32>) -> tensor<4x16x12xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x10x16xf32>, tensor<4x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x12xf32>
  // expected-remark @+1 {{attention not raised: softmax max reduces over the query axis, but the second matmul contracts the key axis}}
  %m = tosa.reduce_max %s {axis = 1 : i32} : (tensor<4x10x12xf32>) -> tensor<4x1x12xf32>
  %d = tosa.sub %s, %m : (tensor<4x10x12xf32>, tensor<4x1x12xf32>) -> tensor<4x10x12xf32>
  %e = tosa.exp %d : (tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<4x10x12xf32>) -> tensor<4x1x12xf32>
  %rs = tosa.reciprocal %su : (tensor<4x1x12xf32>) -> tensor<4x1x12xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<4x10x12xf32>, tensor<4x1x12xf32>, tensor<1xi8>) -> tensor<4x10x12xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x10x12xf32>, tensor<4x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x10x8xf32>
  return %o : tensor<4x10x8xf32>
}

// -----

// CHECK-LABEL: func @row_sum_returned
// The row sum alone escapes: it is not the LSE, which is all the fused op
// can hand out.
func.func @row_sum_returned(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10xf32>) {
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
  // expected-remark @+1 {{attention not raised: an intermediate of the attention (result of 'linalg.generic') is also used by 'func.return' outside the chain}}
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
  return %o, %sum : tensor<2x10x8xf32>, tensor<2x10xf32>
}


// -----

// CHECK-LABEL: func @log_sum_without_adding_max_returned
// log(sum(exp(S - max))) escapes without the max added back: that is
// LSE - max, not the log-sum-exp.
func.func @log_sum_without_adding_max_returned(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10xf32>) {
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
  // expected-remark @+1 {{attention not raised: an intermediate of the attention (result of 'linalg.generic') is also used by 'linalg.generic' outside the chain}}
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

// CHECK-LABEL: func @deferred_divide_by_row_max
// Deferred normalisation by the row max instead of the row sum.
func.func @deferred_divide_by_row_max(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> (tensor<2x10x8xf32>) {
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
  // expected-remark @+1 {{attention not raised: the softmax denominator is a reduction that is not a sum (arith.maximumf)}}
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
  %o = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ou, %max : tensor<2x10x8xf32>, tensor<2x10xf32>) outs(%n_e : tensor<2x10x8xf32>) {
  ^bb0(%u: f32, %w: f32, %r0: f32):
    %d = arith.divf %u, %w : f32
    linalg.yield %d : f32
  } -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}


// -----

// CHECK-LABEL: func @deferred_divide_by_tensor_over_dv
// The unnormalised PV result divided elementwise by a full [B, Lq, Dv]
// tensor: not a per-row normalisation.
func.func @deferred_divide_by_tensor_over_dv(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %den: tensor<2x10x8xf32>) -> tensor<2x10x8xf32> {
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
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %ou = linalg.batch_matmul ins(%exp, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %n_e = tensor.empty() : tensor<2x10x8xf32>
  // expected-remark @+1 {{attention not raised: the second matmul's result is divided by a tensor that varies along the value columns, not by the row sum of the exponentials}}
  %o = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ou, %den : tensor<2x10x8xf32>, tensor<2x10x8xf32>) outs(%n_e : tensor<2x10x8xf32>) {
  ^bb0(%u: f32, %w: f32, %r0: f32):
    %d = arith.divf %u, %w : f32
    linalg.yield %d : f32
  } -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @decomposed_softmax_without_second_matmul
// A decomposed scaled softmax over QKᵀ whose probabilities are returned and
// never contracted: the remark lands on the normalising division.
func.func @decomposed_softmax_without_second_matmul(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>) -> tensor<2x10x12xf32> {
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
  // expected-remark @+1 {{attention not raised: this softmax over the scores of a matmul has no second matmul}}
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.divf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  return %p : tensor<2x10x12xf32>
}

// -----

// CHECK-LABEL: func @tosa_int8_table_softmax
// Quantised attention as TF's int8/int16 TOSA legalisation writes the
// softmax: rescale to i32, x - reduce_max(x), rescale to i16, exp by a
// 513-entry tosa.table (the normalisation is shortened to an intdiv here).
// Integer softmax is not raised, and says so at the table lookup.
func.func @tosa_int8_table_softmax(%q: tensor<2x10x16xi8>, %k: tensor<2x16x12xi8>, %v: tensor<2x12x8xi8>) -> tensor<2x10x8xi32> {
  %zp8 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %zp16 = "tosa.const"() <{values = dense<0> : tensor<1xi16>}> : () -> tensor<1xi16>
  %zp32 = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %mul = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
  %sh = "tosa.const"() <{values = dense<30> : tensor<1xi8>}> : () -> tensor<1xi8>
  %s = tosa.matmul %q, %k, %zp8, %zp8 : (tensor<2x10x16xi8>, tensor<2x16x12xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<2x10x12xi32>
  %s8 = tosa.rescale %s, %mul, %sh, %zp32, %zp8 {scale32 = true, rounding_mode = DOUBLE_ROUND, per_channel = false, input_unsigned = false, output_unsigned = false} : (tensor<2x10x12xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<2x10x12xi8>
  %x = tosa.rescale %s8, %mul, %sh, %zp8, %zp32 {scale32 = true, rounding_mode = DOUBLE_ROUND, per_channel = false, input_unsigned = false, output_unsigned = false} : (tensor<2x10x12xi8>, tensor<1xi32>, tensor<1xi8>, tensor<1xi8>, tensor<1xi32>) -> tensor<2x10x12xi32>
  %m = tosa.reduce_max %x {axis = 2 : i32} : (tensor<2x10x12xi32>) -> tensor<2x10x1xi32>
  %d = tosa.sub %x, %m : (tensor<2x10x12xi32>, tensor<2x10x1xi32>) -> tensor<2x10x12xi32>
  %d16 = tosa.rescale %d, %mul, %sh, %zp32, %zp16 {scale32 = true, rounding_mode = DOUBLE_ROUND, per_channel = false, input_unsigned = false, output_unsigned = false} : (tensor<2x10x12xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi16>) -> tensor<2x10x12xi16>
  %tbl = "tosa.const"() <{values = dense<7> : tensor<513xi16>}> : () -> tensor<513xi16>
  // expected-remark @+1 {{attention not raised: integer softmax (a tosa.table lookup of x - reduce_max(x) on quantised scores) is not raised; flash.attention computes a float softmax}}
  %e = tosa.table %d16, %tbl : (tensor<2x10x12xi16>, tensor<513xi16>) -> tensor<2x10x12xi32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x10x12xi32>) -> tensor<2x10x1xi32>
  %p = tosa.intdiv %e, %su : (tensor<2x10x12xi32>, tensor<2x10x1xi32>) -> tensor<2x10x12xi32>
  %p8 = tosa.rescale %p, %mul, %sh, %zp32, %zp8 {scale32 = true, rounding_mode = DOUBLE_ROUND, per_channel = false, input_unsigned = false, output_unsigned = false} : (tensor<2x10x12xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<2x10x12xi8>
  // expected-remark @+1 {{attention not raised: the second matmul produces i32 elements}}
  %o = tosa.matmul %p8, %v, %zp8, %zp8 : (tensor<2x10x12xi8>, tensor<2x12x8xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<2x10x8xi32>
  return %o : tensor<2x10x8xi32>
}

// -----

// CHECK-LABEL: func @tosa_int8_table_lookup_not_softmax
// A table lookup on the scores that is not exp(x - max x) (e.g. a quantised
// sigmoid) is no softmax candidate: nothing to say.
func.func @tosa_int8_table_lookup_not_softmax(%q: tensor<2x10x16xi8>, %k: tensor<2x16x12xi8>) -> tensor<2x10x12xi32> {
  %zp8 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %zp16 = "tosa.const"() <{values = dense<0> : tensor<1xi16>}> : () -> tensor<1xi16>
  %zp32 = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %mul = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
  %sh = "tosa.const"() <{values = dense<30> : tensor<1xi8>}> : () -> tensor<1xi8>
  %s = tosa.matmul %q, %k, %zp8, %zp8 : (tensor<2x10x16xi8>, tensor<2x16x12xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<2x10x12xi32>
  %s16 = tosa.rescale %s, %mul, %sh, %zp32, %zp16 {scale32 = true, rounding_mode = DOUBLE_ROUND, per_channel = false, input_unsigned = false, output_unsigned = false} : (tensor<2x10x12xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi16>) -> tensor<2x10x12xi16>
  %tbl = "tosa.const"() <{values = dense<7> : tensor<513xi16>}> : () -> tensor<513xi16>
  %e = tosa.table %s16, %tbl : (tensor<2x10x12xi16>, tensor<513xi16>) -> tensor<2x10x12xi32>
  return %e : tensor<2x10x12xi32>
}

// -----

// CHECK-LABEL: func @head_split_transposed_between
// The scores viewed as [B, H, ..] are transposed to [H, B, ..] before being
// collapsed back: softmax row r belongs to score batch (r mod B)*H + r/B,
// not r. The traced head split exposes the permuted read and refuses.
func.func @head_split_transposed_between(%q: tensor<6x10x16xf32>, %k: tensor<6x12x16xf32>, %v: tensor<6x12x8xf32>, %mask: tensor<2x1x10x12xf32>) -> tensor<6x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %qk_e = tensor.empty() : tensor<6x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<6x10x12xf32>) -> tensor<6x10x12xf32>
  // expected-remark @+1 {{attention not raised: the scores of the first matmul are broadcast or sliced on the way to the softmax}}
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<6x10x16xf32>, tensor<6x12x16xf32>) outs(%qk_f : tensor<6x10x12xf32>) -> tensor<6x10x12xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 3, 10, 12] : tensor<6x10x12xf32> into tensor<2x3x10x12xf32>
  %t_e = tensor.empty() : tensor<3x2x10x12xf32>
  %s4t = linalg.transpose ins(%s4 : tensor<2x3x10x12xf32>) outs(%t_e : tensor<3x2x10x12xf32>) permutation = [1, 0, 2, 3]
  %m_e = tensor.empty() : tensor<3x2x10x12xf32>
  %sm4 = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (b, 0, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4t, %mask : tensor<3x2x10x12xf32>, tensor<2x1x10x12xf32>) outs(%m_e : tensor<3x2x10x12xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    %z = arith.addf %y, %m : f32
    linalg.yield %z : f32
  } -> tensor<3x2x10x12xf32>
  %sm = tensor.collapse_shape %sm4 [[0, 1], [2], [3]] : tensor<3x2x10x12xf32> into tensor<6x10x12xf32>
  %softmax_e = tensor.empty() : tensor<6x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<6x10x12xf32>) outs(%softmax_e : tensor<6x10x12xf32>) -> tensor<6x10x12xf32>
  %pv_e = tensor.empty() : tensor<6x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<6x10x8xf32>) -> tensor<6x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<6x10x12xf32>, tensor<6x12x8xf32>) outs(%pv_f : tensor<6x10x8xf32>) -> tensor<6x10x8xf32>
  return %o : tensor<6x10x8xf32>
}
