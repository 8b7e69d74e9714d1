// Scaled dot-product attention with a causal mask, as the fused op: batch 2,
// 4 query heads sharing 2 key/value heads (GQA), Lq = Lk = 256, D = 64, Dv = 64.
func.func @attention(%q: tensor<2x4x256x64xf32>, %k: tensor<2x2x256x64xf32>,
                     %v: tensor<2x2x256x64xf32>) -> tensor<2x4x256x64xf32> {
  %init = tensor.empty() : tensor<2x4x256x64xf32>
  %o = flash.attention ins(%q, %k, %v : tensor<2x4x256x64xf32>, tensor<2x2x256x64xf32>,
                                        tensor<2x2x256x64xf32>)
         outs(%init : tensor<2x4x256x64xf32>) scale(0.125) mask(causal)
         -> tensor<2x4x256x64xf32>
  return %o : tensor<2x4x256x64xf32>
}
