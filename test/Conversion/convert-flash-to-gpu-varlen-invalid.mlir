// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu -verify-diagnostics

// f32: the mma kernel takes bf16 or f16 only.
func.func @f32_varlen(%q: memref<10x2x32xf32>, %k: memref<12x2x32xf32>, %v: memref<12x2x32xf32>, %o: memref<10x2x32xf32>, %cu_q: memref<3xi32>, %cu_k: memref<3xi32>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<10x2x32xf32> to tensor<10x2x32xf32>
  %k_t = bufferization.to_tensor %k restrict : memref<12x2x32xf32> to tensor<12x2x32xf32>
  %v_t = bufferization.to_tensor %v restrict : memref<12x2x32xf32> to tensor<12x2x32xf32>
  %o_t = bufferization.to_tensor %o restrict writable : memref<10x2x32xf32> to tensor<10x2x32xf32>
  %cu_q_t = bufferization.to_tensor %cu_q restrict : memref<3xi32> to tensor<3xi32>
  %cu_k_t = bufferization.to_tensor %cu_k restrict : memref<3xi32> to tensor<3xi32>
  // expected-error @+1 {{convert-flash-to-gpu: query, key and value must all be bf16 or all f16}}
  %r = flash.varlen_attention ins(%q_t, %k_t, %v_t : tensor<10x2x32xf32>, tensor<12x2x32xf32>, tensor<12x2x32xf32>) seqlens(%cu_q_t, %cu_k_t : tensor<3xi32>, tensor<3xi32>) outs(%o_t : tensor<10x2x32xf32>) scale(1.767766953e-01) -> tensor<10x2x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<10x2x32xf32>, memref<10x2x32xf32>) -> ()
  return
}
