// Training graphs with attention sinks (gpt-oss): the forward concatenates
// one logit per head to the scores, takes the softmax over Lk + 1 columns
// and slices the sink column off; autodiff's backward reads P through that
// slice, pads dP with a zero column (the slice's backward), takes the
// softmax gradient over all Lk + 1 columns and slices dS back. The pair
// becomes flash.attention (sinks, LSE) and flash.attention_grad, whose P =
// exp(s − lse) already counts the sinks; the sinks' own gradient, where the
// graph computes it, is −Σ exp(sinks − lse)·rowsum(dO ∘ O) over batch and
// query rows, built from the fused op's results. Shapes: B = 2, H = 4, Lq = 10, Lk = 12,
// D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention_grad | FileCheck %s --check-prefix=RAN

// RAN: PASS sinks_training_insert_slice
// RAN: PASS sinks_training_pad
// RAN: PASS sinks_training_with_sink_gradient
// RAN: 3 passed, 0 failed

// CHECK-LABEL: func @sinks_training_insert_slice
// CHECK: %[[A:.+]]:2 = flash.attention ins(%arg0, %arg1, %arg2 : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>)
// CHECK-SAME: sinks(%arg3 : tensor<4xf32>) scale(0.25) -> tensor<2x4x10x8xf32>, tensor<2x4x10xf32>
// CHECK: %[[G:.+]]:3 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg4, %[[A]]#1 :
// CHECK-SAME: scale(0.25) -> tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>
// CHECK-NOT: linalg.softmax
// CHECK-NOT: tensor.concat
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
// torch's joint graph: slice_backward as an insert_slice into zeros,
// _softmax_backward_data as P ∘ (dP − rowsum(dP ∘ P)) over 13 columns.
func.func @sinks_training_insert_slice(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>, %sinks: tensor<4xf32>, %do: tensor<2x4x10x8xf32>) -> (tensor<2x4x10x8xf32>, tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%qk_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %sk_e = tensor.empty() : tensor<2x4x10x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (b)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<4xf32>) outs(%sk_e : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %out: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %sc, %sk : (tensor<2x4x10x12xf32>, tensor<2x4x10x1xf32>) -> tensor<2x4x10x13xf32>
  %full_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%cat : tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %sm[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  // Backward.
  %dv_e = tensor.empty() : tensor<2x4x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x4x12x8xf32>) -> tensor<2x4x12x8xf32>
  %dv = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, j, e)>]
      ins(%p, %do : tensor<2x4x10x12xf32>, tensor<2x4x10x8xf32>) outs(%dv_f : tensor<2x4x12x8xf32>) -> tensor<2x4x12x8xf32>
  %dp = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>]
      ins(%do, %v : tensor<2x4x10x8xf32>, tensor<2x4x12x8xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %z13 = linalg.fill ins(%zero : f32) outs(%full_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %dpf = tensor.insert_slice %dp into %z13[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x12xf32> into tensor<2x4x10x13xf32>
  %gp = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dpf, %sm : tensor<2x4x10x13xf32>, tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  } -> tensor<2x4x10x13xf32>
  %r_e = tensor.empty() : tensor<2x4x10xf32>
  %r_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%gp : tensor<2x4x10x13xf32>) outs(%r_f : tensor<2x4x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %a = arith.addf %x, %acc : f32
    linalg.yield %a : f32
  } -> tensor<2x4x10xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%gp, %r, %sm : tensor<2x4x10x13xf32>, tensor<2x4x10xf32>, tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %rs: f32, %pp: f32, %out: f32):
    %t = arith.mulf %pp, %rs : f32
    %d = arith.subf %x, %t : f32
    linalg.yield %d : f32
  } -> tensor<2x4x10x13xf32>
  %dsl = tensor.extract_slice %g[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dsl : tensor<2x4x10x12xf32>) outs(%qk_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x4x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x4x10x16xf32>) -> tensor<2x4x10x16xf32>
  %dq = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>]
      ins(%ds, %k : tensor<2x4x10x12xf32>, tensor<2x4x12x16xf32>) outs(%dq_f : tensor<2x4x10x16xf32>) -> tensor<2x4x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x4x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x4x12x16xf32>) -> tensor<2x4x12x16xf32>
  %dk = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>, affine_map<(b, h, i, j, d) -> (b, h, i, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, j, d)>]
      ins(%ds, %q : tensor<2x4x10x12xf32>, tensor<2x4x10x16xf32>) outs(%dk_f : tensor<2x4x12x16xf32>) -> tensor<2x4x12x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x4x10x8xf32>, tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_training_pad
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: sinks(%arg3 : tensor<4xf32>) scale(0.25)
// CHECK: flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg4, %[[A]]#1 :
// CHECK-NOT: tensor.pad
// JAX's transpose of the slice: lax.pad by one zero column at the high end.
func.func @sinks_training_pad(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>, %sinks: tensor<4xf32>, %do: tensor<2x4x10x8xf32>) -> (tensor<2x4x10x8xf32>, tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%qk_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %sk_e = tensor.empty() : tensor<2x4x10x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (b)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<4xf32>) outs(%sk_e : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %out: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %sc, %sk : (tensor<2x4x10x12xf32>, tensor<2x4x10x1xf32>) -> tensor<2x4x10x13xf32>
  %full_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%cat : tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %sm[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  // Backward.
  %dv_e = tensor.empty() : tensor<2x4x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x4x12x8xf32>) -> tensor<2x4x12x8xf32>
  %dv = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, j, e)>]
      ins(%p, %do : tensor<2x4x10x12xf32>, tensor<2x4x10x8xf32>) outs(%dv_f : tensor<2x4x12x8xf32>) -> tensor<2x4x12x8xf32>
  %dp = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>]
      ins(%do, %v : tensor<2x4x10x8xf32>, tensor<2x4x12x8xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %dpf = tensor.pad %dp low[0, 0, 0, 0] high[0, 0, 0, 1] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : f32
  } : tensor<2x4x10x12xf32> to tensor<2x4x10x13xf32>
  %gp = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dpf, %sm : tensor<2x4x10x13xf32>, tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  } -> tensor<2x4x10x13xf32>
  %r_e = tensor.empty() : tensor<2x4x10xf32>
  %r_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%gp : tensor<2x4x10x13xf32>) outs(%r_f : tensor<2x4x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %a = arith.addf %x, %acc : f32
    linalg.yield %a : f32
  } -> tensor<2x4x10xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%gp, %r, %sm : tensor<2x4x10x13xf32>, tensor<2x4x10xf32>, tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %rs: f32, %pp: f32, %out: f32):
    %t = arith.mulf %pp, %rs : f32
    %d = arith.subf %x, %t : f32
    linalg.yield %d : f32
  } -> tensor<2x4x10x13xf32>
  %dsl = tensor.extract_slice %g[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dsl : tensor<2x4x10x12xf32>) outs(%qk_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x4x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x4x10x16xf32>) -> tensor<2x4x10x16xf32>
  %dq = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>]
      ins(%ds, %k : tensor<2x4x10x12xf32>, tensor<2x4x12x16xf32>) outs(%dq_f : tensor<2x4x10x16xf32>) -> tensor<2x4x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x4x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x4x12x16xf32>) -> tensor<2x4x12x16xf32>
  %dk = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>, affine_map<(b, h, i, j, d) -> (b, h, i, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, j, d)>]
      ins(%ds, %q : tensor<2x4x10x12xf32>, tensor<2x4x10x16xf32>) outs(%dk_f : tensor<2x4x12x16xf32>) -> tensor<2x4x12x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x4x10x8xf32>, tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_training_with_sink_gradient
// CHECK: %[[A:.+]]:2 = flash.attention
// CHECK-SAME: sinks(%arg3 : tensor<4xf32>) scale(0.25)
// CHECK: %[[G:.+]]:3 = flash.attention_grad ins(%arg0, %arg1, %arg2, %[[A]]#0, %arg4, %[[A]]#1 :
// CHECK: %[[D:.+]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: %[[S:.+]] = linalg.generic
// CHECK-SAME: iterator_types = ["reduction", "parallel", "reduction"]
// CHECK-SAME: ins(%arg3, %[[A]]#1, %[[D]] :
// CHECK: math.exp
// CHECK-NOT: tensor.extract_slice
// CHECK: return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[S]]
// The sinks take a gradient too: the sink column of the softmax gradient,
// summed over the batch and the query rows (the broadcast's backward). It
// becomes −Σ exp(sinks − lse)·rowsum(dO ∘ O) from the fused op's results.
func.func @sinks_training_with_sink_gradient(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>, %sinks: tensor<4xf32>, %do: tensor<2x4x10x8xf32>) -> (tensor<2x4x10x8xf32>, tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%qk_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %sk_e = tensor.empty() : tensor<2x4x10x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (b)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<4xf32>) outs(%sk_e : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %out: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %sc, %sk : (tensor<2x4x10x12xf32>, tensor<2x4x10x1xf32>) -> tensor<2x4x10x13xf32>
  %full_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%cat : tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %sm[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  // Backward.
  %dv_e = tensor.empty() : tensor<2x4x12x8xf32>
  %dv_f = linalg.fill ins(%zero : f32) outs(%dv_e : tensor<2x4x12x8xf32>) -> tensor<2x4x12x8xf32>
  %dv = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, j, e)>]
      ins(%p, %do : tensor<2x4x10x12xf32>, tensor<2x4x10x8xf32>) outs(%dv_f : tensor<2x4x12x8xf32>) -> tensor<2x4x12x8xf32>
  %dp = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>]
      ins(%do, %v : tensor<2x4x10x8xf32>, tensor<2x4x12x8xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %z13 = linalg.fill ins(%zero : f32) outs(%full_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %dpf = tensor.insert_slice %dp into %z13[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x12xf32> into tensor<2x4x10x13xf32>
  %gp = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dpf, %sm : tensor<2x4x10x13xf32>, tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  } -> tensor<2x4x10x13xf32>
  %r_e = tensor.empty() : tensor<2x4x10xf32>
  %r_f = linalg.fill ins(%zero : f32) outs(%r_e : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%gp : tensor<2x4x10x13xf32>) outs(%r_f : tensor<2x4x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %a = arith.addf %x, %acc : f32
    linalg.yield %a : f32
  } -> tensor<2x4x10xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%gp, %r, %sm : tensor<2x4x10x13xf32>, tensor<2x4x10xf32>, tensor<2x4x10x13xf32>) outs(%full_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %rs: f32, %pp: f32, %out: f32):
    %t = arith.mulf %pp, %rs : f32
    %d = arith.subf %x, %t : f32
    linalg.yield %d : f32
  } -> tensor<2x4x10x13xf32>
  %dsl = tensor.extract_slice %g[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dsl : tensor<2x4x10x12xf32>) outs(%qk_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %dq_e = tensor.empty() : tensor<2x4x10x16xf32>
  %dq_f = linalg.fill ins(%zero : f32) outs(%dq_e : tensor<2x4x10x16xf32>) -> tensor<2x4x10x16xf32>
  %dq = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>]
      ins(%ds, %k : tensor<2x4x10x12xf32>, tensor<2x4x12x16xf32>) outs(%dq_f : tensor<2x4x10x16xf32>) -> tensor<2x4x10x16xf32>
  %dk_e = tensor.empty() : tensor<2x4x12x16xf32>
  %dk_f = linalg.fill ins(%zero : f32) outs(%dk_e : tensor<2x4x12x16xf32>) -> tensor<2x4x12x16xf32>
  %dk = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>, affine_map<(b, h, i, j, d) -> (b, h, i, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, j, d)>]
      ins(%ds, %q : tensor<2x4x10x12xf32>, tensor<2x4x10x16xf32>) outs(%dk_f : tensor<2x4x12x16xf32>) -> tensor<2x4x12x16xf32>
  // The sinks' gradient: the sink column of the softmax gradient, summed over
  // the batch and the query rows (the broadcast's backward).
  %gsk = tensor.extract_slice %g[0, 0, 0, 12] [2, 4, 10, 1] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10xf32>
  %h_e = tensor.empty() : tensor<4xf32>
  %h_f = linalg.fill ins(%zero : f32) outs(%h_e : tensor<4xf32>) -> tensor<4xf32>
  %dsinks = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (b)>], iterator_types = ["reduction", "parallel", "reduction"]} ins(%gsk : tensor<2x4x10xf32>) outs(%h_f : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %a = arith.addf %x, %acc : f32
    linalg.yield %a : f32
  } -> tensor<4xf32>
  return %o, %dq, %dk, %dv, %dsinks : tensor<2x4x10x8xf32>, tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>, tensor<4xf32>
}
