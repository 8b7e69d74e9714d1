// flash.attention_grad ops the GPU backward does not take yet are refused
// with the reason, never lowered wrongly.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu -verify-diagnostics -o /dev/null

func.func @f32(%q: memref<16x64xf32>, %k: memref<16x64xf32>, %v: memref<16x64xf32>, %o: memref<16x64xf32>, %do: memref<16x64xf32>, %lse: memref<16xf32>, %dq: memref<16x64xf32>, %dk: memref<16x64xf32>, %dv: memref<16x64xf32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<16x64xf32> to tensor<16x64xf32>
  %k_t = bufferization.to_tensor %k restrict : memref<16x64xf32> to tensor<16x64xf32>
  %v_t = bufferization.to_tensor %v restrict : memref<16x64xf32> to tensor<16x64xf32>
  %o_t = bufferization.to_tensor %o restrict : memref<16x64xf32> to tensor<16x64xf32>
  %do_t = bufferization.to_tensor %do restrict : memref<16x64xf32> to tensor<16x64xf32>
  %lse_t = bufferization.to_tensor %lse restrict : memref<16xf32> to tensor<16xf32>
  %dq_t = bufferization.to_tensor %dq restrict writable : memref<16x64xf32> to tensor<16x64xf32>
  %dk_t = bufferization.to_tensor %dk restrict writable : memref<16x64xf32> to tensor<16x64xf32>
  %dv_t = bufferization.to_tensor %dv restrict writable : memref<16x64xf32> to tensor<16x64xf32>
  // expected-error @+1 {{convert-flash-to-gpu: the flash.attention_grad kernel needs bf16 or f16 operands}}
  %r:3 = flash.attention_grad ins(%q_t, %k_t, %v_t, %o_t, %do_t, %lse_t : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16xf32>) outs(%dq_t, %dk_t, %dv_t : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) scale(0.125) -> tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
  return
}

// -----

func.func @d144(%q: memref<16x144xbf16>, %k: memref<16x144xbf16>, %v: memref<16x64xbf16>, %o: memref<16x64xbf16>, %do: memref<16x64xbf16>, %lse: memref<16xf32>, %dq: memref<16x144xbf16>, %dk: memref<16x144xbf16>, %dv: memref<16x64xbf16>) {
  %q_t = bufferization.to_tensor %q restrict : memref<16x144xbf16> to tensor<16x144xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<16x144xbf16> to tensor<16x144xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<16x64xbf16> to tensor<16x64xbf16>
  %o_t = bufferization.to_tensor %o restrict : memref<16x64xbf16> to tensor<16x64xbf16>
  %do_t = bufferization.to_tensor %do restrict : memref<16x64xbf16> to tensor<16x64xbf16>
  %lse_t = bufferization.to_tensor %lse restrict : memref<16xf32> to tensor<16xf32>
  %dq_t = bufferization.to_tensor %dq restrict writable : memref<16x144xbf16> to tensor<16x144xbf16>
  %dk_t = bufferization.to_tensor %dk restrict writable : memref<16x144xbf16> to tensor<16x144xbf16>
  %dv_t = bufferization.to_tensor %dv restrict writable : memref<16x64xbf16> to tensor<16x64xbf16>
  // expected-error @+1 {{convert-flash-to-gpu: the flash.attention_grad kernel needs static head dims D and Dv that are multiples of 16 up to 128, or of 32 up to 256, got D = 144, Dv = 64}}
  %r:3 = flash.attention_grad ins(%q_t, %k_t, %v_t, %o_t, %do_t, %lse_t : tensor<16x144xbf16>, tensor<16x144xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16xf32>) outs(%dq_t, %dk_t, %dv_t : tensor<16x144xbf16>, tensor<16x144xbf16>, tensor<16x64xbf16>) scale(0.125) -> tensor<16x144xbf16>, tensor<16x144xbf16>, tensor<16x64xbf16>
  return
}

// -----

func.func @dv40(%q: memref<16x64xf16>, %k: memref<16x64xf16>, %v: memref<16x40xf16>, %o: memref<16x40xf16>, %do: memref<16x40xf16>, %lse: memref<16xf32>, %dq: memref<16x64xf16>, %dk: memref<16x64xf16>, %dv: memref<16x40xf16>) {
  %q_t = bufferization.to_tensor %q restrict : memref<16x64xf16> to tensor<16x64xf16>
  %k_t = bufferization.to_tensor %k restrict : memref<16x64xf16> to tensor<16x64xf16>
  %v_t = bufferization.to_tensor %v restrict : memref<16x40xf16> to tensor<16x40xf16>
  %o_t = bufferization.to_tensor %o restrict : memref<16x40xf16> to tensor<16x40xf16>
  %do_t = bufferization.to_tensor %do restrict : memref<16x40xf16> to tensor<16x40xf16>
  %lse_t = bufferization.to_tensor %lse restrict : memref<16xf32> to tensor<16xf32>
  %dq_t = bufferization.to_tensor %dq restrict writable : memref<16x64xf16> to tensor<16x64xf16>
  %dk_t = bufferization.to_tensor %dk restrict writable : memref<16x64xf16> to tensor<16x64xf16>
  %dv_t = bufferization.to_tensor %dv restrict writable : memref<16x40xf16> to tensor<16x40xf16>
  // expected-error @+1 {{convert-flash-to-gpu: the flash.attention_grad kernel needs static head dims D and Dv that are multiples of 16 up to 128, or of 32 up to 256, got D = 64, Dv = 40}}
  %r:3 = flash.attention_grad ins(%q_t, %k_t, %v_t, %o_t, %do_t, %lse_t : tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x40xf16>, tensor<16x40xf16>, tensor<16x40xf16>, tensor<16xf32>) outs(%dq_t, %dk_t, %dv_t : tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x40xf16>) scale(0.125) -> tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x40xf16>
  return
}

// -----

// A capture read other than element-wise: the kernels only load elements.
func.func @capture_size(%q: memref<16x64xbf16>, %k: memref<24x64xbf16>, %v: memref<24x64xbf16>, %o: memref<16x64xbf16>, %do: memref<16x64xbf16>, %lse: memref<16xf32>, %dq: memref<16x64xbf16>, %dk: memref<24x64xbf16>, %dv: memref<24x64xbf16>, %bias: memref<16x24xf32>, %dbias: memref<16x24xf32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<16x64xbf16> to tensor<16x64xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<24x64xbf16> to tensor<24x64xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<24x64xbf16> to tensor<24x64xbf16>
  %o_t = bufferization.to_tensor %o restrict : memref<16x64xbf16> to tensor<16x64xbf16>
  %do_t = bufferization.to_tensor %do restrict : memref<16x64xbf16> to tensor<16x64xbf16>
  %lse_t = bufferization.to_tensor %lse restrict : memref<16xf32> to tensor<16xf32>
  %dq_t = bufferization.to_tensor %dq restrict writable : memref<16x64xbf16> to tensor<16x64xbf16>
  %dk_t = bufferization.to_tensor %dk restrict writable : memref<24x64xbf16> to tensor<24x64xbf16>
  %dv_t = bufferization.to_tensor %dv restrict writable : memref<24x64xbf16> to tensor<24x64xbf16>
  %bias_t = bufferization.to_tensor %bias restrict : memref<16x24xf32> to tensor<16x24xf32>
  %dbias_t = bufferization.to_tensor %dbias restrict writable : memref<16x24xf32> to tensor<16x24xf32>
  %r:4 = flash.attention_grad ins(%q_t, %k_t, %v_t, %o_t, %do_t, %lse_t : tensor<16x64xbf16>, tensor<24x64xbf16>, tensor<24x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16xf32>) outs(%dq_t, %dk_t, %dv_t, %dbias_t : tensor<16x64xbf16>, tensor<24x64xbf16>, tensor<24x64xbf16>, tensor<16x24xf32>) captures(%bias_t : tensor<16x24xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %i: index, %j: index, %bt: tensor<16x24xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<16x24xf32>
           %c1 = arith.constant 1 : index
           // expected-error @+1 {{convert-flash-to-gpu: a score_mod capture may only be read with tensor.extract at the top level of the region}}
           %n = tensor.dim %bt, %c1 : tensor<16x24xf32>
           %ni = arith.index_cast %n : index to i32
           %nf = arith.sitofp %ni : i32 to f32
           %y = arith.addf %s, %x : f32
           %z = arith.addf %y, %nf : f32
           flash.yield %z : f32
         } -> tensor<16x64xbf16>, tensor<24x64xbf16>, tensor<24x64xbf16>, tensor<16x24xf32>
  return
}
