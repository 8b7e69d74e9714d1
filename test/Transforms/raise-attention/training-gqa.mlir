// Training graphs under grouped-query attention: the forward repeats each KV
// head over its group of query heads, so autodiff's backward computes dK and
// dV per query head and sums each group (the repeat's backward). The pair
// becomes one flash.attention and one flash.attention_grad on the unrepeated
// K and V, whose dK and dV are already summed over the group: neither the
// repeated K/V nor the per-head gradients are materialised. Shapes: B = 2,
// Hq = 6, Hkv = 2, Lq = 10, Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention_grad

// CHECK-LABEL: func @gqa_training_hf_repeat_kv
// CHECK-SAME: (%[[Q:.+]]: tensor<2x6x10x16xf32>, %[[K:.+]]: tensor<2x2x12x16xf32>, %[[V:.+]]: tensor<2x2x12x8xf32>, %[[DO:.+]]: tensor<2x6x10x8xf32>)
// CHECK: %[[A:.+]]:2 = flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK: %[[G:.+]]:3 = flash.attention_grad ins(%[[Q]], %[[K]], %[[V]], %[[A]]#0, %[[DO]], %[[A]]#1 :
// CHECK-SAME: -> tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>
// CHECK-NOT: linalg
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
// torch (HF repeat_kv): unsqueeze, expand over the group, reshape; its
// backward: view as (Hkv, G), sum over G with keepdim, squeeze.
#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
#row4 = affine_map<(a, b, c, d) -> (a, b, c, 0)>
func.func @gqa_training_hf_repeat_kv(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>, %do: tensor<2x6x10x8xf32>) -> (tensor<2x6x10x8xf32>, tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %kr_x = tensor.expand_shape %k [[0], [1, 2], [3], [4]] output_shape [2, 2, 1, 12, 16] : tensor<2x2x12x16xf32> into tensor<2x2x1x12x16xf32>
  %kr_e = tensor.empty() : tensor<2x2x3x12x16xf32>
  %kr_b = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%kr_x : tensor<2x2x1x12x16xf32>) outs(%kr_e : tensor<2x2x3x12x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x2x3x12x16xf32>
  %kr = tensor.collapse_shape %kr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x16xf32> into tensor<2x6x12x16xf32>
  %vr_x = tensor.expand_shape %v [[0], [1, 2], [3], [4]] output_shape [2, 2, 1, 12, 8] : tensor<2x2x12x8xf32> into tensor<2x2x1x12x8xf32>
  %vr_e = tensor.empty() : tensor<2x2x3x12x8xf32>
  %vr_b = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%vr_x : tensor<2x2x1x12x8xf32>) outs(%vr_e : tensor<2x2x3x12x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x2x3x12x8xf32>
  %vr = tensor.collapse_shape %vr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x8xf32> into tensor<2x6x12x8xf32>
  %s_e = tensor.empty() : tensor<2x6x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s0 = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>) outs(%s_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x6x10x12xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %o_e = tensor.empty() : tensor<2x6x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %vr : tensor<2x6x10x12xf32>, tensor<2x6x12x8xf32>) outs(%o_f : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  // Backward.
  %dvr_e = tensor.empty() : tensor<2x6x12x8xf32>
  %dvr_f = linalg.fill ins(%zero : f32) outs(%dvr_e : tensor<2x6x12x8xf32>) -> tensor<2x6x12x8xf32>
  %dvr = linalg.contract indexing_maps = [
      affine_map<(b, h, j, e, i) -> (b, h, i, j)>, affine_map<(b, h, j, e, i) -> (b, h, i, e)>,
      affine_map<(b, h, j, e, i) -> (b, h, j, e)>]
      ins(%p, %do : tensor<2x6x10x12xf32>, tensor<2x6x10x8xf32>) outs(%dvr_f : tensor<2x6x12x8xf32>) -> tensor<2x6x12x8xf32>
  %dp = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>]
      ins(%do, %vr : tensor<2x6x10x8xf32>, tensor<2x6x12x8xf32>) outs(%s_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %gp = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x6x10x12xf32>, tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %y = arith.mulf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<2x6x10x12xf32>
  %gs_e = tensor.empty() : tensor<2x6x10x1xf32>
  %gs_f = linalg.fill ins(%zero : f32) outs(%gs_e : tensor<2x6x10x1xf32>) -> tensor<2x6x10x1xf32>
  %gs = linalg.generic {indexing_maps = [#id4, #row4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%gp : tensor<2x6x10x12xf32>) outs(%gs_f : tensor<2x6x10x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x6x10x1xf32>
  %ds = linalg.generic {indexing_maps = [#id4, #id4, #row4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%gp, %p, %gs : tensor<2x6x10x12xf32>, tensor<2x6x10x12xf32>, tensor<2x6x10x1xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %out: f32):
    %m = arith.mulf %b, %c : f32
    %y = arith.subf %a, %m : f32
    %c4 = arith.constant 0.25 : f32
    %z = arith.mulf %y, %c4 : f32
    linalg.yield %z : f32
  } -> tensor<2x6x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x6x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x6x10x16xf32>) -> tensor<2x6x10x16xf32>
  %dq = linalg.contract indexing_maps = [
      affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>,
      affine_map<(b, h, i, d, j) -> (b, h, i, d)>]
      ins(%ds, %kr : tensor<2x6x10x12xf32>, tensor<2x6x12x16xf32>) outs(%dq_f : tensor<2x6x10x16xf32>) -> tensor<2x6x10x16xf32>
  %dkr_e = tensor.empty() : tensor<2x6x12x16xf32>
  %dkr_f = linalg.fill ins(%zero : f32) outs(%dkr_e : tensor<2x6x12x16xf32>) -> tensor<2x6x12x16xf32>
  %dkr = linalg.contract indexing_maps = [
      affine_map<(b, h, j, d, i) -> (b, h, i, j)>, affine_map<(b, h, j, d, i) -> (b, h, i, d)>,
      affine_map<(b, h, j, d, i) -> (b, h, j, d)>]
      ins(%ds, %q : tensor<2x6x10x12xf32>, tensor<2x6x10x16xf32>) outs(%dkr_f : tensor<2x6x12x16xf32>) -> tensor<2x6x12x16xf32>
  // The repeat's backward: regroup the heads and sum each group (keepdim).
  %dk_x = tensor.expand_shape %dkr [[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 12, 16] : tensor<2x6x12x16xf32> into tensor<2x2x3x12x16xf32>
  %dk_e = tensor.empty() : tensor<2x2x1x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x2x1x12x16xf32>) -> tensor<2x2x1x12x16xf32>
  %dk_s = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>],
      iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]} ins(%dk_x : tensor<2x2x3x12x16xf32>) outs(%dk_f : tensor<2x2x1x12x16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x1x12x16xf32>
  %dk = tensor.collapse_shape %dk_s [[0], [1, 2], [3], [4]] : tensor<2x2x1x12x16xf32> into tensor<2x2x12x16xf32>
  %dv_x = tensor.expand_shape %dvr [[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 12, 8] : tensor<2x6x12x8xf32> into tensor<2x2x3x12x8xf32>
  %dv_e = tensor.empty() : tensor<2x2x1x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x2x1x12x8xf32>) -> tensor<2x2x1x12x8xf32>
  %dv_s = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>],
      iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]} ins(%dv_x : tensor<2x2x3x12x8xf32>) outs(%dv_f : tensor<2x2x1x12x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x1x12x8xf32>
  %dv = tensor.collapse_shape %dv_s [[0], [1, 2], [3], [4]] : tensor<2x2x1x12x8xf32> into tensor<2x2x12x8xf32>
  return %o, %dq, %dk, %dv : tensor<2x6x10x8xf32>, tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>
}

// -----

// CHECK-LABEL: func @gqa_bf16_training_jax_repeat
// CHECK-SAME: (%[[Q:.+]]: tensor<2x6x10x16xbf16>, %[[K:.+]]: tensor<2x2x12x16xbf16>, %[[V:.+]]: tensor<2x2x12x8xbf16>, %{{.+}}: tensor<2x6x10x8xbf16>)
// CHECK: %[[A:.+]]:2 = flash.attention ins(%[[Q]], %[[K]], %[[V]] :
// CHECK: %[[G:.+]]:3 = flash.attention_grad ins(%[[Q]], %[[K]], %[[V]], %[[A]]#0, %{{.+}}, %[[A]]#1 :
// CHECK-SAME: -> tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>
// CHECK-NOT: linalg.contract
// CHECK-NOT: linalg.reduce
// CHECK: return %{{.+}}, %[[G]]#0, %[[G]]#1, %[[G]]#2
// TWIN: tol=1e-2
// bf16 training with f32 accumulation (autocast's placement of casts): the
// f32 softmax's P truncated to bf16 for PV and dV, dS truncated to bf16 for
// dQ and dK; JAX's jnp.repeat (broadcast_in_dim + reshape), whose transpose
// is reshape + reduce_sum over the group without keepdim.
#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
#row4 = affine_map<(a, b, c, d) -> (a, b, c, 0)>
func.func @gqa_bf16_training_jax_repeat(%q: tensor<2x6x10x16xbf16>, %k: tensor<2x2x12x16xbf16>, %v: tensor<2x2x12x8xbf16>, %do: tensor<2x6x10x8xbf16>) -> (tensor<2x6x10x8xbf16>, tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %kr_e = tensor.empty() : tensor<2x2x3x12x16xbf16>
  %kr_b = linalg.broadcast ins(%k : tensor<2x2x12x16xbf16>) outs(%kr_e : tensor<2x2x3x12x16xbf16>) dimensions = [2]
  %kr = tensor.collapse_shape %kr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x16xbf16> into tensor<2x6x12x16xbf16>
  %vr_e = tensor.empty() : tensor<2x2x3x12x8xbf16>
  %vr_b = linalg.broadcast ins(%v : tensor<2x2x12x8xbf16>) outs(%vr_e : tensor<2x2x3x12x8xbf16>) dimensions = [2]
  %vr = tensor.collapse_shape %vr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x8xbf16> into tensor<2x6x12x8xbf16>
  %s_e = tensor.empty() : tensor<2x6x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s0 = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x6x10x16xbf16>, tensor<2x6x12x16xbf16>) outs(%s_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x6x10x12xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %pb_e = tensor.empty() : tensor<2x6x10x12xbf16>
  %pb = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p : tensor<2x6x10x12xf32>) outs(%pb_e : tensor<2x6x10x12xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %y = arith.truncf %in : f32 to bf16
    linalg.yield %y : bf16
  } -> tensor<2x6x10x12xbf16>
  %o_e = tensor.empty() : tensor<2x6x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %o32 = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%pb, %vr : tensor<2x6x10x12xbf16>, tensor<2x6x12x8xbf16>) outs(%o_f : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %ob_e = tensor.empty() : tensor<2x6x10x8xbf16>
  %o = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%o32 : tensor<2x6x10x8xf32>) outs(%ob_e : tensor<2x6x10x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %y = arith.truncf %in : f32 to bf16
    linalg.yield %y : bf16
  } -> tensor<2x6x10x8xbf16>
  // Backward, f32 accumulation of bf16 operands.
  %dvr_e = tensor.empty() : tensor<2x6x12x8xf32>
  %dvr_f = linalg.fill ins(%zero : f32) outs(%dvr_e : tensor<2x6x12x8xf32>) -> tensor<2x6x12x8xf32>
  %dvr = linalg.contract indexing_maps = [
      affine_map<(b, h, j, e, i) -> (b, h, i, j)>, affine_map<(b, h, j, e, i) -> (b, h, i, e)>,
      affine_map<(b, h, j, e, i) -> (b, h, j, e)>]
      ins(%pb, %do : tensor<2x6x10x12xbf16>, tensor<2x6x10x8xbf16>) outs(%dvr_f : tensor<2x6x12x8xf32>) -> tensor<2x6x12x8xf32>
  %dp = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>]
      ins(%do, %vr : tensor<2x6x10x8xbf16>, tensor<2x6x12x8xbf16>) outs(%s_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %gp = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x6x10x12xf32>, tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %y = arith.mulf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<2x6x10x12xf32>
  %gs_e = tensor.empty() : tensor<2x6x10x1xf32>
  %gs_f = linalg.fill ins(%zero : f32) outs(%gs_e : tensor<2x6x10x1xf32>) -> tensor<2x6x10x1xf32>
  %gs = linalg.generic {indexing_maps = [#id4, #row4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%gp : tensor<2x6x10x12xf32>) outs(%gs_f : tensor<2x6x10x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x6x10x1xf32>
  %dsb_e = tensor.empty() : tensor<2x6x10x12xbf16>
  %dsb = linalg.generic {indexing_maps = [#id4, #id4, #row4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%gp, %p, %gs : tensor<2x6x10x12xf32>, tensor<2x6x10x12xf32>, tensor<2x6x10x1xf32>) outs(%dsb_e : tensor<2x6x10x12xbf16>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %out: bf16):
    %m = arith.mulf %b, %c : f32
    %y = arith.subf %a, %m : f32
    %c4 = arith.constant 0.25 : f32
    %z = arith.mulf %y, %c4 : f32
    %t = arith.truncf %z : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x6x10x12xbf16>
  %dq_e = tensor.empty() : tensor<2x6x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x6x10x16xf32>) -> tensor<2x6x10x16xf32>
  %dq = linalg.contract indexing_maps = [
      affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>,
      affine_map<(b, h, i, d, j) -> (b, h, i, d)>]
      ins(%dsb, %kr : tensor<2x6x10x12xbf16>, tensor<2x6x12x16xbf16>) outs(%dq_f : tensor<2x6x10x16xf32>) -> tensor<2x6x10x16xf32>
  %dkr_e = tensor.empty() : tensor<2x6x12x16xf32>
  %dkr_f = linalg.fill ins(%zero : f32) outs(%dkr_e : tensor<2x6x12x16xf32>) -> tensor<2x6x12x16xf32>
  %dkr = linalg.contract indexing_maps = [
      affine_map<(b, h, j, d, i) -> (b, h, i, j)>, affine_map<(b, h, j, d, i) -> (b, h, i, d)>,
      affine_map<(b, h, j, d, i) -> (b, h, j, d)>]
      ins(%dsb, %q : tensor<2x6x10x12xbf16>, tensor<2x6x10x16xbf16>) outs(%dkr_f : tensor<2x6x12x16xf32>) -> tensor<2x6x12x16xf32>
  // broadcast_in_dim's transpose: reshape, then reduce_sum over the group.
  %dk_x = tensor.expand_shape %dkr [[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 12, 16] : tensor<2x6x12x16xf32> into tensor<2x2x3x12x16xf32>
  %dk_e = tensor.empty() : tensor<2x2x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x2x12x16xf32>) -> tensor<2x2x12x16xf32>
  %dk = linalg.reduce ins(%dk_x : tensor<2x2x3x12x16xf32>) outs(%dk_f : tensor<2x2x12x16xf32>) dimensions = [2]
    (%x: f32, %acc: f32) {
      %r = arith.addf %x, %acc : f32
      linalg.yield %r : f32
    }
  %dv_x = tensor.expand_shape %dvr [[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 12, 8] : tensor<2x6x12x8xf32> into tensor<2x2x3x12x8xf32>
  %dv_e = tensor.empty() : tensor<2x2x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x2x12x8xf32>) -> tensor<2x2x12x8xf32>
  %dv = linalg.reduce ins(%dv_x : tensor<2x2x3x12x8xf32>) outs(%dv_f : tensor<2x2x12x8xf32>) dimensions = [2]
    (%x: f32, %acc: f32) {
      %r = arith.addf %x, %acc : f32
      linalg.yield %r : f32
    }
  return %o, %dq, %dk, %dv : tensor<2x6x10x8xbf16>, tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>
}

// -----

// CHECK-LABEL: func @gqa_training_per_head_dk_also_returned
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>, tensor<2x6x12x8xf32>)
// CHECK: %[[G:.+]]:3 = flash.attention_grad
// CHECK-SAME: -> tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>, tensor<2x6x12x8xf32>
// CHECK: tensor.expand_shape %[[G]]#1
// CHECK: return {{.+}}, %[[G]]#1 :
// The graph also returns dK per query head: the gradients stay per query
// head (the repeat is kept), and the group sums stay the graph's.
#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
#row4 = affine_map<(a, b, c, d) -> (a, b, c, 0)>
func.func @gqa_training_per_head_dk_also_returned(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>, %do: tensor<2x6x10x8xf32>) -> (tensor<2x6x10x8xf32>, tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>, tensor<2x6x12x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %kr_x = tensor.expand_shape %k [[0], [1, 2], [3], [4]] output_shape [2, 2, 1, 12, 16] : tensor<2x2x12x16xf32> into tensor<2x2x1x12x16xf32>
  %kr_e = tensor.empty() : tensor<2x2x3x12x16xf32>
  %kr_b = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%kr_x : tensor<2x2x1x12x16xf32>) outs(%kr_e : tensor<2x2x3x12x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x2x3x12x16xf32>
  %kr = tensor.collapse_shape %kr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x16xf32> into tensor<2x6x12x16xf32>
  %vr_x = tensor.expand_shape %v [[0], [1, 2], [3], [4]] output_shape [2, 2, 1, 12, 8] : tensor<2x2x12x8xf32> into tensor<2x2x1x12x8xf32>
  %vr_e = tensor.empty() : tensor<2x2x3x12x8xf32>
  %vr_b = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%vr_x : tensor<2x2x1x12x8xf32>) outs(%vr_e : tensor<2x2x3x12x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x2x3x12x8xf32>
  %vr = tensor.collapse_shape %vr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x8xf32> into tensor<2x6x12x8xf32>
  %s_e = tensor.empty() : tensor<2x6x10x12xf32>
  %s_f = linalg.fill ins(%zero : f32) outs(%s_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s0 = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>) outs(%s_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x6x10x12xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %o_e = tensor.empty() : tensor<2x6x10x8xf32>
  %o_f = linalg.fill ins(%zero : f32) outs(%o_e : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %vr : tensor<2x6x10x12xf32>, tensor<2x6x12x8xf32>) outs(%o_f : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  // Backward.
  %dvr_e = tensor.empty() : tensor<2x6x12x8xf32>
  %dvr_f = linalg.fill ins(%zero : f32) outs(%dvr_e : tensor<2x6x12x8xf32>) -> tensor<2x6x12x8xf32>
  %dvr = linalg.contract indexing_maps = [
      affine_map<(b, h, j, e, i) -> (b, h, i, j)>, affine_map<(b, h, j, e, i) -> (b, h, i, e)>,
      affine_map<(b, h, j, e, i) -> (b, h, j, e)>]
      ins(%p, %do : tensor<2x6x10x12xf32>, tensor<2x6x10x8xf32>) outs(%dvr_f : tensor<2x6x12x8xf32>) -> tensor<2x6x12x8xf32>
  %dp = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>]
      ins(%do, %vr : tensor<2x6x10x8xf32>, tensor<2x6x12x8xf32>) outs(%s_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %gp = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp, %p : tensor<2x6x10x12xf32>, tensor<2x6x10x12xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %y = arith.mulf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<2x6x10x12xf32>
  %gs_e = tensor.empty() : tensor<2x6x10x1xf32>
  %gs_f = linalg.fill ins(%zero : f32) outs(%gs_e : tensor<2x6x10x1xf32>) -> tensor<2x6x10x1xf32>
  %gs = linalg.generic {indexing_maps = [#id4, #row4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%gp : tensor<2x6x10x12xf32>) outs(%gs_f : tensor<2x6x10x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x6x10x1xf32>
  %ds = linalg.generic {indexing_maps = [#id4, #id4, #row4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%gp, %p, %gs : tensor<2x6x10x12xf32>, tensor<2x6x10x12xf32>, tensor<2x6x10x1xf32>) outs(%s_e : tensor<2x6x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %out: f32):
    %m = arith.mulf %b, %c : f32
    %y = arith.subf %a, %m : f32
    %c4 = arith.constant 0.25 : f32
    %z = arith.mulf %y, %c4 : f32
    linalg.yield %z : f32
  } -> tensor<2x6x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x6x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x6x10x16xf32>) -> tensor<2x6x10x16xf32>
  %dq = linalg.contract indexing_maps = [
      affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>,
      affine_map<(b, h, i, d, j) -> (b, h, i, d)>]
      ins(%ds, %kr : tensor<2x6x10x12xf32>, tensor<2x6x12x16xf32>) outs(%dq_f : tensor<2x6x10x16xf32>) -> tensor<2x6x10x16xf32>
  %dkr_e = tensor.empty() : tensor<2x6x12x16xf32>
  %dkr_f = linalg.fill ins(%zero : f32) outs(%dkr_e : tensor<2x6x12x16xf32>) -> tensor<2x6x12x16xf32>
  %dkr = linalg.contract indexing_maps = [
      affine_map<(b, h, j, d, i) -> (b, h, i, j)>, affine_map<(b, h, j, d, i) -> (b, h, i, d)>,
      affine_map<(b, h, j, d, i) -> (b, h, j, d)>]
      ins(%ds, %q : tensor<2x6x10x12xf32>, tensor<2x6x10x16xf32>) outs(%dkr_f : tensor<2x6x12x16xf32>) -> tensor<2x6x12x16xf32>
  // The repeat's backward: regroup the heads and sum each group (keepdim).
  %dk_x = tensor.expand_shape %dkr [[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 12, 16] : tensor<2x6x12x16xf32> into tensor<2x2x3x12x16xf32>
  %dk_e = tensor.empty() : tensor<2x2x1x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x2x1x12x16xf32>) -> tensor<2x2x1x12x16xf32>
  %dk_s = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>],
      iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]} ins(%dk_x : tensor<2x2x3x12x16xf32>) outs(%dk_f : tensor<2x2x1x12x16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x1x12x16xf32>
  %dk = tensor.collapse_shape %dk_s [[0], [1, 2], [3], [4]] : tensor<2x2x1x12x16xf32> into tensor<2x2x12x16xf32>
  %dv_x = tensor.expand_shape %dvr [[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 12, 8] : tensor<2x6x12x8xf32> into tensor<2x2x3x12x8xf32>
  %dv_e = tensor.empty() : tensor<2x2x1x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x2x1x12x8xf32>) -> tensor<2x2x1x12x8xf32>
  %dv_s = linalg.generic {indexing_maps = [affine_map<(a, b, c, d, e) -> (a, b, c, d, e)>, affine_map<(a, b, c, d, e) -> (a, b, 0, d, e)>],
      iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]} ins(%dv_x : tensor<2x2x3x12x8xf32>) outs(%dv_f : tensor<2x2x1x12x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x1x12x8xf32>
  %dv = tensor.collapse_shape %dv_s [[0], [1, 2], [3], [4]] : tensor<2x2x1x12x8xf32> into tensor<2x2x12x8xf32>
  return %o, %dq, %dk, %dv, %dkr : tensor<2x6x10x8xf32>, tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>, tensor<2x6x12x16xf32>
}
