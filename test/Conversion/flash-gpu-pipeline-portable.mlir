// The portable kernel (forced: mma.sync would take these dims) through the whole pipeline: PTX for an Ampere chip with
// no libdevice (CUDA_HOME unset) and, with ptxas, a cubin for it.
// RUN: env -u CUDA_HOME flash-opt %s --flash-gpu-pipeline="kernel=portable chip=sm_80 features=+ptx70 format=isa" | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ env CUDA_HOME=%cuda_home flash-opt %s --flash-gpu-pipeline="kernel=portable chip=sm_80 features=+ptx70 format=bin" | FileCheck %s --check-prefix=BIN %}

// PTX-LABEL: llvm.func @attn(
// PTX-NOT: mgpuTensorMapEncodeTiledMemref
// PTX: gpu.launch_func <%{{.*}} : !llvm.ptr> @flash_attention_0::@kernel
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: assembly = "
// PTX-SAME: .target sm_80
// PTX-NOT: __nv_
// PTX-NOT: wgmma
// PTX-DAG: .maxntid 128, 1, 1
// PTX-DAG: bar.sync
// PTX-DAG: ex2.approx.ftz.f32
// PTX-DAG: lg2.approx.f32
// PTX-DAG: fma.rn.f32

// BIN: gpu.binary @flash_attention_0 [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx70">
// BIN-SAME: bin = "\7FELF

func.func @attn(%q: memref<2x3x50x80xf16>, %k: memref<2x3x70x80xf16>,
                %v: memref<2x3x70x48xf16>, %o: memref<2x3x50x48xf16>,
                %lse: memref<2x3x50xf32>)
    attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<2x3x50x80xf16> to tensor<2x3x50x80xf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x3x70x80xf16> to tensor<2x3x70x80xf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x3x70x48xf16> to tensor<2x3x70x48xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x3x50x48xf16> to tensor<2x3x50x48xf16>
  %lt = bufferization.to_tensor %lse restrict writable : memref<2x3x50xf32> to tensor<2x3x50xf32>
  %r:2 = flash.attention ins(%qt, %kt, %vt : tensor<2x3x50x80xf16>, tensor<2x3x70x80xf16>, tensor<2x3x70x48xf16>)
         outs(%ot, %lt : tensor<2x3x50x48xf16>, tensor<2x3x50xf32>) scale(0.11) mask(sliding_window, 16, bottom_right)
         -> tensor<2x3x50x48xf16>, tensor<2x3x50xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<2x3x50x48xf16>, memref<2x3x50x48xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<2x3x50xf32>, memref<2x3x50xf32>) -> ()
  return
}
