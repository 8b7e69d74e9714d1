// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu -verify-diagnostics

// f32 caches: the split-KV kernel is mma.sync (bf16 / f16).
func.func @f32_cache(%q: memref<2x4x1x64xf32>, %kc: memref<9x16x2x64xf32>, %vc: memref<9x16x2x64xf32>,
                     %o: memref<2x4x1x64xf32>, %t: memref<2x4xi32>, %n: memref<2xi32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<2x4x1x64xf32> to tensor<2x4x1x64xf32>
  %k_t = bufferization.to_tensor %kc restrict : memref<9x16x2x64xf32> to tensor<9x16x2x64xf32>
  %v_t = bufferization.to_tensor %vc restrict : memref<9x16x2x64xf32> to tensor<9x16x2x64xf32>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x4x1x64xf32> to tensor<2x4x1x64xf32>
  %t_t = bufferization.to_tensor %t restrict : memref<2x4xi32> to tensor<2x4xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<2xi32> to tensor<2xi32>
  // expected-error @+1 {{convert-flash-to-gpu: query, key and value must all be bf16 or all f16}}
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<2x4x1x64xf32>, tensor<9x16x2x64xf32>, tensor<9x16x2x64xf32>) pages(%t_t, %n_t : tensor<2x4xi32>, tensor<2xi32>) outs(%o_t : tensor<2x4x1x64xf32>) scale(0.125) -> tensor<2x4x1x64xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x1x64xf32>, memref<2x4x1x64xf32>) -> ()
  return
}

// -----

// Dynamic query length: the kernel packs the rows of a K/V head into one tile.
func.func @dynamic_lq(%q: memref<2x4x?x64xbf16>, %kc: memref<9x16x2x64xbf16>, %vc: memref<9x16x2x64xbf16>,
                      %o: memref<2x4x?x64xbf16>, %t: memref<2x4xi32>, %n: memref<2xi32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<2x4x?x64xbf16> to tensor<2x4x?x64xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<9x16x2x64xbf16> to tensor<9x16x2x64xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<9x16x2x64xbf16> to tensor<9x16x2x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x4x?x64xbf16> to tensor<2x4x?x64xbf16>
  %t_t = bufferization.to_tensor %t restrict : memref<2x4xi32> to tensor<2x4xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<2xi32> to tensor<2xi32>
  // expected-error @+1 {{convert-flash-to-gpu: the split-KV kernel packs the query rows of a K/V head into one tile and needs a static query length}}
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<2x4x?x64xbf16>, tensor<9x16x2x64xbf16>, tensor<9x16x2x64xbf16>) pages(%t_t, %n_t : tensor<2x4xi32>, tensor<2xi32>) outs(%o_t : tensor<2x4x?x64xbf16>) scale(0.125) -> tensor<2x4x?x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x?x64xbf16>, memref<2x4x?x64xbf16>) -> ()
  return
}

// -----

// A block table that is not a view of a device buffer.
func.func @table_not_a_buffer(%q: memref<2x4x1x64xbf16>, %kc: memref<9x16x2x64xbf16>, %vc: memref<9x16x2x64xbf16>,
                              %o: memref<2x4x1x64xbf16>, %t: tensor<2x4xi32>, %n: memref<2xi32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<2x4x1x64xbf16> to tensor<2x4x1x64xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<9x16x2x64xbf16> to tensor<9x16x2x64xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<9x16x2x64xbf16> to tensor<9x16x2x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x4x1x64xbf16> to tensor<2x4x1x64xbf16>
  %n_t = bufferization.to_tensor %n restrict : memref<2xi32> to tensor<2xi32>
  // expected-error @+1 {{convert-flash-to-gpu: block table must be a bufferization.to_tensor of a device memref}}
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<2x4x1x64xbf16>, tensor<9x16x2x64xbf16>, tensor<9x16x2x64xbf16>) pages(%t, %n_t : tensor<2x4xi32>, tensor<2xi32>) outs(%o_t : tensor<2x4x1x64xbf16>) scale(0.125) -> tensor<2x4x1x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x1x64xbf16>, memref<2x4x1x64xbf16>) -> ()
  return
}
