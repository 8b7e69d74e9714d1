// Grouped-query and multi-query attention: K/V that repeat fewer heads in
// interleaved order become a group factor. Shapes: H = 6, Lq = 10, Lk = 12,
// D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--flash-raise-attention --expect flash.attention

// CHECK-LABEL: func @gqa_repeat_interleave_broadcast
// CHECK-SAME: (%[[Q:.+]]: tensor<2x6x10x16xf32>, %[[K:.+]]: tensor<2x2x12x16xf32>, %[[V:.+]]: tensor<2x2x12x8xf32>)
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
// CHECK-SAME: outs(%{{.+}} : tensor<2x6x10x8xf32>) scale(1.0) -> tensor<2x6x10x8xf32>
// CHECK-NOT: linalg.broadcast
// GQA: K/V heads repeat-interleaved (linalg.broadcast + collapse_shape), read
// through transposed indexing maps: 6 query heads share 2 KV heads.
func.func @gqa_repeat_interleave_broadcast(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>) -> tensor<2x6x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %kr_e = tensor.empty() : tensor<2x2x3x12x16xf32>
  %kr_b = linalg.broadcast ins(%k : tensor<2x2x12x16xf32>) outs(%kr_e : tensor<2x2x3x12x16xf32>) dimensions = [2]
  %kr = tensor.collapse_shape %kr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x16xf32> into tensor<2x6x12x16xf32>
  %vr_e = tensor.empty() : tensor<2x2x3x12x8xf32>
  %vr_b = linalg.broadcast ins(%v : tensor<2x2x12x8xf32>) outs(%vr_e : tensor<2x2x3x12x8xf32>) dimensions = [2]
  %vr = tensor.collapse_shape %vr_b [[0], [1, 2], [3], [4]] : tensor<2x2x3x12x8xf32> into tensor<2x6x12x8xf32>
  %qk_e = tensor.empty() : tensor<2x6x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>) outs(%qk_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x6x10x12xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<2x6x10x12xf32>) outs(%softmax_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x6x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %vr : tensor<2x6x10x12xf32>, tensor<2x6x12x8xf32>) outs(%pv_f : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  return %o : tensor<2x6x10x8xf32>
}

// -----

// CHECK-LABEL: func @gqa_hf_repeat_kv_keepdim
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
// HF repeat_kv: unsqueeze, expand over the group dim, reshape.
func.func @gqa_hf_repeat_kv_keepdim(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>) -> tensor<2x6x10x8xf32> {
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
  %qk_e = tensor.empty() : tensor<2x6x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>) outs(%qk_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x6x10x12xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<2x6x10x12xf32>) outs(%softmax_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x6x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %vr : tensor<2x6x10x12xf32>, tensor<2x6x12x8xf32>) outs(%pv_f : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  return %o : tensor<2x6x10x8xf32>
}

// -----

// CHECK-LABEL: func @mqa_single_kv_head
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x6x10x16xf32>, tensor<2x1x12x16xf32>, tensor<2x1x12x8xf32>)
// MQA: one KV head for all six query heads.
func.func @mqa_single_kv_head(%q: tensor<2x6x10x16xf32>, %k: tensor<2x1x12x16xf32>, %v: tensor<2x1x12x8xf32>) -> tensor<2x6x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %kr_e = tensor.empty() : tensor<2x1x6x12x16xf32>
  %kr_b = linalg.broadcast ins(%k : tensor<2x1x12x16xf32>) outs(%kr_e : tensor<2x1x6x12x16xf32>) dimensions = [2]
  %kr = tensor.collapse_shape %kr_b [[0], [1, 2], [3], [4]] : tensor<2x1x6x12x16xf32> into tensor<2x6x12x16xf32>
  %vr_e = tensor.empty() : tensor<2x1x6x12x8xf32>
  %vr_b = linalg.broadcast ins(%v : tensor<2x1x12x8xf32>) outs(%vr_e : tensor<2x1x6x12x8xf32>) dimensions = [2]
  %vr = tensor.collapse_shape %vr_b [[0], [1, 2], [3], [4]] : tensor<2x1x6x12x8xf32> into tensor<2x6x12x8xf32>
  %qk_e = tensor.empty() : tensor<2x6x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>) outs(%qk_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x6x10x12xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<2x6x10x12xf32>) outs(%softmax_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x6x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %vr : tensor<2x6x10x12xf32>, tensor<2x6x12x8xf32>) outs(%pv_f : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  return %o : tensor<2x6x10x8xf32>
}

// -----

// CHECK-LABEL: func @tile_order_repeat_stays_materialised
// CHECK: linalg.broadcast
// CHECK: flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>, tensor<2x6x12x8xf32>)
// Tile-order repeat (head h reads h mod Hkv) is not grouped-query attention:
// the repeated K/V stay materialised and the op has group size 1.
func.func @tile_order_repeat_stays_materialised(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>) -> tensor<2x6x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %kr_e = tensor.empty() : tensor<2x3x2x12x16xf32>
  %kr_b = linalg.broadcast ins(%k : tensor<2x2x12x16xf32>) outs(%kr_e : tensor<2x3x2x12x16xf32>) dimensions = [1]
  %kr = tensor.collapse_shape %kr_b [[0], [1, 2], [3], [4]] : tensor<2x3x2x12x16xf32> into tensor<2x6x12x16xf32>
  %vr_e = tensor.empty() : tensor<2x3x2x12x8xf32>
  %vr_b = linalg.broadcast ins(%v : tensor<2x2x12x8xf32>) outs(%vr_e : tensor<2x3x2x12x8xf32>) dimensions = [1]
  %vr = tensor.collapse_shape %vr_b [[0], [1, 2], [3], [4]] : tensor<2x3x2x12x8xf32> into tensor<2x6x12x8xf32>
  %qk_e = tensor.empty() : tensor<2x6x10x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %s = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>,
      affine_map<(b, h, i, j, d) -> (b, h, i, j)>]
      ins(%q, %kr : tensor<2x6x10x16xf32>, tensor<2x6x12x16xf32>) outs(%qk_f : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %softmax_e = tensor.empty() : tensor<2x6x10x12xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<2x6x10x12xf32>) outs(%softmax_e : tensor<2x6x10x12xf32>) -> tensor<2x6x10x12xf32>
  %pv_e = tensor.empty() : tensor<2x6x10x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  %o = linalg.contract indexing_maps = [
      affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, h, j, e)>,
      affine_map<(b, h, i, j, e) -> (b, h, i, e)>]
      ins(%p, %vr : tensor<2x6x10x12xf32>, tensor<2x6x12x8xf32>) outs(%pv_f : tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  return %o : tensor<2x6x10x8xf32>
}
