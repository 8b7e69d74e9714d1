// Attention sinks as gpt-oss writes them: one logit per head concatenated to
// every row of scores along the key axis, a softmax over Lk + 1 columns, and
// a slice that drops the sink column before the second matmul. They become
// the op's `sinks` operand, a [Hq] vector. Shapes: B = 2, Hq = 4, Lq = 10,
// Lk = 12 (13 with the sink), D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// Twins: the raised function lowered by the reference decomposition and by
// the tiled online softmax (blocks that do not divide Lq or Lk).
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention '--expect=sinks(' | FileCheck %s --check-prefix=RAN
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention '--expect=sinks(' \
// RUN:   '--lower=--flash-tile-attention=block-q=4 block-kv=5' | FileCheck %s --check-prefix=RAN

// RAN: PASS sinks_gpt_oss_concat_softmax
// RAN: PASS sinks_insert_slice_decomposed_softmax
// RAN: PASS sinks_first_gqa
// RAN: PASS sinks_causal_bottom_right
// RAN: PASS sinks_bf16_f32_softmax
// RAN: PASS sinks_zero_column
// RAN: PASS sinks_dynamic_lengths
// RAN: PASS sinks_lse_exported
// RAN: 8 passed, 0 failed

// CHECK-LABEL: func @sinks_gpt_oss_concat_softmax
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x10x16xf32>, %[[K:.+]]: tensor<2x4x12x16xf32>, %[[V:.+]]: tensor<2x4x12x8xf32>, %[[S:.+]]: tensor<4xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>)
// CHECK-SAME: outs(%{{.+}} : tensor<2x4x10x8xf32>) sinks(%[[S]] : tensor<4xf32>) scale(0.25) -> tensor<2x4x10x8xf32>
// CHECK-NOT: tensor.concat
// CHECK-NOT: linalg.softmax
// CHECK-NOT: tensor.extract_slice
// HF gpt-oss eager attention: sinks.reshape(1, -1, 1, 1).expand(B, -1, Lq,
// -1), torch.cat([scores, sinks], -1), combined - combined.max(-1), softmax,
// probs[..., :-1].
func.func @sinks_gpt_oss_concat_softmax(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>, %sinks: tensor<4xf32>) -> tensor<2x4x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %sc_e = tensor.empty() : tensor<2x4x10x12xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%sc_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %sk_r = tensor.expand_shape %sinks [[0, 1, 2, 3]] output_shape [1, 4, 1, 1] : tensor<4xf32> into tensor<1x4x1x1xf32>
  %sk_e = tensor.empty() : tensor<2x4x10x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (0, b, 0, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sk_r : tensor<1x4x1x1xf32>) outs(%sk_e : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %sc, %sk : (tensor<2x4x10x12xf32>, tensor<2x4x10x1xf32>) -> tensor<2x4x10x13xf32>
  %mx_e = tensor.empty() : tensor<2x4x10x1xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%mx_e : tensor<2x4x10x1xf32>) -> tensor<2x4x10x1xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%cat : tensor<2x4x10x13xf32>) outs(%mx_f : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4x10x1xf32>
  %sh_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sh = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, 0)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cat, %mx : tensor<2x4x10x13xf32>, tensor<2x4x10x1xf32>) outs(%sh_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %y = arith.subf %x, %m : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x13xf32>
  %sm_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%sh : tensor<2x4x10x13xf32>) outs(%sm_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %sm[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  return %o : tensor<2x4x10x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_insert_slice_decomposed_softmax
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[B:.+]] = linalg.broadcast ins(%[[S]] : tensor<4xf32>) outs(%{{.+}} : tensor<2x4xf32>) dimensions = [0]
// CHECK: %[[T:.+]] = tensor.collapse_shape %[[B]] {{\[}}[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<8x10x16xf32>, tensor<8x12x16xf32>, tensor<8x12x8xf32>)
// CHECK-SAME: sinks(%[[T]] : tensor<8xf32>) scale(0.25) -> tensor<8x10x8xf32>
// CHECK-NOT: tensor.insert_slice
// CHECK-NOT: math.exp
// Both matmuls are batch_matmuls over batch and heads merged into one dim
// (the op's heads dim is B * H, and sink bh is sinks[bh mod H]); between
// them the [B, H, Lq, Lk] scores and a linalg.broadcast of the sinks are
// written into an empty [.., Lk + 1] tensor by two insert_slices (the sink
// column rank-reduced), and the softmax is decomposed into max, sub+exp,
// sum and a divide.
func.func @sinks_insert_slice_decomposed_softmax(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>, %sinks: tensor<4xf32>) -> tensor<2x4x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %q3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<2x4x10x16xf32> into tensor<8x10x16xf32>
  %k3 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<2x4x12x16xf32> into tensor<8x12x16xf32>
  %qk_e = tensor.empty() : tensor<8x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<8x10x12xf32>) -> tensor<8x10x12xf32>
  %s3 = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q3, %k3 : tensor<8x10x16xf32>, tensor<8x12x16xf32>) outs(%qk_f : tensor<8x10x12xf32>) -> tensor<8x10x12xf32>
  %s = tensor.expand_shape %s3 [[0, 1], [2], [3]] output_shape [2, 4, 10, 12] : tensor<8x10x12xf32> into tensor<2x4x10x12xf32>
  %sc_e = tensor.empty() : tensor<2x4x10x12xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%sc_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 4.0 : f32
    %y = arith.divf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %sk_e = tensor.empty() : tensor<2x4x10xf32>
  %sk = linalg.broadcast ins(%sinks : tensor<4xf32>) outs(%sk_e : tensor<2x4x10xf32>) dimensions = [0, 2]
  %cat_e = tensor.empty() : tensor<2x4x10x13xf32>
  %cat_0 = tensor.insert_slice %sc into %cat_e[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x12xf32> into tensor<2x4x10x13xf32>
  %cat = tensor.insert_slice %sk into %cat_0[0, 0, 0, 12] [2, 4, 10, 1] [1, 1, 1, 1] : tensor<2x4x10xf32> into tensor<2x4x10x13xf32>
  %mx_e = tensor.empty() : tensor<2x4x10xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%mx_e : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%cat : tensor<2x4x10x13xf32>) outs(%mx_f : tensor<2x4x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4x10xf32>
  %ex_e = tensor.empty() : tensor<2x4x10x13xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cat, %mx : tensor<2x4x10x13xf32>, tensor<2x4x10xf32>) outs(%ex_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %y = arith.subf %x, %m : f32
    %z = math.exp %y : f32
    linalg.yield %z : f32
  } -> tensor<2x4x10x13xf32>
  %sum_e = tensor.empty() : tensor<2x4x10xf32>
  %sum_f = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<2x4x10x13xf32>) outs(%sum_f : tensor<2x4x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4x10xf32>
  %pr_e = tensor.empty() : tensor<2x4x10x13xf32>
  %pr = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x10x13xf32>, tensor<2x4x10xf32>) outs(%pr_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %z: f32, %o: f32):
    %y = arith.divf %x, %z : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %pr[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x4x10x12xf32> into tensor<8x10x12xf32>
  %v3 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x4x12x8xf32> into tensor<8x12x8xf32>
  %pv_e = tensor.empty() : tensor<8x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<8x10x8xf32>) -> tensor<8x10x8xf32>
  %o3 = linalg.batch_matmul ins(%p3, %v3 : tensor<8x10x12xf32>, tensor<8x12x8xf32>) outs(%pv_f : tensor<8x10x8xf32>) -> tensor<8x10x8xf32>
  %o = tensor.expand_shape %o3 [[0, 1], [2], [3]] output_shape [2, 4, 10, 8] : tensor<8x10x8xf32> into tensor<2x4x10x8xf32>
  return %o : tensor<2x4x10x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_first_gqa
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x10x16xf32>, %[[K:.+]]: tensor<2x2x12x16xf32>, %[[V:.+]]: tensor<2x2x12x8xf32>, %[[S:.+]]: tensor<1x4x1x1xf32>)
// CHECK: %[[S1:.+]] = tensor.collapse_shape %[[S]] {{\[}}[0, 1, 2, 3]] : tensor<1x4x1x1xf32> into tensor<4xf32>
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x4x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
// CHECK-SAME: sinks(%[[S1]] : tensor<4xf32>) scale(1.0) -> tensor<2x4x10x8xf32>
// CHECK-NOT: linalg.broadcast
// GQA (2 K/V heads repeated for 4 query heads) with the sink column first:
// torch.cat([sinks, scores], -1) and probs[..., 1:]; the sinks arrive as
// the [1, H, 1, 1] parameter view.
func.func @sinks_first_gqa(%q: tensor<2x4x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>, %sinks: tensor<1x4x1x1xf32>) -> tensor<2x4x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %kr_e = tensor.empty() : tensor<2x2x2x12x16xf32>
  %kr_b = linalg.broadcast ins(%k : tensor<2x2x12x16xf32>) outs(%kr_e : tensor<2x2x2x12x16xf32>) dimensions = [2]
  %kr = tensor.collapse_shape %kr_b [[0], [1, 2], [3], [4]] : tensor<2x2x2x12x16xf32> into tensor<2x4x12x16xf32>
  %vr_e = tensor.empty() : tensor<2x2x2x12x8xf32>
  %vr_b = linalg.broadcast ins(%v : tensor<2x2x12x8xf32>) outs(%vr_e : tensor<2x2x2x12x8xf32>) dimensions = [2]
  %vr = tensor.collapse_shape %vr_b [[0], [1, 2], [3], [4]] : tensor<2x2x2x12x8xf32> into tensor<2x4x12x8xf32>
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %sk_e = tensor.empty() : tensor<2x4x10x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (0, b, 0, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<1x4x1x1xf32>) outs(%sk_e : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %sk, %s : (tensor<2x4x10x1xf32>, tensor<2x4x10x12xf32>) -> tensor<2x4x10x13xf32>
  %sm_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%cat : tensor<2x4x10x13xf32>) outs(%sm_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %sm[0, 0, 0, 1] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %vr : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  return %o : tensor<2x4x10x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_causal_bottom_right
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: flash.attention
// CHECK-SAME: sinks(%[[S]] : tensor<4xf32>) scale(0.25) mask(causal, bottom_right) -> tensor<2x4x10x8xf32>
// CHECK-NOT: score_mod
// A causal mask aligned to the last query (j <= i + Lk - Lq, a decode step
// against a cache) on the scores, then the sink column, which no mask
// hides.
func.func @sinks_causal_bottom_right(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>, %sinks: tensor<4xf32>) -> tensor<2x4x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %sc_e = tensor.empty() : tensor<2x4x10x12xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%sc_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %fill = arith.constant -3.40282347E+38 : f32
    %two = arith.constant 2 : index
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %i2 = arith.addi %i, %two : index
    %ok = arith.cmpi sle, %j, %i2 : index
    %y = arith.mulf %x, %c : f32
    %m = arith.select %ok, %y, %fill : f32
    linalg.yield %m : f32
  } -> tensor<2x4x10x12xf32>
  %sk_e = tensor.empty() : tensor<2x4x10x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (b)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<4xf32>) outs(%sk_e : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %sc, %sk : (tensor<2x4x10x12xf32>, tensor<2x4x10x1xf32>) -> tensor<2x4x10x13xf32>
  %sm_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%cat : tensor<2x4x10x13xf32>) outs(%sm_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %sm[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  return %o : tensor<2x4x10x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_bf16_f32_softmax
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x10x16xbf16>, %[[K:.+]]: tensor<2x4x12x16xbf16>, %[[V:.+]]: tensor<2x4x12x8xbf16>, %[[S:.+]]: tensor<4xbf16>)
// CHECK: %[[S32:.+]] = linalg.generic
// CHECK-SAME: ins(%[[S]] : tensor<4xbf16>)
// CHECK: arith.extf
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x4x10x16xbf16>, tensor<2x4x12x16xbf16>, tensor<2x4x12x8xbf16>)
// CHECK-SAME: sinks(%[[S32]] : tensor<4xf32>) scale(0.25)
// TWIN: tol=1e-2
// bf16 model: bf16 scores (f32 accumulation, truncf) and bf16 sinks are
// concatenated in bf16, widened for an f32 softmax, and P is truncated to
// bf16 for the second matmul.
func.func @sinks_bf16_f32_softmax(%q: tensor<2x4x10x16xbf16>, %k: tensor<2x4x12x16xbf16>, %v: tensor<2x4x12x8xbf16>, %sinks: tensor<4xbf16>) -> tensor<2x4x10x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x10x16xbf16>, tensor<2x4x12x16xbf16>) outs(%qk_f : tensor<2x4x10x12xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x10x12xf32>
  %sc_e = tensor.empty() : tensor<2x4x10x12xbf16>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%sc_e : tensor<2x4x10x12xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    %t = arith.truncf %y : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x4x10x12xbf16>
  %sk_e = tensor.empty() : tensor<2x4x10x1xbf16>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (b)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<4xbf16>) outs(%sk_e : tensor<2x4x10x1xbf16>) {
  ^bb0(%x: bf16, %o: bf16):
    linalg.yield %x : bf16
  } -> tensor<2x4x10x1xbf16>
  %cat = tensor.concat dim(3) %sc, %sk : (tensor<2x4x10x12xbf16>, tensor<2x4x10x1xbf16>) -> tensor<2x4x10x13xbf16>
  %w_e = tensor.empty() : tensor<2x4x10x13xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cat : tensor<2x4x10x13xbf16>) outs(%w_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %y = arith.extf %x : bf16 to f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x13xf32>
  %sm_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%w : tensor<2x4x10x13xf32>) outs(%sm_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %pb_e = tensor.empty() : tensor<2x4x10x13xbf16>
  %pb = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sm : tensor<2x4x10x13xf32>) outs(%pb_e : tensor<2x4x10x13xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  } -> tensor<2x4x10x13xbf16>
  %p = tensor.extract_slice %pb[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xbf16> to tensor<2x4x10x12xbf16>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(b, h, i, e, j) -> (b, h, i, j)>, affine_map<(b, h, i, e, j) -> (b, h, j, e)>, affine_map<(b, h, i, e, j) -> (b, h, i, e)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<2x4x10x12xbf16>, tensor<2x4x12x8xbf16>) outs(%pv_f : tensor<2x4x10x8xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x10x8xf32>
  %out_e = tensor.empty() : tensor<2x4x10x8xbf16>
  %out = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%o : tensor<2x4x10x8xf32>) outs(%out_e : tensor<2x4x10x8xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x4x10x8xbf16>
  return %out : tensor<2x4x10x8xbf16>
}

// -----

// CHECK-LABEL: func @sinks_zero_column
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[Z:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E]] : tensor<4xf32>)
// CHECK: flash.attention
// CHECK-SAME: sinks(%[[Z]] : tensor<4xf32>) scale(1.0) -> tensor<2x4x10x8xf32>
// A column of zeros ("softmax off by one"): the same sink, 0, for every
// head.
func.func @sinks_zero_column(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>) -> tensor<2x4x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %z_e = tensor.empty() : tensor<2x4x10x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%z_e : tensor<2x4x10x1xf32>) -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %s, %z : (tensor<2x4x10x12xf32>, tensor<2x4x10x1xf32>) -> tensor<2x4x10x13xf32>
  %sm_e = tensor.empty() : tensor<2x4x10x13xf32>
  %sm = linalg.softmax dimension(3) ins(%cat : tensor<2x4x10x13xf32>) outs(%sm_e : tensor<2x4x10x13xf32>) -> tensor<2x4x10x13xf32>
  %p = tensor.extract_slice %sm[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  return %o : tensor<2x4x10x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_dynamic_lengths
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x4x?x16xf32>, tensor<2x4x?x16xf32>, tensor<2x4x?x8xf32>)
// CHECK-SAME: sinks(%[[S]] : tensor<4xf32>) scale(1.0) -> tensor<2x4x?x8xf32>
// CHECK-NOT: tensor.concat
// TWIN: arg0=shape=2x4x10x16 arg1=shape=2x4x12x16 arg2=shape=2x4x12x8 ret0=shape=2x4x10x8
// Serving shapes: Lq and Lk dynamic, sizes computed from the inputs'
// dims. The slice keeps (Lk + 1) - 1 columns, which value bounds show to be
// the scores' Lk.
func.func @sinks_dynamic_lengths(%q: tensor<2x4x?x16xf32>, %k: tensor<2x4x?x16xf32>, %v: tensor<2x4x?x8xf32>, %sinks: tensor<4xf32>) -> tensor<2x4x?x8xf32> {
  %zero = arith.constant 0.0 : f32
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %lq = tensor.dim %q, %c2 : tensor<2x4x?x16xf32>
  %lk = tensor.dim %k, %c2 : tensor<2x4x?x16xf32>
  %qk_e = tensor.empty(%lq, %lk) : tensor<2x4x?x?xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x?x?xf32>) -> tensor<2x4x?x?xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x?x16xf32>, tensor<2x4x?x16xf32>) outs(%qk_f : tensor<2x4x?x?xf32>) -> tensor<2x4x?x?xf32>
  %sk_e = tensor.empty(%lq) : tensor<2x4x?x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (b)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<4xf32>) outs(%sk_e : tensor<2x4x?x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x?x1xf32>
  %cat = tensor.concat dim(3) %s, %sk : (tensor<2x4x?x?xf32>, tensor<2x4x?x1xf32>) -> tensor<2x4x?x?xf32>
  %n = arith.addi %lk, %c1 : index
  %sm_e = tensor.empty(%lq, %n) : tensor<2x4x?x?xf32>
  %sm = linalg.softmax dimension(3) ins(%cat : tensor<2x4x?x?xf32>) outs(%sm_e : tensor<2x4x?x?xf32>) -> tensor<2x4x?x?xf32>
  %kept = arith.subi %n, %c1 : index
  %p = tensor.extract_slice %sm[0, 0, 0, 0] [2, 4, %lq, %kept] [1, 1, 1, 1] : tensor<2x4x?x?xf32> to tensor<2x4x?x?xf32>
  %pv_e = tensor.empty(%lq) : tensor<2x4x?x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x?x8xf32>) -> tensor<2x4x?x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x?x?xf32>, tensor<2x4x?x8xf32>) outs(%pv_f : tensor<2x4x?x8xf32>) -> tensor<2x4x?x8xf32>
  return %o : tensor<2x4x?x8xf32>
}

// -----

// CHECK-LABEL: func @sinks_lse_exported
// CHECK: %[[A:.+]]:2 = flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>, tensor<2x4x12x8xf32>)
// CHECK-SAME: outs(%{{.+}}, %{{.+}} : tensor<2x4x10x8xf32>, tensor<2x4x10xf32>) sinks(%{{.+}} : tensor<4xf32>) scale(0.25)
// CHECK-NOT: math.log
// CHECK: return %[[A]]#0, %[[A]]#1
// A model that keeps its own backward: the softmax over the scores and the
// sink column written out (row max, exp, sum, divide) and its log-sum-exp
// max + log(sum) returned beside the output. That is the op's LSE with
// sinks, lse = log(exp(sink) + sum_j exp(s_j)).
func.func @sinks_lse_exported(%q: tensor<2x4x10x16xf32>, %k: tensor<2x4x12x16xf32>, %v: tensor<2x4x12x8xf32>, %sinks: tensor<4xf32>) -> (tensor<2x4x10x8xf32>, tensor<2x4x10xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %qk_e = tensor.empty() : tensor<2x4x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %k : tensor<2x4x10x16xf32>, tensor<2x4x12x16xf32>) outs(%qk_f : tensor<2x4x10x12xf32>) -> tensor<2x4x10x12xf32>
  %sc_e = tensor.empty() : tensor<2x4x10x12xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x10x12xf32>) outs(%sc_e : tensor<2x4x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x12xf32>
  %sk_e = tensor.empty() : tensor<2x4x10x1xf32>
  %sk = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (b)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sinks : tensor<4xf32>) outs(%sk_e : tensor<2x4x10x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x4x10x1xf32>
  %cat = tensor.concat dim(3) %sc, %sk : (tensor<2x4x10x12xf32>, tensor<2x4x10x1xf32>) -> tensor<2x4x10x13xf32>
  %mx_e = tensor.empty() : tensor<2x4x10xf32>
  %mx_f = linalg.fill ins(%ninf : f32) outs(%mx_e : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%cat : tensor<2x4x10x13xf32>) outs(%mx_f : tensor<2x4x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4x10xf32>
  %ex_e = tensor.empty() : tensor<2x4x10x13xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cat, %mx : tensor<2x4x10x13xf32>, tensor<2x4x10xf32>) outs(%ex_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %d = arith.subf %x, %m : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<2x4x10x13xf32>
  %sum_f = linalg.fill ins(%zero : f32) outs(%mx_e : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<2x4x10x13xf32>) outs(%sum_f : tensor<2x4x10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4x10xf32>
  %pr_e = tensor.empty() : tensor<2x4x10x13xf32>
  %pr = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x10x13xf32>, tensor<2x4x10xf32>) outs(%pr_e : tensor<2x4x10x13xf32>) {
  ^bb0(%x: f32, %z: f32, %o: f32):
    %y = arith.divf %x, %z : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10x13xf32>
  %lse_e = tensor.empty() : tensor<2x4x10xf32>
  %lse = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%mx, %sum : tensor<2x4x10xf32>, tensor<2x4x10xf32>) outs(%lse_e : tensor<2x4x10xf32>) {
  ^bb0(%m: f32, %z: f32, %o: f32):
    %l = math.log %z : f32
    %y = arith.addf %m, %l : f32
    linalg.yield %y : f32
  } -> tensor<2x4x10xf32>
  %p = tensor.extract_slice %pr[0, 0, 0, 0] [2, 4, 10, 12] [1, 1, 1, 1] : tensor<2x4x10x13xf32> to tensor<2x4x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x4x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %v : tensor<2x4x10x12xf32>, tensor<2x4x12x8xf32>) outs(%pv_f : tensor<2x4x10x8xf32>) -> tensor<2x4x10x8xf32>
  return %o, %lse : tensor<2x4x10x8xf32>, tensor<2x4x10xf32>
}
