// Training graphs with an additive bias whose gradient the graph computes:
// dbias is dS = P ∘ (dP − rowsum(dP ∘ P)) summed over the score dims the
// bias is broadcast along (none for a bias of the scores' shape), and
// becomes the capture-gradient result of flash.attention_grad. Shapes:
// B = 2, H = 3, Lq = 10, Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention_grad

// CHECK-LABEL: func @jax_bias_grad_over_batch_and_heads
// CHECK: %[[A:.+]]:2 = flash.attention ins(%arg0, %arg1, %arg2 : tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>)
// CHECK-SAME: captures(%arg3 : tensor<10x12xf32>) scale(0.25) score_mod
// CHECK: %[[G:.+]]:4 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg4, %[[A]]#1 :
// CHECK-SAME: captures(%arg3 : tensor<10x12xf32>) scale(0.25) score_mod
// CHECK: -> tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>, tensor<10x12xf32>
// CHECK-NOT: linalg
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[G]]#3
// jax.grad with respect to a [Lq, Lk] bias added after the division by
// sqrt(d): broadcast_in_dim's transpose is a reduce_sum over the batch and
// the heads, one linalg.reduce over dims [0, 1] of the softmax VJP's result.
func.func @jax_bias_grad_over_batch_and_heads(%q: tensor<2x3x10x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>, %bias: tensor<10x12xf32>, %do: tensor<2x3x10x8xf32>) -> (tensor<2x3x10x8xf32>, tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>, tensor<10x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c4 = arith.constant 4.0 : f32
  %s_e = tensor.empty() : tensor<2x3x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x3x10x12xf32>) -> tensor<2x3x10x12xf32>
  %s0 = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, y, r)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>) outs(%s_f : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %bias : tensor<2x3x10x12xf32>, tensor<10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.divf %a0, %c4 : f32
    %z = arith.addf %y, %a1 : f32
    linalg.yield %z : f32
  } -> tensor<2x3x10x12xf32>
  %r_e = tensor.empty() : tensor<2x3x10xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %mx = linalg.reduce ins(%s : tensor<2x3x10x12xf32>) outs(%mx_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %exp = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %mx : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %d = arith.subf %a0, %a1 : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %sm_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %sum = linalg.reduce ins(%exp : tensor<2x3x10x12xf32>) outs(%sm_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %p = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.divf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %o_e = tensor.empty() : tensor<2x3x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x3x10x8xf32>) -> tensor<2x3x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x10x12xf32>, tensor<2x3x12x8xf32>) outs(%o_f : tensor<2x3x10x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x8xf32>
  %dp = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, y, r)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%do, %v : tensor<2x3x10x8xf32>, tensor<2x3x12x8xf32>) outs(%s_f : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %dv_e = tensor.empty() : tensor<2x3x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x3x12x8xf32>) -> tensor<2x3x12x8xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, r, x)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %do : tensor<2x3x10x12xf32>, tensor<2x3x10x8xf32>) outs(%dv_f : tensor<2x3x12x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x12x8xf32>
  %ct1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x3x10x12xf32>, tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.mulf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ct1 : tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %out: f32):
    %y = arith.negf %a0 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %ns_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %ns = linalg.reduce ins(%neg : tensor<2x3x10x12xf32>) outs(%ns_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %yb = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %ns : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.mulf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ct1, %yb : tensor<2x3x10x12xf32>, tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.addf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %db_e = tensor.empty() : tensor<10x12xf32>
  %db_f = linalg.fill ins(%zero : f32) outs(%db_e : tensor<10x12xf32>) -> tensor<10x12xf32>
  %dbias = linalg.reduce ins(%ds : tensor<2x3x10x12xf32>) outs(%db_f : tensor<10x12xf32>) dimensions = [0, 1]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %ds0 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ds : tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %out: f32):
    %y = arith.divf %a0, %c4 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x3x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x3x10x16xf32>) -> tensor<2x3x10x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ds0, %k : tensor<2x3x10x12xf32>, tensor<2x3x12x16xf32>) outs(%dq_f : tensor<2x3x10x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x3x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x3x12x16xf32>) -> tensor<2x3x12x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, r, x)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ds0, %q : tensor<2x3x10x12xf32>, tensor<2x3x10x16xf32>) outs(%dk_f : tensor<2x3x12x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x12x16xf32>
  return %o, %dq, %dk, %dv, %dbias : tensor<2x3x10x8xf32>, tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>, tensor<10x12xf32>
}

// -----

// CHECK-LABEL: func @tosa_bias_grad_keepdim
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: captures(%arg3 : tensor<10x12xf32>) scale(0.25) score_mod
// CHECK: %[[G:.+]]:4 = flash.attention_grad
// CHECK-SAME: captures(%arg3 : tensor<10x12xf32>) scale(0.25) score_mod
// CHECK-NOT: linalg
// CHECK: %[[DB:.+]] = tensor.expand_shape %[[G]]#3 {{\[}}[0, 1, 2], [3]] output_shape [1, 1, 10, 12] : tensor<10x12xf32> into tensor<1x1x10x12xf32>
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[DB]]
// As tosa-to-linalg lowers it: the bias reshaped to [1, 1, Lq, Lk] for the
// add, its gradient two keepdim reduce_sums (one axis each, a linalg.reduce
// and an expand_shape) returned as [1, 1, Lq, Lk]; the op's [Lq, Lk]
// gradient is expanded back.
func.func @tosa_bias_grad_keepdim(%q: tensor<2x3x10x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>, %bias: tensor<10x12xf32>, %do: tensor<2x3x10x8xf32>) -> (tensor<2x3x10x8xf32>, tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>, tensor<1x1x10x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c4 = arith.constant 4.0 : f32
  %s_e = tensor.empty() : tensor<2x3x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x3x10x12xf32>) -> tensor<2x3x10x12xf32>
  %bias4 = tensor.expand_shape %bias [[0, 1, 2], [3]] output_shape [1, 1, 10, 12] : tensor<10x12xf32> into tensor<1x1x10x12xf32>
  %s0 = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, y, r)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>) outs(%s_f : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (0, 0, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %bias4 : tensor<2x3x10x12xf32>, tensor<1x1x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.divf %a0, %c4 : f32
    %z = arith.addf %y, %a1 : f32
    linalg.yield %z : f32
  } -> tensor<2x3x10x12xf32>
  %r_e = tensor.empty() : tensor<2x3x10xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %mx = linalg.reduce ins(%s : tensor<2x3x10x12xf32>) outs(%mx_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %exp = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %mx : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %d = arith.subf %a0, %a1 : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %sm_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %sum = linalg.reduce ins(%exp : tensor<2x3x10x12xf32>) outs(%sm_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %p = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.divf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %o_e = tensor.empty() : tensor<2x3x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x3x10x8xf32>) -> tensor<2x3x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x10x12xf32>, tensor<2x3x12x8xf32>) outs(%o_f : tensor<2x3x10x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x8xf32>
  %dp = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, y, r)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%do, %v : tensor<2x3x10x8xf32>, tensor<2x3x12x8xf32>) outs(%s_f : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %dv_e = tensor.empty() : tensor<2x3x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x3x12x8xf32>) -> tensor<2x3x12x8xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, r, x)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %do : tensor<2x3x10x12xf32>, tensor<2x3x10x8xf32>) outs(%dv_f : tensor<2x3x12x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x12x8xf32>
  %ct1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x3x10x12xf32>, tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.mulf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ct1 : tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %out: f32):
    %y = arith.negf %a0 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %ns_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %ns = linalg.reduce ins(%neg : tensor<2x3x10x12xf32>) outs(%ns_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %yb = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %ns : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.mulf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ct1, %yb : tensor<2x3x10x12xf32>, tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %a1: f32, %out: f32):
    %y = arith.addf %a0, %a1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %h_e = tensor.empty() : tensor<3x10x12xf32>
  %h_f = linalg.fill ins(%zero : f32) outs(%h_e : tensor<3x10x12xf32>) -> tensor<3x10x12xf32>
  %h0 = linalg.reduce ins(%ds : tensor<2x3x10x12xf32>) outs(%h_f : tensor<3x10x12xf32>) dimensions = [0]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %h1 = tensor.expand_shape %h0 [[0, 1], [2], [3]] output_shape [1, 3, 10, 12] : tensor<3x10x12xf32> into tensor<1x3x10x12xf32>
  %w_e = tensor.empty() : tensor<1x10x12xf32>
  %w_f = linalg.fill ins(%zero : f32) outs(%w_e : tensor<1x10x12xf32>) -> tensor<1x10x12xf32>
  %w0 = linalg.reduce ins(%h1 : tensor<1x3x10x12xf32>) outs(%w_f : tensor<1x10x12xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %dbias = tensor.expand_shape %w0 [[0], [1, 2], [3]] output_shape [1, 1, 10, 12] : tensor<1x10x12xf32> into tensor<1x1x10x12xf32>
  %ds0 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ds : tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%a0: f32, %out: f32):
    %y = arith.divf %a0, %c4 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x3x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x3x10x16xf32>) -> tensor<2x3x10x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, x, r)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ds0, %k : tensor<2x3x10x12xf32>, tensor<2x3x12x16xf32>) outs(%dq_f : tensor<2x3x10x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x3x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x3x12x16xf32>) -> tensor<2x3x12x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(b, h, x, y, r) -> (b, h, r, x)>, affine_map<(b, h, x, y, r) -> (b, h, r, y)>, affine_map<(b, h, x, y, r) -> (b, h, x, y)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ds0, %q : tensor<2x3x10x12xf32>, tensor<2x3x10x16xf32>) outs(%dk_f : tensor<2x3x12x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x12x16xf32>
  return %o, %dq, %dk, %dv, %dbias : tensor<2x3x10x8xf32>, tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>, tensor<1x1x10x12xf32>
}

// -----

// CHECK-LABEL: func @torch_full_shape_bias_grad
// CHECK: %[[A:.+]]:2 = flash.attention ins(%arg0, %arg1, %arg2
// CHECK-SAME: captures(%arg3 : tensor<2x10x12xf32>) scale(0.125) score_mod
// CHECK: %[[G:.+]]:4 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg4, %[[A]]#1 :
// CHECK-SAME: captures(%arg3 : tensor<2x10x12xf32>) scale(0.125) score_mod
// CHECK-NOT: linalg
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[G]]#3
// A bias of the scores' shape [B, Lq, Lk], as aot_autograd differentiates
// `scores * scale + bias`: its gradient is dS itself (torch's
// _softmax_backward_data, returned), which also feeds the scale's chain rule
// of dQ and dK.
func.func @torch_full_shape_bias_grad(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %bias: tensor<2x10x12xf32>, %do: tensor<2x10x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>, tensor<2x10x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = arith.constant 0.125 : f32
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s0 = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%s_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0, %bias : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %b: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    %z = arith.addf %y, %b : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %o_e = tensor.empty() : tensor<2x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%o_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %dv_e = tensor.empty() : tensor<2x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x12x8xf32>) -> tensor<2x12x8xf32>
  %dv = linalg.batch_matmul indexing_maps = [
      affine_map<(b, j, e, i) -> (b, i, j)>, affine_map<(b, j, e, i) -> (b, i, e)>,
      affine_map<(b, j, e, i) -> (b, j, e)>]
      ins(%p, %do : tensor<2x10x12xf32>, tensor<2x10x8xf32>) outs(%dv_f : tensor<2x12x8xf32>) -> tensor<2x12x8xf32>
  %dp = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, e) -> (b, i, e)>, affine_map<(b, i, j, e) -> (b, j, e)>,
      affine_map<(b, i, j, e) -> (b, i, j)>]
      ins(%do, %v : tensor<2x10x8xf32>, tensor<2x12x8xf32>) outs(%s_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  // _softmax_backward_data: dP·P − P·sum(dP·P, keepdim).
  %pdp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  } -> tensor<2x10x12xf32>
  %r_e = tensor.empty() : tensor<2x10x1xf32>
  %r_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x10x1xf32>) -> tensor<2x10x1xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x10x12xf32>) outs(%r_f : tensor<2x10x1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %a = arith.addf %x, %acc : f32
    linalg.yield %a : f32
  } -> tensor<2x10x1xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%pdp, %p, %r : tensor<2x10x12xf32>, tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %y: f32, %rr: f32, %out: f32):
    %m = arith.mulf %y, %rr : f32
    %d = arith.subf %x, %m : f32
    linalg.yield %d : f32
  } -> tensor<2x10x12xf32>
  // The bias's gradient is dS itself; the scale's chain rule follows.
  %dsc = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ds : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %out: f32):
    %z = arith.mulf %x, %c : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dq = linalg.batch_matmul ins(%dsc, %k : tensor<2x10x12xf32>, tensor<2x12x16xf32>) outs(%dq_f : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  %dk = linalg.batch_matmul indexing_maps = [
      affine_map<(b, j, d, i) -> (b, i, j)>, affine_map<(b, j, d, i) -> (b, i, d)>,
      affine_map<(b, j, d, i) -> (b, j, d)>]
      ins(%dsc, %q : tensor<2x10x12xf32>, tensor<2x10x16xf32>) outs(%dk_f : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  return %o, %dq, %dk, %dv, %ds : tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>, tensor<2x10x12xf32>
}
