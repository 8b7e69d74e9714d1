// Training graphs: the forward's P is read again by autodiff's backward
// (dV = Pᵀ·dO, the softmax gradient dS = P ∘ (dP − rowsum(dP ∘ P)) with
// dP = dO·Vᵀ, dQ = scale·dS·K, dK = scale·dSᵀ·Q). The pair becomes one
// flash.attention with its LSE and one flash.attention_grad, so P is
// materialised in neither direction. Shapes: Lq = 10, Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention_grad

// CHECK-LABEL: func @torch_mlir_sdpa_training
// CHECK: %[[A:.+]]:2 = flash.attention ins(%arg0, %arg1, %arg2 : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: outs(%{{.+}}, %{{.+}} : tensor<2x10x8xf32>, tensor<2x10xf32>) scale(0.25)
// CHECK: %[[G:.+]]:3 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg3, %[[A]]#1 :
// CHECK-SAME: scale(0.25) -> tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>
// CHECK-NOT: linalg
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
// An aot_autograd joint graph of the math SDPA through torch-mlir: Kᵀ, Pᵀ,
// Vᵀ and dSᵀ as transpose generics, aten.sub's alpha as sitofp inside the
// body, the scale as an f64 scalar truncated in the body, argmax max;
// _softmax_backward_data decomposed as (dP * P) - P * sum(dP * P, keepdim).
func.func @torch_mlir_sdpa_training(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %do: tensor<2x10x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1_i64 = arith.constant 1 : i64
  %c0_i64 = arith.constant 0 : i64
  %scale = arith.constant 2.500000e-01 : f64
  // Forward: S = Q·Kᵀ * 0.25, P = softmax(S) (aten._softmax decomposed), O = P·V.
  %kt_e = tensor.empty() : tensor<2x16x12xf32>
  %kt = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, c, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x12x16xf32>) outs(%kt_e : tensor<2x16x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x16x12xf32>
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s0 = linalg.batch_matmul ins(%q, %kt : tensor<2x10x16xf32>, tensor<2x16x12xf32>) outs(%s_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.truncf %scale : f64 to f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %mx_e = tensor.empty() : tensor<2x10x1xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%mx_e : tensor<2x10x1xf32>) -> tensor<2x10x1xf32>
  %ix_e = tensor.empty() : tensor<2x10x1xi64>
  %ix_f = linalg.fill ins(%c0_i64 : i64) outs(%ix_e : tensor<2x10x1xi64>) -> tensor<2x10x1xi64>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%mx_f, %ix_f : tensor<2x10x1xf32>, tensor<2x10x1xi64>) {
  ^bb0(%in: f32, %m: f32, %idx: i64):
    %j = linalg.index 2 : index
    %j64 = arith.index_cast %j : index to i64
    %mm = arith.maximumf %in, %m : f32
    %gt = arith.cmpf ogt, %in, %m : f32
    %ni = arith.select %gt, %j64, %idx : i64
    linalg.yield %mm, %ni : f32, i64
  } -> (tensor<2x10x1xf32>, tensor<2x10x1xi64>)
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max#0 : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %a = arith.sitofp %c1_i64 : i64 to f32
    %m = arith.mulf %in_1, %a : f32
    %y = arith.subf %in, %m : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sub : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %sm_f = linalg.fill ins(%zero : f32) outs(%mx_e : tensor<2x10x1xf32>) -> tensor<2x10x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sm_f : tensor<2x10x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %o_e = tensor.empty() : tensor<2x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%o_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  // Backward: dV = Pᵀ·dO, dP = dO·Vᵀ, _softmax_backward_data(dP, P), the
  // scale's chain rule, dQ = dS·K, dK = dSᵀ·Q.
  %pt_e = tensor.empty() : tensor<2x12x10xf32>
  %pt = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, c, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p : tensor<2x10x12xf32>) outs(%pt_e : tensor<2x12x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x12x10xf32>
  %dv_e = tensor.empty() : tensor<2x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x12x8xf32>) -> tensor<2x12x8xf32>
  %dv = linalg.batch_matmul ins(%pt, %do : tensor<2x12x10xf32>, tensor<2x10x8xf32>) outs(%dv_f : tensor<2x12x8xf32>) -> tensor<2x12x8xf32>
  %vt_e = tensor.empty() : tensor<2x8x12xf32>
  %vt = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, c, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v : tensor<2x12x8xf32>) outs(%vt_e : tensor<2x8x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x8x12xf32>
  %dp = linalg.batch_matmul ins(%do, %vt : tensor<2x10x8xf32>, tensor<2x8x12xf32>) outs(%s_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %gp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.mulf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %gs_f = linalg.fill ins(%zero : f32) outs(%mx_e : tensor<2x10x1xf32>) -> tensor<2x10x1xf32>
  %gs = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%gp : tensor<2x10x12xf32>) outs(%gs_f : tensor<2x10x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10x1xf32>
  %ps = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %gs : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.mulf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%gp, %ps : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %a = arith.sitofp %c1_i64 : i64 to f32
    %m = arith.mulf %in_1, %a : f32
    %y = arith.subf %in, %m : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %ds0 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ds : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.truncf %scale : f64 to f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dq = linalg.batch_matmul ins(%ds0, %k : tensor<2x10x12xf32>, tensor<2x12x16xf32>) outs(%dq_f : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dst_e = tensor.empty() : tensor<2x12x10xf32>
  %dst = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, c, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ds0 : tensor<2x10x12xf32>) outs(%dst_e : tensor<2x12x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x12x10xf32>
  %dk_e = tensor.empty() : tensor<2x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  %dk = linalg.batch_matmul ins(%dst, %q : tensor<2x12x10xf32>, tensor<2x10x16xf32>) outs(%dk_f : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>
}

// -----

// CHECK-LABEL: func @jax_grad_softmax_vjp
// CHECK: %[[A:.+]]:2 = flash.attention ins(%arg0, %arg1, %arg2 : tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>)
// CHECK-SAME: scale(0.25) -> tensor<2x3x10x8xf32>, tensor<2x3x10xf32>
// CHECK: %[[G:.+]]:3 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg3, %[[A]]#1 :
// CHECK-SAME: scale(0.25) -> tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>
// CHECK-NOT: linalg
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
// jax.grad through jax.nn.softmax, as StableHLO lowers to linalg: einsum
// contractions with the heads as a second batch dim, linalg.reduce for max
// and sums, the division by sqrt(d) on both sides, and the transpose of
// softmax's custom JVP: ct·y + y·broadcast(reduce_sum(−(ct·y))).
func.func @jax_grad_softmax_vjp(%q: tensor<2x3x10x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>, %do: tensor<2x3x10x8xf32>) -> (tensor<2x3x10x8xf32>, tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c4 = arith.constant 4.0 : f32
  %s_e = tensor.empty() : tensor<2x3x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x3x10x12xf32>) -> tensor<2x3x10x12xf32>
  // einsum('bhqd,bhkd->bhqk')
  %s0 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>) outs(%s_f : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.divf %in, %c4 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  // jax.nn.softmax: reduce_max, exp(x - max), reduce_sum, divide.
  %r_e = tensor.empty() : tensor<2x3x10xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %mx = linalg.reduce ins(%s : tensor<2x3x10x12xf32>) outs(%mx_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %exp = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %mx : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %d = arith.subf %in, %in_1 : f32
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
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.divf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %o_e = tensor.empty() : tensor<2x3x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x3x10x8xf32>) -> tensor<2x3x10x8xf32>
  // einsum('bhqk,bhkd->bhqd')
  %o = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x10x12xf32>, tensor<2x3x12x8xf32>) outs(%o_f : tensor<2x3x10x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x8xf32>
  // VJP. dP = einsum('bhqd,bhkd->bhqk', dO, V); dV = einsum('bhqk,bhqd->bhkd', P, dO).
  %dp = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%do, %v : tensor<2x3x10x8xf32>, tensor<2x3x12x8xf32>) outs(%s_f : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %dv_e = tensor.empty() : tensor<2x3x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x3x12x8xf32>) -> tensor<2x3x12x8xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(b, h, j, e, i) -> (b, h, i, j)>, affine_map<(b, h, j, e, i) -> (b, h, i, e)>, affine_map<(b, h, j, e, i) -> (b, h, j, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %do : tensor<2x3x10x12xf32>, tensor<2x3x10x8xf32>) outs(%dv_f : tensor<2x3x12x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x12x8xf32>
  // The transpose of softmax's custom JVP y * (x_dot - sum(y * x_dot)):
  // ct1 = ct * y; ct_x = ct1 + y * broadcast(reduce_sum(-ct1)).
  %ct1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x3x10x12xf32>, tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.mulf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ct1 : tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.negf %in : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %ns_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %ns = linalg.reduce ins(%neg : tensor<2x3x10x12xf32>) outs(%ns_f : tensor<2x3x10xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %a = arith.addf %in, %init : f32
      linalg.yield %a : f32
    }
  %yb = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %ns : tensor<2x3x10x12xf32>, tensor<2x3x10xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.mulf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ct1, %yb : tensor<2x3x10x12xf32>, tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.addf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  // The division by sqrt(d) transposed: ds / 4.
  %ds0 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ds : tensor<2x3x10x12xf32>) outs(%s_e : tensor<2x3x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.divf %in, %c4 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x3x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x3x10x16xf32>) -> tensor<2x3x10x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ds0, %k : tensor<2x3x10x12xf32>, tensor<2x3x12x16xf32>) outs(%dq_f : tensor<2x3x10x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x3x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x3x12x16xf32>) -> tensor<2x3x12x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(b, h, j, d, i) -> (b, h, i, j)>, affine_map<(b, h, j, d, i) -> (b, h, i, d)>, affine_map<(b, h, j, d, i) -> (b, h, j, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ds0, %q : tensor<2x3x10x12xf32>, tensor<2x3x10x16xf32>) outs(%dk_f : tensor<2x3x12x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x12x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x3x10x8xf32>, tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>
}

// -----

// CHECK-LABEL: func @hand_derived_causal_prescaled_q
// CHECK: %[[A:.+]]:2 = flash.attention ins(%arg0, %arg1, %arg2
// CHECK-SAME: scale(0.25) mask(causal) -> tensor<2x10x8xf32>, tensor<2x10xf32>
// CHECK: %[[G:.+]]:3 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg3, %[[A]]#1 :
// CHECK-SAME: scale(0.25) mask(causal)
// CHECK: %[[DQS:.+]] = linalg.generic {{.*}} ins(%[[G]]#0
// CHECK: arith.constant 4.0
// CHECK: %[[DQ:.+]] = linalg.generic {{.*}} ins(%[[DQS]]
// CHECK-NOT: linalg.batch_matmul
// CHECK-NOT: linalg.softmax
// CHECK: return %[[A]]#0, %[[DQ]], %[[G]]#1, %[[G]]#2
// Hand-derived: Q scaled before the first matmul, a causal select with
// -inf, linalg.softmax; R = rowsum(dP ∘ P) in one generic, dS = (dP − R) ∘ P
// zeroed where the forward masked (the mask's chain rule); dK reads the
// scaled Q, and dQ is the scaled Q's gradient times 0.25. The graph's
// gradient of the scaled Q is the op's dq times 4.
func.func @hand_derived_causal_prescaled_q(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %do: tensor<2x10x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %qs_e = tensor.empty() : tensor<2x10x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%q : tensor<2x10x16xf32>) outs(%qs_e : tensor<2x10x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x16xf32>
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%qs, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%s_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %keep = arith.cmpi sge, %i, %j : index
    %y = arith.select %keep, %in, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
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
  // R = rowsum(dP ∘ P) in one reduction; dS = (dP − R) ∘ P, zero where
  // the forward masked.
  %r_e = tensor.empty() : tensor<2x10xf32>
  %r_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dp, %p : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%r_f : tensor<2x10xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %a = arith.addf %m, %acc : f32
    linalg.yield %a : f32
  } -> tensor<2x10xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dp, %r, %p : tensor<2x10x12xf32>, tensor<2x10xf32>, tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %rr: f32, %y: f32, %out: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %keep = arith.cmpi sge, %i, %j : index
    %d = arith.subf %x, %rr : f32
    %g = arith.mulf %d, %y : f32
    %z = arith.select %keep, %g, %zero : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  // dK = dSᵀ·(0.25 Q); the gradient of the scaled Q, then 0.25 for Q.
  %dk_e = tensor.empty() : tensor<2x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  %dk = linalg.batch_matmul indexing_maps = [
      affine_map<(b, j, d, i) -> (b, i, j)>, affine_map<(b, j, d, i) -> (b, i, d)>,
      affine_map<(b, j, d, i) -> (b, j, d)>]
      ins(%ds, %qs : tensor<2x10x12xf32>, tensor<2x10x16xf32>) outs(%dk_f : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  %dqs_e = tensor.empty() : tensor<2x10x16xf32>
  %dqs_f = linalg.fill ins(%zero : f32) outs(%dqs_e : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dqs = linalg.batch_matmul ins(%ds, %k : tensor<2x10x12xf32>, tensor<2x12x16xf32>) outs(%dqs_f : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dqs : tensor<2x10x16xf32>) outs(%dqs_e : tensor<2x10x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>
}

// -----

// CHECK-LABEL: func @bias_without_its_gradient
// CHECK: %[[A:.+]]:2 = flash.attention ins(%arg0, %arg1, %arg2
// CHECK-SAME: captures(%arg3 : tensor<10x12xf32>) scale(0.125) score_mod
// CHECK: %[[G:.+]]:4 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg4, %[[A]]#1 :
// CHECK-SAME: captures(%arg3 : tensor<10x12xf32>) scale(0.125) score_mod
// CHECK: tensor.extract
// CHECK: arith.addf
// CHECK-NOT: linalg
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
// An additive bias [Lq, Lk] (its derivative is 1, so dS is the graph's),
// the scale folded into the softmax gradient's generic; the bias needs no
// gradient here, and the op's fourth result is left unused.
func.func @bias_without_its_gradient(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>, %bias: tensor<10x12xf32>, %do: tensor<2x10x8xf32>) -> (tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = arith.constant 0.125 : f32
  %s_e = tensor.empty() : tensor<2x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s0 = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%s_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0, %bias : tensor<2x10x12xf32>, tensor<10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
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
  %r_e = tensor.empty() : tensor<2x10xf32>
  %r_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dp, %p : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%r_f : tensor<2x10xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %a = arith.addf %m, %acc : f32
    linalg.yield %a : f32
  } -> tensor<2x10xf32>
  // P ∘ (dP − R) times the scale, in one generic.
  %ds = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dp, %r, %p : tensor<2x10x12xf32>, tensor<2x10xf32>, tensor<2x10x12xf32>) outs(%s_e : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %rr: f32, %y: f32, %out: f32):
    %d = arith.subf %x, %rr : f32
    %g = arith.mulf %y, %d : f32
    %z = arith.mulf %g, %c : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dq = linalg.batch_matmul ins(%ds, %k : tensor<2x10x12xf32>, tensor<2x12x16xf32>) outs(%dq_f : tensor<2x10x16xf32>) -> tensor<2x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  %dk = linalg.batch_matmul indexing_maps = [
      affine_map<(b, j, d, i) -> (b, i, j)>, affine_map<(b, j, d, i) -> (b, i, d)>,
      affine_map<(b, j, d, i) -> (b, j, d)>]
      ins(%ds, %q : tensor<2x10x12xf32>, tensor<2x10x16xf32>) outs(%dk_f : tensor<2x12x16xf32>) -> tensor<2x12x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x10x8xf32>, tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>
}
