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
