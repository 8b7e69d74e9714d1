// torch-mlir's multi-head attention as TorchToLinalg emits it: head split by
// expand_shape + transpose generics, Kᵀ by a transpose generic, 4-D contraction
// generics with the reduction loop not last, divide by sqrt(d), the two-result
// argmax max with keepdim maps, head merge. Shapes: H = 3, Lq = 10, Lk = 12,
// D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @torch_mlir_mha_head_split_argmax
// CHECK: %[[QX:.+]] = tensor.expand_shape
// CHECK: %[[KX:.+]] = tensor.expand_shape
// CHECK: %[[VX:.+]] = tensor.expand_shape
// CHECK: %[[Q:.+]] = linalg.transpose ins(%[[QX]] : tensor<2x10x3x16xf32>) outs(%{{.+}} : tensor<2x3x10x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: %[[K:.+]] = linalg.transpose ins(%[[KX]] : tensor<2x12x3x16xf32>) outs(%{{.+}} : tensor<2x3x12x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: %[[V:.+]] = linalg.transpose ins(%[[VX]]
// CHECK: %[[A:.+]] = flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x3x10x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>)
// CHECK-SAME: scale(0.25) -> tensor<2x3x10x8xf32>
// CHECK-NOT: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[A]]
// CHECK: tensor.collapse_shape
func.func @torch_mlir_mha_head_split_argmax(%xq: tensor<2x10x48xf32>, %xk: tensor<2x12x48xf32>, %xv: tensor<2x12x24xf32>) -> tensor<2x10x24xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qx = tensor.expand_shape %xq [[0], [1], [2, 3]] output_shape [2, 10, 3, 16] : tensor<2x10x48xf32> into tensor<2x10x3x16xf32>
  %kx = tensor.expand_shape %xk [[0], [1], [2, 3]] output_shape [2, 12, 3, 16] : tensor<2x12x48xf32> into tensor<2x12x3x16xf32>
  %vx = tensor.expand_shape %xv [[0], [1], [2, 3]] output_shape [2, 12, 3, 8] : tensor<2x12x24xf32> into tensor<2x12x3x8xf32>
  %q_e = tensor.empty() : tensor<2x3x10x16xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, c, b, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%qx : tensor<2x10x3x16xf32>) outs(%q_e : tensor<2x3x10x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<2x3x10x16xf32>
  %k_e = tensor.empty() : tensor<2x3x12x16xf32>
  %k = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, c, b, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kx : tensor<2x12x3x16xf32>) outs(%k_e : tensor<2x3x12x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<2x3x12x16xf32>
  %v_e = tensor.empty() : tensor<2x3x12x8xf32>
  %v = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, c, b, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%vx : tensor<2x12x3x8xf32>) outs(%v_e : tensor<2x3x12x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<2x3x12x8xf32>
  %kt_e = tensor.empty() : tensor<2x3x16x12xf32>
  %kt = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, d, c)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<2x3x12x16xf32>) outs(%kt_e : tensor<2x3x16x12xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<2x3x16x12xf32>
  %qk_e = tensor.empty() : tensor<2x3x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x3x10x12xf32>) -> tensor<2x3x10x12xf32>
  %s = linalg.generic {indexing_maps = [
      affine_map<(b, h, i, d, j) -> (b, h, i, d)>, affine_map<(b, h, i, d, j) -> (b, h, d, j)>,
      affine_map<(b, h, i, d, j) -> (b, h, i, j)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%q, %kt : tensor<2x3x10x16xf32>, tensor<2x3x16x12xf32>) outs(%qk_f : tensor<2x3x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x12xf32>
  %sd_e = tensor.empty() : tensor<2x3x10x12xf32>
  %sd = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x3x10x12xf32>) outs(%sd_e : tensor<2x3x10x12xf32>) {
  ^bb0(%x0: f32, %out_arg: f32):
    %c4 = arith.constant 4.0 : f32
    %y = arith.divf %x0, %c4 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %mx_e = tensor.empty() : tensor<2x3x10x1xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%mx_e : tensor<2x3x10x1xf32>) -> tensor<2x3x10x1xf32>
  %ix_e = tensor.empty() : tensor<2x3x10x1xi64>
  %c0_i64 = arith.constant 0 : i64
  %ix_f = linalg.fill ins(%c0_i64 : i64) outs(%ix_e : tensor<2x3x10x1xi64>) -> tensor<2x3x10x1xi64>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, 0)>, affine_map<(a, b, c, d) -> (a, b, c, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sd : tensor<2x3x10x12xf32>) outs(%mx_f, %ix_f : tensor<2x3x10x1xf32>, tensor<2x3x10x1xi64>) {
  ^bb0(%x0: f32, %m: f32, %idx: i64):
    %j = linalg.index 3 : index
    %j64 = arith.index_cast %j : index to i64
    %mm = arith.maximumf %x0, %m : f32
    %gt = arith.cmpf ogt, %x0, %m : f32
    %ni = arith.select %gt, %j64, %idx : i64
    linalg.yield %mm, %ni : f32, i64
  } -> (tensor<2x3x10x1xf32>, tensor<2x3x10x1xi64>)
  %sub_e = tensor.empty() : tensor<2x3x10x12xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, 0)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sd, %max#0 : tensor<2x3x10x12xf32>, tensor<2x3x10x1xf32>) outs(%sub_e : tensor<2x3x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %out_arg: f32):
    %y = arith.subf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %exp_e = tensor.empty() : tensor<2x3x10x12xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x3x10x12xf32>) outs(%exp_e : tensor<2x3x10x12xf32>) {
  ^bb0(%x0: f32, %out_arg: f32):
    %y = math.exp %x0 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %sm_e = tensor.empty() : tensor<2x3x10x1xf32>
  %sm_f = linalg.fill ins(%zero : f32) outs(%sm_e : tensor<2x3x10x1xf32>) -> tensor<2x3x10x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x3x10x12xf32>) outs(%sm_f : tensor<2x3x10x1xf32>) {
  ^bb0(%x0: f32, %acc: f32):
    %r = arith.addf %x0, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x1xf32>
  %p_e = tensor.empty() : tensor<2x3x10x12xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, 0)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x3x10x12xf32>, tensor<2x3x10x1xf32>) outs(%p_e : tensor<2x3x10x12xf32>) {
  ^bb0(%x0: f32, %x1: f32, %out_arg: f32):
    %y = arith.divf %x0, %x1 : f32
    linalg.yield %y : f32
  } -> tensor<2x3x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x3x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x3x10x8xf32>) -> tensor<2x3x10x8xf32>
  %o = linalg.generic {indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%p, %v : tensor<2x3x10x12xf32>, tensor<2x3x12x8xf32>) outs(%pv_f : tensor<2x3x10x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x10x8xf32>
  %ot_e = tensor.empty() : tensor<2x10x3x8xf32>
  %ot = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, c, b, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%o : tensor<2x3x10x8xf32>) outs(%ot_e : tensor<2x10x3x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<2x10x3x8xf32>
  %out = tensor.collapse_shape %ot [[0], [1], [2, 3]] : tensor<2x10x3x8xf32> into tensor<2x10x24xf32>
  return %out : tensor<2x10x24xf32>
}
