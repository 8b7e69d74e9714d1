// Gathers through a block table that must not become flash.paged_attention
// (the attention is still raised over the gathered copy), each with the
// remark naming the condition that failed. Shapes as paged-gather.mlir:
// B = 2, H = 2, Lq = 3, D = 16, Dv = 8, pools of 5 pages of 4 keys, 3 pages
// per sequence.
// RUN: flash-opt %s -split-input-file --flash-raise-attention=remarks=true -verify-diagnostics
// RUN: flash-opt %s -split-input-file --flash-raise-attention | FileCheck %s --implicit-check-not=flash.paged_attention

// CHECK-LABEL: func @causal_at_capacity
// CHECK: flash.attention
// A causal mask over the gathered keys sits at the capacity (12), not at
// each sequence's length.
func.func @causal_at_capacity(%q: tensor<2x2x3x16xf32>, %kc: tensor<5x4x2x16xf32>, %vc: tensor<5x4x2x8xf32>, %table: tensor<2x3xi32>) -> tensor<2x2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kg_e = tensor.empty() : tensor<2x3x4x2x16xf32>
  %kg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%kg_e : tensor<2x3x4x2x16xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %x = tensor.extract %kc[%pi, %s, %h, %d] : tensor<5x4x2x16xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x16xf32>
  %vg_e = tensor.empty() : tensor<2x3x4x2x8xf32>
  %vg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%vg_e : tensor<2x3x4x2x8xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %x = tensor.extract %vc[%pi, %s, %h, %d] : tensor<5x4x2x8xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x8xf32>
  %kl = tensor.collapse_shape %kg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x16xf32> into tensor<2x12x2x16xf32>
  %vl = tensor.collapse_shape %vg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x8xf32> into tensor<2x12x2x8xf32>
  %qk_e = tensor.empty() : tensor<2x2x3x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sc = linalg.contract indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, j, h, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>] ins(%q, %kl : tensor<2x2x3x16xf32>, tensor<2x12x2x16xf32>) outs(%qk_f : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %m_e = tensor.empty() : tensor<2x2x3x12xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc : tensor<2x2x3x12xf32>) outs(%m_e : tensor<2x2x3x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %c = arith.cmpi sle, %j, %i : index
    %y = arith.select %c, %x, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<2x2x3x12xf32>
  %sm_e = tensor.empty() : tensor<2x2x3x12xf32>
  %p = linalg.softmax dimension(3) ins(%m : tensor<2x2x3x12xf32>) outs(%sm_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %pv_e = tensor.empty() : tensor<2x2x3x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  // expected-remark @+1 {{paged KV cache not folded into flash.paged_attention: the mask sits at the gathered length (pages · page_size), not at each sequence's length}}
  %o = linalg.contract indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, j, h, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>] ins(%p, %vl : tensor<2x2x3x12xf32>, tensor<2x12x2x8xf32>) outs(%pv_f : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// -----

// CHECK-LABEL: func @only_keys_paged
// CHECK: flash.attention
// K comes from the pool, V is a contiguous tensor.
func.func @only_keys_paged(%q: tensor<2x2x3x16xf32>, %kc: tensor<5x4x2x16xf32>, %vl: tensor<2x12x2x8xf32>, %table: tensor<2x3xi32>) -> tensor<2x2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %kg_e = tensor.empty() : tensor<2x3x4x2x16xf32>
  // expected-remark @+1 {{paged KV cache not folded into flash.paged_attention: K and V are not gathered through the same block table by the same pages}}
  %kg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%kg_e : tensor<2x3x4x2x16xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %x = tensor.extract %kc[%pi, %s, %h, %d] : tensor<5x4x2x16xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x16xf32>
  %kl = tensor.collapse_shape %kg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x16xf32> into tensor<2x12x2x16xf32>
  %qk_e = tensor.empty() : tensor<2x2x3x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sc = linalg.contract indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, j, h, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>] ins(%q, %kl : tensor<2x2x3x16xf32>, tensor<2x12x2x16xf32>) outs(%qk_f : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sm_e = tensor.empty() : tensor<2x2x3x12xf32>
  %p = linalg.softmax dimension(3) ins(%sc : tensor<2x2x3x12xf32>) outs(%sm_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %pv_e = tensor.empty() : tensor<2x2x3x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  %o = linalg.contract indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, j, h, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>] ins(%p, %vl : tensor<2x2x3x12xf32>, tensor<2x12x2x8xf32>) outs(%pv_f : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// -----

// CHECK-LABEL: func @heads_major_pages
// CHECK: flash.attention
// Pools laid out [pages, heads, page_size, D] (FlashInfer's HND): the paged
// op takes [pages, page_size, heads, D].
func.func @heads_major_pages(%q: tensor<2x2x3x16xf32>, %kc: tensor<5x2x4x16xf32>, %vc: tensor<5x2x4x8xf32>, %table: tensor<2x3xi32>) -> tensor<2x2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %kg_e = tensor.empty() : tensor<2x3x4x2x16xf32>
  %kg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%kg_e : tensor<2x3x4x2x16xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    // expected-remark @+1 {{paged KV cache not folded into flash.paged_attention: the pool is not read as [pages, page_size, heads, D] at (page, row in page, head, column)}}
    %x = tensor.extract %kc[%pi, %h, %s, %d] : tensor<5x2x4x16xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x16xf32>
  %vg_e = tensor.empty() : tensor<2x3x4x2x8xf32>
  %vg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%vg_e : tensor<2x3x4x2x8xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %x = tensor.extract %vc[%pi, %h, %s, %d] : tensor<5x2x4x8xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x8xf32>
  %kl = tensor.collapse_shape %kg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x16xf32> into tensor<2x12x2x16xf32>
  %vl = tensor.collapse_shape %vg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x8xf32> into tensor<2x12x2x8xf32>
  %qk_e = tensor.empty() : tensor<2x2x3x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sc = linalg.contract indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, j, h, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>] ins(%q, %kl : tensor<2x2x3x16xf32>, tensor<2x12x2x16xf32>) outs(%qk_f : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sm_e = tensor.empty() : tensor<2x2x3x12xf32>
  %p = linalg.softmax dimension(3) ins(%sc : tensor<2x2x3x12xf32>) outs(%sm_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %pv_e = tensor.empty() : tensor<2x2x3x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  %o = linalg.contract indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, j, h, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>] ins(%p, %vl : tensor<2x2x3x12xf32>, tensor<2x12x2x8xf32>) outs(%pv_f : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// -----

// CHECK-LABEL: func @page_from_loop_index
// CHECK: flash.attention
// The page depends on the head as well as the table entry (a per-head pool
// offset): not one block table for every head.
func.func @page_from_loop_index(%q: tensor<2x2x3x16xf32>, %kc: tensor<5x4x2x16xf32>, %vc: tensor<5x4x2x8xf32>, %table: tensor<2x3xi32>) -> tensor<2x2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %kg_e = tensor.empty() : tensor<2x3x4x2x16xf32>
  %kg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%kg_e : tensor<2x3x4x2x16xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %ph = arith.addi %pi, %h : index
    // expected-remark @+1 {{paged KV cache not folded into flash.paged_attention: the page index depends on a loop index, not only on the table}}
    %x = tensor.extract %kc[%ph, %s, %h, %d] : tensor<5x4x2x16xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x16xf32>
  %vg_e = tensor.empty() : tensor<2x3x4x2x8xf32>
  %vg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%vg_e : tensor<2x3x4x2x8xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %x = tensor.extract %vc[%pi, %s, %h, %d] : tensor<5x4x2x8xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x8xf32>
  %kl = tensor.collapse_shape %kg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x16xf32> into tensor<2x12x2x16xf32>
  %vl = tensor.collapse_shape %vg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x8xf32> into tensor<2x12x2x8xf32>
  %qk_e = tensor.empty() : tensor<2x2x3x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sc = linalg.contract indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, j, h, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>] ins(%q, %kl : tensor<2x2x3x16xf32>, tensor<2x12x2x16xf32>) outs(%qk_f : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sm_e = tensor.empty() : tensor<2x2x3x12xf32>
  %p = linalg.softmax dimension(3) ins(%sc : tensor<2x2x3x12xf32>) outs(%sm_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %pv_e = tensor.empty() : tensor<2x2x3x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  %o = linalg.contract indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, j, h, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>] ins(%p, %vl : tensor<2x2x3x12xf32>, tensor<2x12x2x8xf32>) outs(%pv_f : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// -----

// CHECK-LABEL: func @softcap_after_length
// CHECK: flash.attention
// Soft-capping applied after the length mask: it would see the masked keys'
// fill (30·tanh(-inf/30) = -30, not -inf), which the paged op has no keys for.
func.func @softcap_after_length(%q: tensor<2x2x3x16xf32>, %kc: tensor<5x4x2x16xf32>, %vc: tensor<5x4x2x8xf32>, %table: tensor<2x3xi32>, %lens: tensor<2xi32>) -> tensor<2x2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %cap = arith.constant 30.0 : f32
  %kg_e = tensor.empty() : tensor<2x3x4x2x16xf32>
  %kg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%kg_e : tensor<2x3x4x2x16xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %x = tensor.extract %kc[%pi, %s, %h, %d] : tensor<5x4x2x16xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x16xf32>
  %vg_e = tensor.empty() : tensor<2x3x4x2x8xf32>
  %vg = linalg.generic {indexing_maps = [affine_map<(b, p, s, h, d) -> (b, p)>, affine_map<(b, p, s, h, d) -> (b, p, s, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%table : tensor<2x3xi32>) outs(%vg_e : tensor<2x3x4x2x8xf32>) {
  ^bb0(%t: i32, %o: f32):
    %pi = arith.index_cast %t : i32 to index
    %s = linalg.index 2 : index
    %h = linalg.index 3 : index
    %d = linalg.index 4 : index
    %x = tensor.extract %vc[%pi, %s, %h, %d] : tensor<5x4x2x8xf32>
    linalg.yield %x : f32
  } -> tensor<2x3x4x2x8xf32>
  %kl = tensor.collapse_shape %kg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x16xf32> into tensor<2x12x2x16xf32>
  %vl = tensor.collapse_shape %vg [[0], [1, 2], [3], [4]] : tensor<2x3x4x2x8xf32> into tensor<2x12x2x8xf32>
  %qk_e = tensor.empty() : tensor<2x2x3x12xf32>
  %qk_f = linalg.fill ins(%zero : f32) outs(%qk_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %sc = linalg.contract indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, j, h, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>] ins(%q, %kl : tensor<2x2x3x16xf32>, tensor<2x12x2x16xf32>) outs(%qk_f : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %m_e = tensor.empty() : tensor<2x2x3x12xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc, %lens : tensor<2x2x3x12xf32>, tensor<2xi32>) outs(%m_e : tensor<2x2x3x12xf32>) {
  ^bb0(%x: f32, %n: i32, %o: f32):
    %j = linalg.index 3 : index
    %ni = arith.index_cast %n : i32 to index
    %c = arith.cmpi slt, %j, %ni : index
    %xm = arith.select %c, %x, %ninf : f32
    %xd = arith.divf %xm, %cap : f32
    %th = math.tanh %xd : f32
    %y = arith.mulf %th, %cap : f32
    linalg.yield %y : f32
  } -> tensor<2x2x3x12xf32>
  %sm_e = tensor.empty() : tensor<2x2x3x12xf32>
  %p = linalg.softmax dimension(3) ins(%m : tensor<2x2x3x12xf32>) outs(%sm_e : tensor<2x2x3x12xf32>) -> tensor<2x2x3x12xf32>
  %pv_e = tensor.empty() : tensor<2x2x3x8xf32>
  %pv_f = linalg.fill ins(%zero : f32) outs(%pv_e : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  // expected-remark @+1 {{paged KV cache not folded into flash.paged_attention: the score_mod's result is not a select that hides the keys past each sequence's length}}
  %o = linalg.contract indexing_maps = [affine_map<(b, h, i, j, e) -> (b, h, i, j)>, affine_map<(b, h, i, j, e) -> (b, j, h, e)>, affine_map<(b, h, i, j, e) -> (b, h, i, e)>] ins(%p, %vl : tensor<2x2x3x12xf32>, tensor<2x12x2x8xf32>) outs(%pv_f : tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}
