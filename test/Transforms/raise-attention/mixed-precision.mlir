// Mixed precision: f16/bf16 inputs with f32 accumulation (extf in bodies or
// as separate ops), f32 or f16 softmax, truncf of P and of the output. The
// fused op accumulates in f32, so the twins allow the f16/bf16 rounding the
// original does and the fused op does not. Shapes: Lq = 10, Lk = 12, D = 16,
// Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @f16_extf_in_bodies_truncf_p_and_output
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xf16>, %[[K:.+]]: tensor<2x12x16xf16>, %[[V:.+]]: tensor<2x12x8xf16>)
// CHECK: %[[A:.+]] = flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x10x16xf16>, tensor<2x12x16xf16>, tensor<2x12x8xf16>)
// CHECK-SAME: scale(0.25) -> tensor<2x10x8xf32>
// CHECK: arith.truncf
// TWIN: tol=5e-3
// f16 Q/K/V, f16 x f16 -> f32 in the contraction bodies (IREE), f32 softmax,
// P truncated to f16 before PV, output truncated (Inductor 7-10, T5).
func.func @f16_extf_in_bodies_truncf_p_and_output(%q: tensor<2x10x16xf16>, %k: tensor<2x12x16xf16>, %v: tensor<2x12x8xf16>) -> tensor<2x10x8xf16> {
  %zero = arith.constant 0.0 : f32
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x10x16xf16>, tensor<2x12x16xf16>) outs(%s_f : tensor<2x10x12xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x10x12xf32>
  %ss_e = tensor.empty() : tensor<2x10x12xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%ss_e : tensor<2x10x12xf32>) {
  ^bb0(%x0: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x0, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %p16_e = tensor.empty() : tensor<2x10x12xf16>
  %p16 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p : tensor<2x10x12xf32>) outs(%p16_e : tensor<2x10x12xf16>) {
  ^bb0(%x: f32, %y: f16):
    %c = arith.truncf %x : f32 to f16
    linalg.yield %c : f16
  } -> tensor<2x10x12xf16>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(b, i, e, j) -> (b, i, j)>, affine_map<(b, i, e, j) -> (b, j, e)>, affine_map<(b, i, e, j) -> (b, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p16, %v : tensor<2x10x12xf16>, tensor<2x12x8xf16>) outs(%o_f : tensor<2x10x8xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x10x8xf32>
  %out_e = tensor.empty() : tensor<2x10x8xf16>
  %out = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%o : tensor<2x10x8xf32>) outs(%out_e : tensor<2x10x8xf16>) {
  ^bb0(%x: f32, %y: f16):
    %c = arith.truncf %x : f32 to f16
    linalg.yield %c : f16
  } -> tensor<2x10x8xf16>
  return %out : tensor<2x10x8xf16>
}

// -----

// CHECK-LABEL: func @bf16_separate_extf_ops
// CHECK-SAME: (%[[Q:.+]]: tensor<2x10x16xbf16>, %[[K:.+]]: tensor<2x12x16xbf16>, %[[V:.+]]: tensor<2x12x8xbf16>)
// CHECK: %[[A:.+]] = flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x10x16xbf16>, tensor<2x12x16xbf16>, tensor<2x12x8xbf16>)
// CHECK-SAME: -> tensor<2x10x8xf32>
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// TWIN: tol=1e-2
// bf16 inputs upcast by separate extf generics (looked through: the op widens
// exactly itself), f32 attention, bf16 output.
func.func @bf16_separate_extf_ops(%qb: tensor<2x10x16xbf16>, %kb: tensor<2x12x16xbf16>, %vb: tensor<2x12x8xbf16>) -> tensor<2x10x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %q_e = tensor.empty() : tensor<2x10x16xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%qb : tensor<2x10x16xbf16>) outs(%q_e : tensor<2x10x16xf32>) {
  ^bb0(%x: bf16, %y: f32):
    %c = arith.extf %x : bf16 to f32
    linalg.yield %c : f32
  } -> tensor<2x10x16xf32>
  %k_e = tensor.empty() : tensor<2x12x16xf32>
  %k = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%kb : tensor<2x12x16xbf16>) outs(%k_e : tensor<2x12x16xf32>) {
  ^bb0(%x: bf16, %y: f32):
    %c = arith.extf %x : bf16 to f32
    linalg.yield %c : f32
  } -> tensor<2x12x16xf32>
  %v_e = tensor.empty() : tensor<2x12x8xf32>
  %v = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%vb : tensor<2x12x8xbf16>) outs(%v_e : tensor<2x12x8xf32>) {
  ^bb0(%x: bf16, %y: f32):
    %c = arith.extf %x : bf16 to f32
    linalg.yield %c : f32
  } -> tensor<2x12x8xf32>
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%qk_f : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%softmax_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%pv_f : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %out_e = tensor.empty() : tensor<2x10x8xbf16>
  %out = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%o : tensor<2x10x8xf32>) outs(%out_e : tensor<2x10x8xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %c = arith.truncf %x : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<2x10x8xbf16>
  return %out : tensor<2x10x8xbf16>
}

// -----

// CHECK-LABEL: func @f16_softmax_lowest_init
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x10x16xf16>, tensor<2x12x16xf16>, tensor<2x12x8xf16>)
// CHECK-SAME: scale(1.0) -> tensor<2x10x8xf32>
// CHECK-NOT: score_mod
// TWIN: tol=1e-2
// Softmax computed in f16 (M4's f16 end to end, -65504 max init) on f32
// scores truncated to f16; flash.attention keeps the softmax in f32.
func.func @f16_softmax_lowest_init(%q: tensor<2x10x16xf16>, %k: tensor<2x12x16xf16>, %v: tensor<2x12x8xf16>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %z16 = arith.constant 0.0 : f16
  %lowest = arith.constant -6.550400e+04 : f16
  %qk_e = tensor.empty() : tensor<2x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x10x16xf16>, tensor<2x12x16xf16>) outs(%s_f : tensor<2x10x12xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x10x12xf32>
  %s16_e = tensor.empty() : tensor<2x10x12xf16>
  %s16 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%s16_e : tensor<2x10x12xf16>) {
  ^bb0(%x: f32, %y: f16):
    %c = arith.truncf %x : f32 to f16
    linalg.yield %c : f16
  } -> tensor<2x10x12xf16>
  %max_e = tensor.empty() : tensor<2x10xf16>
  %max_f = linalg.fill ins(%lowest : f16) outs(%max_e : tensor<2x10xf16>) -> tensor<2x10xf16>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s16 : tensor<2x10x12xf16>) outs(%max_f : tensor<2x10xf16>) {
  ^bb0(%x0: f16, %acc: f16):
    %r = arith.maximumf %x0, %acc : f16
    linalg.yield %r : f16
  } -> tensor<2x10xf16>
  %exp_e = tensor.empty() : tensor<2x10x12xf16>
  %exp = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s16, %max : tensor<2x10x12xf16>, tensor<2x10xf16>) outs(%exp_e : tensor<2x10x12xf16>) {
  ^bb0(%x0: f16, %x1: f16, %oo: f16):
    %d = arith.subf %x0, %x1 : f16
    %e = math.exp %d : f16
    linalg.yield %e : f16
  } -> tensor<2x10x12xf16>
  %sum_e = tensor.empty() : tensor<2x10xf16>
  %sum_f = linalg.fill ins(%z16 : f16) outs(%sum_e : tensor<2x10xf16>) -> tensor<2x10xf16>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<2x10x12xf16>) outs(%sum_f : tensor<2x10xf16>) {
  ^bb0(%x0: f16, %acc: f16):
    %r = arith.addf %x0, %acc : f16
    linalg.yield %r : f16
  } -> tensor<2x10xf16>
  %p_e = tensor.empty() : tensor<2x10x12xf16>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x10x12xf16>, tensor<2x10xf16>) outs(%p_e : tensor<2x10x12xf16>) {
  ^bb0(%x0: f16, %x1: f16, %oo: f16):
    %y = arith.divf %x0, %x1 : f16
    linalg.yield %y : f16
  } -> tensor<2x10x12xf16>
  %pv_e = tensor.empty() : tensor<2x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(b, i, e, j) -> (b, i, j)>, affine_map<(b, i, e, j) -> (b, j, e)>, affine_map<(b, i, e, j) -> (b, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<2x10x12xf16>, tensor<2x12x8xf16>) outs(%o_f : tensor<2x10x8xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}
