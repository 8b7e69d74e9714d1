// Functions as a frontend writes them for the GPU: tensors at the boundary,
// elementwise math before and after an attention spelled matmul -> softmax
// -> matmul, a transpose of K, head reshapes and a row reduction after it.
// flash-gpu-pipeline compiles each whole; python/tests/test_whole_function_gpu.py
// runs them against float64 and test/Conversion/flash-gpu-pipeline-whole-function.mlir
// checks what they become.

// bf16 inputs, D = Dv = 64, the attention output kept in f32 (the wgmma
// kernel writes it so). sin(q) before; tanh(2 o) after, and
// the row sums of o as a second result.
func.func @around(%q: tensor<2x4x100x64xbf16>, %k: tensor<2x4x70x64xbf16>,
                        %v: tensor<2x4x70x64xbf16>)
    -> (tensor<2x4x100x64xbf16>, tensor<2x4x100xf32>) {
  %zero = arith.constant 0.0 : f32
  %qe = math.sin %q : tensor<2x4x100x64xbf16>
  %kt0 = tensor.empty() : tensor<2x4x64x70xbf16>
  %kt = linalg.transpose ins(%k : tensor<2x4x70x64xbf16>) outs(%kt0 : tensor<2x4x64x70xbf16>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qe [[0, 1], [2], [3]] : tensor<2x4x100x64xbf16> into tensor<8x100x64xbf16>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x4x64x70xbf16> into tensor<8x64x70xbf16>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x4x70x64xbf16> into tensor<8x70x64xbf16>
  %s0 = tensor.empty() : tensor<8x100x70xf32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<8x100x70xf32>) -> tensor<8x100x70xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<8x100x64xbf16>, tensor<8x64x70xbf16>) outs(%s1 : tensor<8x100x70xf32>) -> tensor<8x100x70xf32>
  %ss0 = tensor.empty() : tensor<8x100x70xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<8x100x70xf32>) outs(%ss0 : tensor<8x100x70xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 0.125 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  } -> tensor<8x100x70xf32>
  %p0 = tensor.empty() : tensor<8x100x70xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<8x100x70xf32>) outs(%p0 : tensor<8x100x70xf32>) -> tensor<8x100x70xf32>
  %pb0 = tensor.empty() : tensor<8x100x70xbf16>
  %pb = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<8x100x70xf32>) outs(%pb0 : tensor<8x100x70xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<8x100x70xbf16>
  %o0 = tensor.empty() : tensor<8x100x64xf32>
  %o1 = linalg.fill ins(%zero : f32) outs(%o0 : tensor<8x100x64xf32>) -> tensor<8x100x64xf32>
  %o = linalg.batch_matmul ins(%pb, %vc : tensor<8x100x70xbf16>, tensor<8x70x64xbf16>) outs(%o1 : tensor<8x100x64xf32>) -> tensor<8x100x64xf32>
  %r = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [2, 4, 100, 64] : tensor<8x100x64xf32> into tensor<2x4x100x64xf32>
  // After it: tanh(2 o) in bf16, and the row sums of o in f32.
  %two = arith.constant dense<2.0> : tensor<2x4x100x64xf32>
  %y = arith.mulf %r, %two : tensor<2x4x100x64xf32>
  %t = math.tanh %y : tensor<2x4x100x64xf32>
  %tb = arith.truncf %t : tensor<2x4x100x64xf32> to tensor<2x4x100x64xbf16>
  %sum0 = tensor.empty() : tensor<2x4x100xf32>
  %sum1 = linalg.fill ins(%zero : f32) outs(%sum0 : tensor<2x4x100xf32>) -> tensor<2x4x100xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%r : tensor<2x4x100x64xf32>) outs(%sum1 : tensor<2x4x100xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %a = arith.addf %acc, %x : f32
    linalg.yield %a : f32
  } -> tensor<2x4x100xf32>
  return %tb, %sum : tensor<2x4x100x64xbf16>, tensor<2x4x100xf32>
}

// bf16, D = 32, Dv = 40 (the wgmma kernel). A causal mask written as a
// select on the scores; the output returned as the attention wrote it.
func.func @causal_dv40(%q: tensor<6x90x32xbf16>, %k: tensor<6x130x32xbf16>,
                      %v: tensor<6x130x40xbf16>) -> tensor<6x90x40xbf16> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s0 = tensor.empty() : tensor<6x90x130xf32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<6x90x130xf32>) -> tensor<6x90x130xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<6x90x32xbf16>, tensor<6x130x32xbf16>) outs(%s1 : tensor<6x90x130xf32>) -> tensor<6x90x130xf32>
  %m0 = tensor.empty() : tensor<6x90x130xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<6x90x130xf32>) outs(%m0 : tensor<6x90x130xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.constant 0.17677669 : f32
    %sc = arith.mulf %x, %c : f32
    %keep = arith.cmpi ule, %j, %i : index
    %y = arith.select %keep, %sc, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<6x90x130xf32>
  %p0 = tensor.empty() : tensor<6x90x130xf32>
  %p = linalg.softmax dimension(2) ins(%m : tensor<6x90x130xf32>) outs(%p0 : tensor<6x90x130xf32>) -> tensor<6x90x130xf32>
  %pb0 = tensor.empty() : tensor<6x90x130xbf16>
  %pb = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<6x90x130xf32>) outs(%pb0 : tensor<6x90x130xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<6x90x130xbf16>
  %o0 = tensor.empty() : tensor<6x90x40xf32>
  %o1 = linalg.fill ins(%zero : f32) outs(%o0 : tensor<6x90x40xf32>) -> tensor<6x90x40xf32>
  %o = linalg.batch_matmul ins(%pb, %v : tensor<6x90x130xbf16>, tensor<6x130x40xbf16>) outs(%o1 : tensor<6x90x40xf32>) -> tensor<6x90x40xf32>
  %ob0 = tensor.empty() : tensor<6x90x40xbf16>
  %ob = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%o : tensor<6x90x40xf32>) outs(%ob0 : tensor<6x90x40xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<6x90x40xbf16>
  return %ob : tensor<6x90x40xbf16>
}

// TOSA as a frontend writes grouped-query attention (f32, the portable
// kernel; test/Transforms/raise-attention/tosa.mlir): K/V reshaped to
// [B, Hkv, 1, L, D], broadcast by adding zeros, reshaped back and K
// transposed for tosa.matmul; tanh after it.
func.func @tosa_gqa(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>) -> tensor<2x6x10x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %k5s = tosa.const_shape {values = dense<[2, 2, 1, 12, 16]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v5s = tosa.const_shape {values = dense<[2, 2, 1, 12, 8]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %k5 = tosa.reshape %k, %k5s : (tensor<2x2x12x16xf32>, !tosa.shape<5>) -> tensor<2x2x1x12x16xf32>
  %v5 = tosa.reshape %v, %v5s : (tensor<2x2x12x8xf32>, !tosa.shape<5>) -> tensor<2x2x1x12x8xf32>
  %kz = "tosa.const"() <{values = dense<0.0> : tensor<2x2x3x12x16xf32>}> : () -> tensor<2x2x3x12x16xf32>
  %vz = "tosa.const"() <{values = dense<0.0> : tensor<2x2x3x12x8xf32>}> : () -> tensor<2x2x3x12x8xf32>
  %kb = tosa.add %k5, %kz : (tensor<2x2x1x12x16xf32>, tensor<2x2x3x12x16xf32>) -> tensor<2x2x3x12x16xf32>
  %vb = tosa.add %v5, %vz : (tensor<2x2x1x12x8xf32>, tensor<2x2x3x12x8xf32>) -> tensor<2x2x3x12x8xf32>
  %k4s = tosa.const_shape {values = dense<[2, 6, 12, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v4s = tosa.const_shape {values = dense<[2, 6, 12, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kr = tosa.reshape %kb, %k4s : (tensor<2x2x3x12x16xf32>, !tosa.shape<4>) -> tensor<2x6x12x16xf32>
  %vr = tosa.reshape %vb, %v4s : (tensor<2x2x3x12x8xf32>, !tosa.shape<4>) -> tensor<2x6x12x8xf32>
  %kt = tosa.transpose %kr {perms = array<i32: 0, 1, 3, 2>} : (tensor<2x6x12x16xf32>) -> tensor<2x6x16x12xf32>
  %q3s = tosa.const_shape {values = dense<[12, 10, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kt3s = tosa.const_shape {values = dense<[12, 16, 12]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v3s = tosa.const_shape {values = dense<[12, 12, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %os = tosa.const_shape {values = dense<[2, 6, 10, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %q3 = tosa.reshape %q, %q3s : (tensor<2x6x10x16xf32>, !tosa.shape<3>) -> tensor<12x10x16xf32>
  %kt3 = tosa.reshape %kt, %kt3s : (tensor<2x6x16x12xf32>, !tosa.shape<3>) -> tensor<12x16x12xf32>
  %v3 = tosa.reshape %vr, %v3s : (tensor<2x6x12x8xf32>, !tosa.shape<3>) -> tensor<12x12x8xf32>
  %s = tosa.matmul %q3, %kt3, %zp, %zp : (tensor<12x10x16xf32>, tensor<12x16x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x10x12xf32>
  %c = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<12x10x12xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<12x10x12xf32>
  %m = tosa.reduce_max %ss {axis = 2 : i32} : (tensor<12x10x12xf32>) -> tensor<12x10x1xf32>
  %d = tosa.sub %ss, %m : (tensor<12x10x12xf32>, tensor<12x10x1xf32>) -> tensor<12x10x12xf32>
  %e = tosa.exp %d : (tensor<12x10x12xf32>) -> tensor<12x10x12xf32>
  %su = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<12x10x12xf32>) -> tensor<12x10x1xf32>
  %rs = tosa.reciprocal %su : (tensor<12x10x1xf32>) -> tensor<12x10x1xf32>
  %p = tosa.mul %e, %rs, %shift : (tensor<12x10x12xf32>, tensor<12x10x1xf32>, tensor<1xi8>) -> tensor<12x10x12xf32>
  %o3 = tosa.matmul %p, %v3, %zp, %zp : (tensor<12x10x12xf32>, tensor<12x12x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x10x8xf32>
  %o = tosa.reshape %o3, %os : (tensor<12x10x8xf32>, !tosa.shape<4>) -> tensor<2x6x10x8xf32>
  %t = tosa.tanh %o : (tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32>
  return %t : tensor<2x6x10x8xf32>
}


// Decode with the output in f32 (GQA 4, D = 64, Dv = 48, 3000 keys): the
// wgmma kernel's decode form writes f32 rows. Its last CTA per row block
// merges the splits at 4 rows over 8 K/V heads; the combine kernel at 8
// rows over 4.
func.func @decode_f32_fused(%q: tensor<4x8x1x64xbf16>, %k: tensor<4x2x3000x64xbf16>, %v: tensor<4x2x3000x48xbf16>) -> tensor<4x8x1x48xf32> {
  %o0 = tensor.empty() : tensor<4x8x1x48xf32>
  %o = flash.attention ins(%q, %k, %v : tensor<4x8x1x64xbf16>, tensor<4x2x3000x64xbf16>, tensor<4x2x3000x48xbf16>)
      outs(%o0 : tensor<4x8x1x48xf32>) scale(0.125) -> tensor<4x8x1x48xf32>
  return %o : tensor<4x8x1x48xf32>
}

func.func @decode_f32_combine(%q: tensor<2x8x2x64xbf16>, %k: tensor<2x2x3000x64xbf16>, %v: tensor<2x2x3000x48xbf16>) -> tensor<2x8x2x48xf32> {
  %o0 = tensor.empty() : tensor<2x8x2x48xf32>
  %o = flash.attention ins(%q, %k, %v : tensor<2x8x2x64xbf16>, tensor<2x2x3000x64xbf16>, tensor<2x2x3000x48xbf16>)
      outs(%o0 : tensor<2x8x2x48xf32>) scale(0.125) -> tensor<2x8x2x48xf32>
  return %o : tensor<2x8x2x48xf32>
}
