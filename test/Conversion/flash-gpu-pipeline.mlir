// PTX needs only LLVM's NVPTX backend; a cubin needs ptxas.
// RUN: flash-opt %s --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: flash-opt %s --flash-gpu-pipeline="format=isa tensormap-params=false" | sed 's/\\0A/\n/g' | FileCheck %s --check-prefix=PTR
// RUN: flash-opt %s --flash-gpu-pipeline="format=isa" | sed 's/\\0A/\n/g' | FileCheck %s --check-prefix=BYVAL
// RUN: %if ptxas %{ env CUDA_HOME=%cuda_home flash-opt %s --flash-gpu-pipeline="format=bin" | FileCheck %s --check-prefix=BIN %}
// RUN: %if ptxas %{ env CUDA_HOME=%cuda_home flash-opt %s --flash-gpu-pipeline="format=bin tensormap-params=false" | FileCheck %s --check-prefix=BIN %}

// PTX-LABEL: llvm.func @attn(
// PTX-COUNT-3: llvm.call @mgpuTensorMapEncodeTiledMemref
// PTX: gpu.launch_func <%{{.*}} : !llvm.ptr> @flash_attention_0::@kernel
// PTX-LABEL: llvm.func @_mlir_ciface_attn(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: assembly = "
// D = 64 without a mask: three consumer warpgroups of 64 rows + the producer.
// PTX-DAG: .maxntid 512, 1, 1
// PTX-DAG: setmaxnreg.dec.sync.aligned.u32
// PTX-DAG: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG: setmaxnreg.inc.sync.aligned.u32
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX-DAG: ex2.approx.ftz.f32
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16

// By default the maps of Q, K and V are grid-constant parameters, read in
// place; with tensormap-params=false, pointers to device copies.
// BYVAL: .param .align 64 .b8 kernel_param_0[128]
// BYVAL-NEXT: .param .align 64 .b8 kernel_param_1[128]
// BYVAL-NEXT: .param .align 64 .b8 kernel_param_2[128]
// BYVAL: cvta.param.u64
// PTR-NOT: .b8 kernel_param_0[128]
// PTR: .param .u64 .ptr .align 1 kernel_param_0

// BIN: gpu.binary @flash_attention_0 [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">
// BIN-SAME: bin = "\7FELF

func.func @attn(%q: memref<2x4x100x64xbf16>, %k: memref<2x4x70x64xbf16>,
                %v: memref<2x4x70x64xbf16>, %o: memref<2x4x100x64xbf16>)
    attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x100x64xbf16> to tensor<2x4x100x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x70x64xbf16> to tensor<2x4x70x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x70x64xbf16> to tensor<2x4x70x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x100x64xbf16> to tensor<2x4x100x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x100x64xbf16>, tensor<2x4x70x64xbf16>, tensor<2x4x70x64xbf16>)
         outs(%ot : tensor<2x4x100x64xbf16>) scale(0.125) -> tensor<2x4x100x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x100x64xbf16>, memref<2x4x100x64xbf16>) -> ()
  return
}
