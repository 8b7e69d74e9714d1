// The tensor-core kernels write the output in whatever float type the op
// names (f32, f16 or bf16), whatever the operands' type: the accumulator is
// f32, so the output is one conversion from it. Frontends that keep the
// attention's result in f32 (a matmul with an f32 accumulator) get the wgmma
// kernel, not the portable one.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ env CUDA_HOME=%cuda_home flash-opt %s -split-input-file --flash-gpu-pipeline="format=bin" | FileCheck %s --check-prefix=BIN %}

// bf16 operands, an f16 output: pairs of f16 per store.
// CHECK-LABEL: func.func @bf16_in_f16_out
// CHECK: gpu.func @kernel(
// CHECK: nvvm.wgmma.mma_async
// CHECK-COUNT-16: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr
// CHECK-NOT: llvm.store {{.*}}bf16
// CHECK: gpu.return
// PTX-LABEL: llvm.func @bf16_in_f16_out(
// PTX: cvt.rn.f16x2.f32
// BIN-LABEL: llvm.func @bf16_in_f16_out(
func.func @bf16_in_f16_out(%q: memref<2x4x200x64xbf16>, %k: memref<2x4x300x64xbf16>,
                           %v: memref<2x4x300x64xbf16>, %o: memref<2x4x200x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x200x64xf16> to tensor<2x4x200x64xf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x200x64xbf16>, tensor<2x4x300x64xbf16>, tensor<2x4x300x64xbf16>)
      outs(%ot : tensor<2x4x200x64xf16>) scale(0.125) -> tensor<2x4x200x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x200x64xf16>, memref<2x4x200x64xf16>) -> ()
  return
}

// -----

// An f32 output with a key length known only at run time and Dv != D: when
// Lk = 0, K's and V's TMA maps describe Q instead (never read), which needs
// them to share one type whatever Dv and the output's type are.
// CHECK-LABEL: func.func @f32_out_dynamic_keys
// CHECK: %[[NONE:.*]] = arith.cmpi eq, %{{.*}}, %c0
// CHECK: arith.select %[[NONE]], %{{.*}}, %{{.*}} : memref<?x?x?xf16>
// CHECK: arith.select %[[NONE]], %{{.*}}, %{{.*}} : memref<?x?x?xf16>
// CHECK: gpu.func @kernel(
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: arith.truncf {{.*}}f32 to f16
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr
// PTX-LABEL: llvm.func @f32_out_dynamic_keys(
// PTX: wgmma.mma_async
// PTX: st.global.v2.b32
// BIN-LABEL: llvm.func @f32_out_dynamic_keys(
func.func @f32_out_dynamic_keys(%q: memref<3x4x100x64xf16>, %k: memref<3x4x?x64xf16>,
                                %v: memref<3x4x?x40xf16>, %o: memref<3x4x100x40xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<3x4x100x64xf16> to tensor<3x4x100x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<3x4x?x64xf16> to tensor<3x4x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<3x4x?x40xf16> to tensor<3x4x?x40xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x4x100x40xf32> to tensor<3x4x100x40xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<3x4x100x64xf16>, tensor<3x4x?x64xf16>, tensor<3x4x?x40xf16>)
      outs(%ot : tensor<3x4x100x40xf32>) scale(0.125) mask(causal, bottom_right) -> tensor<3x4x100x40xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<3x4x100x40xf32>, memref<3x4x100x40xf32>) -> ()
  return
}
