// Causal self-attention as torch-mlir writes it for a bf16 model: 4-D
// [batch, heads, seq, head_dim] tensors, QKᵀ and PV as 5-loop contraction
// generics with the reduction loop in the middle and the products taken in
// f32, the scale as a division, a causal mask from index compares with
// finfo.min as the fill, an f32 softmax, and P truncated to bf16 before PV.
// batch 2, 8 heads, 512 tokens, head_dim 64.
#qk_q = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#qk_k = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#qk_s = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#pv_p = affine_map<(b, h, i, j, e) -> (b, h, i, j)>
#pv_v = affine_map<(b, h, i, j, e) -> (b, h, j, e)>
#pv_o = affine_map<(b, h, i, j, e) -> (b, h, i, e)>
#id = affine_map<(b, h, i, j) -> (b, h, i, j)>
#row = affine_map<(b, h, i, j) -> (b, h, i)>
func.func @attention(%q: tensor<2x8x512x64xbf16>, %k: tensor<2x8x512x64xbf16>,
                     %v: tensor<2x8x512x64xbf16>) -> tensor<2x8x512x64xbf16>
    attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s0 = tensor.empty() : tensor<2x8x512x512xf32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x512x512xf32>) -> tensor<2x8x512x512xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%q, %k : tensor<2x8x512x64xbf16>, tensor<2x8x512x64xbf16>) outs(%s1 : tensor<2x8x512x512xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x8x512x512xf32>
  // scores / sqrt(64), then where(i >= j, scores, finfo.min)
  %m0 = tensor.empty() : tensor<2x8x512x512xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x8x512x512xf32>) outs(%m0 : tensor<2x8x512x512xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c8 = arith.constant 8.0 : f32
    %fmin = arith.constant -3.40282347E+38 : f32
    %y = arith.divf %x, %c8 : f32
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %keep = arith.cmpi sge, %i, %j : index
    %z = arith.select %keep, %y, %fmin : f32
    linalg.yield %z : f32
  } -> tensor<2x8x512x512xf32>
  %p0 = tensor.empty() : tensor<2x8x512x512xf32>
  %p = linalg.softmax dimension(3) ins(%masked : tensor<2x8x512x512xf32>) outs(%p0 : tensor<2x8x512x512xf32>) -> tensor<2x8x512x512xf32>
  %pb0 = tensor.empty() : tensor<2x8x512x512xbf16>
  %pb = linalg.generic {indexing_maps = [#id, #id],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%p : tensor<2x8x512x512xf32>) outs(%pb0 : tensor<2x8x512x512xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x8x512x512xbf16>
  %o0 = tensor.empty() : tensor<2x8x512x64xf32>
  %o1 = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x512x64xf32>) -> tensor<2x8x512x64xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%pb, %v : tensor<2x8x512x512xbf16>, tensor<2x8x512x64xbf16>) outs(%o1 : tensor<2x8x512x64xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x8x512x64xf32>
  %out0 = tensor.empty() : tensor<2x8x512x64xbf16>
  %out = linalg.generic {indexing_maps = [#id, #id],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%o : tensor<2x8x512x64xf32>) outs(%out0 : tensor<2x8x512x64xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x8x512x64xbf16>
  return %out : tensor<2x8x512x64xbf16>
}
