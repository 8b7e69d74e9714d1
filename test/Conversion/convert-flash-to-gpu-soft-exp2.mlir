// The softmax's exponentials shared between the multi-function unit and the
// FMA pipes. With soft-exp2=N, N of every 8 scores a thread holds take
// exp2Poly: x clamped at -127 (NaN-propagating max), rounded by adding
// 1.5·2^23 + 127 (0x4B40007F), 2^j from that sum's bits shifted by 23 into
// the exponent field, a degree-3 Horner polynomial in the remainder, and one
// multiply; the others keep ex2.approx. The default (0) emits no polynomial.
// RUN: flash-opt %s -convert-flash-to-gpu="soft-exp2=2" | FileCheck %s
// RUN: flash-opt %s -convert-flash-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: env -u CUDA_HOME flash-opt %s --flash-gpu-pipeline="format=isa soft-exp2=8" | FileCheck %s --check-prefix=PTX
// RUN: (flash-opt %s -convert-flash-to-gpu="soft-exp2=9" 2>&1 || true) | FileCheck %s --check-prefix=RANGE
// RUN: env -u CUDA_HOME flash-opt %s --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=NOLIB

// CHECK-LABEL: gpu.func @kernel
// CHECK: %[[X:.+]] = arith.maximumf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: %[[SHIFT:.+]] = arith.constant 0x4B40007F : f32
// CHECK-NEXT: %[[T:.+]] = arith.addf %[[X]], %[[SHIFT]]
// CHECK-NEXT: %[[J:.+]] = arith.subf %[[T]], %[[SHIFT]]
// CHECK-NEXT: %[[F:.+]] = arith.subf %[[X]], %[[J]]
// CHECK-NEXT: %[[TB:.+]] = arith.bitcast %[[T]] : f32 to i32
// CHECK-NEXT: %[[C23:.+]] = arith.constant 23 : i32
// CHECK-NEXT: %[[SB:.+]] = arith.shli %[[TB]], %[[C23]] : i32
// CHECK-NEXT: %[[SCALE:.+]] = arith.bitcast %[[SB]] : i32 to f32
// CHECK: %[[P1:.+]] = llvm.intr.fma(%{{.+}}, %[[F]], %{{.+}})
// CHECK: %[[P2:.+]] = llvm.intr.fma(%[[P1]], %[[F]], %{{.+}})
// CHECK: %[[P3:.+]] = llvm.intr.fma(%[[P2]], %[[F]], %{{.+}})
// CHECK-NEXT: arith.mulf %[[P3]], %[[SCALE]]
// Two of every eight: the second element, then six on the unit.
// CHECK: arith.maximumf
// CHECK-NOT: llvm.call_intrinsic
// CHECK: arith.mulf
// CHECK-COUNT-6: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK-NOT: llvm.call_intrinsic
// CHECK: arith.maximumf

// OFF-LABEL: gpu.func @kernel
// OFF-NOT: arith.maximumf
// OFF: gpu.return

// Every score on the FMA pipes: the running max's rescale keeps ex2.approx.
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: max.NaN.f32
// PTX-SAME: 0f4B40007F
// PTX-SAME: ex2.approx.ftz.f32

// Without a CUDA toolkit (no libdevice to link), the PTX calls nothing: the
// kernels' fused multiply-adds are fma.rn.f32, not calls to __nv_fmaf.
// NOLIB: gpu.binary @flash_attention_0
// NOLIB-SAME: fma.rn.f32
// NOLIB-NOT: __nv_

// RANGE: convert-flash-to-gpu: need {{.*}} soft-exp2 in [0, 8]
func.func @causal(%q: memref<2x4x200x128xbf16>, %k: memref<2x4x150x128xbf16>,
                  %v: memref<2x4x150x64xbf16>, %o: memref<2x4x200x64xbf16>) attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x200x128xbf16> to tensor<2x4x200x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x150x128xbf16> to tensor<2x4x150x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x150x64xbf16> to tensor<2x4x150x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x200x128xbf16>, tensor<2x4x150x128xbf16>, tensor<2x4x150x64xbf16>)
         outs(%ot : tensor<2x4x200x64xbf16>) scale(0.088) mask(causal, bottom_right) -> tensor<2x4x200x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x200x64xbf16>, memref<2x4x200x64xbf16>) -> ()
  return
}
