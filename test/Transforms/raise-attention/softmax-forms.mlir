// Softmax in every frontend shape between QKᵀ and PV. Shapes: Lq = 10,
// Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @softmax_reciprocal_multiply
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// Softmax normalised by a reciprocal and a multiply (F-L1r).
func.func @softmax_reciprocal_multiply(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
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
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sum_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %rcp_e = tensor.empty() : tensor<2x10xf32>
  %rcp = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<2x10xf32>) outs(%rcp_e : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %y = arith.divf %one, %x0 : f32
    linalg.yield %y : f32
  } -> tensor<2x10xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %rcp : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.mulf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @softmax_explicit_broadcast
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// Max and sum broadcast by explicit yield-only generics (F-L1b).
func.func @softmax_explicit_broadcast(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
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
  %maxb_e = tensor.empty() : tensor<2x10x12xf32>
  %maxb = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%max : tensor<2x10xf32>) outs(%maxb_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    linalg.yield %x0 : f32
  } -> tensor<2x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %maxb : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
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
  %sumb_e = tensor.empty() : tensor<2x10x12xf32>
  %sumb = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sum : tensor<2x10xf32>) outs(%sumb_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    linalg.yield %x0 : f32
  } -> tensor<2x10x12xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sumb : tensor<2x10x12xf32>, tensor<2x10x12xf32>) outs(%p_e : tensor<2x10x12xf32>) {
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

// CHECK-LABEL: func @torch_keepdim_argmax_max
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// CHECK-NOT: linalg.generic
// torch-mlir: keepdim tensors, maps (d0, d1, 0), a two-result max with argmax (F-L2).
func.func @torch_keepdim_argmax_max(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %mx_e = tensor.empty() : tensor<2x10x1xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%mx_e : tensor<2x10x1xf32>) -> tensor<2x10x1xf32>
  %ix_e = tensor.empty() : tensor<2x10x1xi64>
  %c0_i64 = arith.constant 0 : i64
  %ix_f = linalg.fill ins(%c0_i64 : i64) outs(%ix_e : tensor<2x10x1xi64>) -> tensor<2x10x1xi64>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%mx_f, %ix_f : tensor<2x10x1xf32>, tensor<2x10x1xi64>) {
  ^bb0(%x0: f32, %m: f32, %idx: i64):
    %j = linalg.index 2 : index
    %j64 = arith.index_cast %j : index to i64
    %mm = arith.maximumf %x0, %m : f32
    %gt = arith.cmpf ogt, %x0, %m : f32
    %ni = arith.select %gt, %j64, %idx : i64
    linalg.yield %mm, %ni : f32, i64
  } -> (tensor<2x10x1xf32>, tensor<2x10x1xi64>)
  %sub_e = tensor.empty() : tensor<2x10x12xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max#0 : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%sub_e : tensor<2x10x12xf32>) {
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
  %sm_e = tensor.empty() : tensor<2x10x1xf32>
  %sm_f = linalg.fill ins(%zero : f32) outs(%sm_e : tensor<2x10x1xf32>) -> tensor<2x10x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sm_f : tensor<2x10x1xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10x1xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%p_e : tensor<2x10x12xf32>) {
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

// CHECK-LABEL: func @nan_maxnumf_fused_sub_exp
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// MLIR 22's linalg.softmax decomposition: NaN-initialised maxnumf, sub+exp fused (F-L3, F-L7).
func.func @nan_maxnumf_fused_sub_exp(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %nan = arith.constant 0xFFC00000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_ef = linalg.fill ins(%nan : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%max_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maxnumf %x0, %acc : f32
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
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @softmax_without_max_subtraction
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// No max subtraction (onnx-mlir, TF LogSoftmax): exp / sum exp (F-T2).
func.func @softmax_without_max_subtraction(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
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

// CHECK-LABEL: func @log_sum_exp_form
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// The log-sum-exp spelling: exp(s - (max + log sum exp(s - max))), no division (F-T3).
func.func @log_sum_exp_form(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
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
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf32>) outs(%sum_ef : tensor<2x10xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10xf32>
  %lse_e = tensor.empty() : tensor<2x10xf32>
  %lse = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%max, %sum : tensor<2x10xf32>, tensor<2x10xf32>) outs(%lse_e : tensor<2x10xf32>) {
  ^bb0(%m: f32, %l: f32, %o: f32):
    %lg = math.log %l : f32
    %y = arith.addf %m, %lg : f32
    linalg.yield %y : f32
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
  return %o : tensor<2x10x8xf32>
}

// -----

// CHECK-LABEL: func @linalg_reduce_expand_shape
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// Named linalg.reduce and tensor.expand_shape to keepdim (F-L6).
func.func @linalg_reduce_expand_shape(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %max_e = tensor.empty() : tensor<2x10xf32>
  %max_f = linalg.fill ins(%ninf : f32) outs(%max_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %max_r = linalg.reduce ins(%s : tensor<2x10x12xf32>) outs(%max_f : tensor<2x10xf32>) dimensions = [2]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %max = tensor.expand_shape %max_r [[0], [1, 2]] output_shape [2, 10, 1] : tensor<2x10xf32> into tensor<2x10x1xf32>
  %exp_e = tensor.empty() : tensor<2x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%exp_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x10x12xf32>
  %sum_e = tensor.empty() : tensor<2x10xf32>
  %sum_f = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %sum_r = linalg.reduce ins(%exp : tensor<2x10x12xf32>) outs(%sum_f : tensor<2x10xf32>) dimensions = [2]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %sum = tensor.expand_shape %sum_r [[0], [1, 2]] output_shape [2, 10, 1] : tensor<2x10xf32> into tensor<2x10x1xf32>
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%p_e : tensor<2x10x12xf32>) {
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

// CHECK-LABEL: func @fused_exp_and_sum
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: math.exp
// exp and its row sum produced by one two-result reduction generic (F-L4).
func.func @fused_exp_and_sum(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
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
  %ex_e = tensor.empty() : tensor<2x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x10xf32>
  %sm_f = linalg.fill ins(%zero : f32) outs(%sm_e : tensor<2x10xf32>) -> tensor<2x10xf32>
  %es:2 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s, %max : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%ex_e, %sm_f : tensor<2x10x12xf32>, tensor<2x10xf32>) {
  ^bb0(%x0: f32, %m: f32, %o: f32, %acc: f32):
    %d = arith.subf %x0, %m : f32
    %e = math.exp %d : f32
    %a = arith.addf %e, %acc : f32
    linalg.yield %e, %a : f32, f32
  } -> (tensor<2x10x12xf32>, tensor<2x10xf32>)
  %p_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%es#0, %es#1 : tensor<2x10x12xf32>, tensor<2x10xf32>) outs(%p_e : tensor<2x10x12xf32>) {
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

// CHECK-LABEL: func @row_max_shift_then_softmax
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf32>, tensor<2x12x16xf32>, tensor<2x12x8xf32>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// CHECK-NOT: arith.maximumf
// x - x.max(-1, keepdim) before a softmax that subtracts its own max again
// (gpt-oss): the shift changes nothing and is peeled.
func.func @row_max_shift_then_softmax(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %mx_e = tensor.empty() : tensor<2x10x1xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%mx_e : tensor<2x10x1xf32>) -> tensor<2x10x1xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s : tensor<2x10x12xf32>) outs(%mx_f : tensor<2x10x1xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.maximumf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x10x1xf32>
  %sh_e = tensor.empty() : tensor<2x10x12xf32>
  %sh = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mx : tensor<2x10x12xf32>, tensor<2x10x1xf32>) outs(%sh_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %o: f32):
    %y = arith.subf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%sh : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}
