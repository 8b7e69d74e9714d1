// The wgmma kernel's tile-loop arithmetic is 32-bit and warp-uniform: the
// warpgroup index is broadcast from lane 0 (gpu.shuffle idx), the K/V
// ring's slot and parity are an i32 remainder and quotient by the stage
// count, and each matrix descriptor is an i32 low word moved by i32 adds,
// joined with its constant high word (stride 1024 B >> 4, 128-byte swizzle:
// 0x40000040 << 32 = 4611686293305294848) only as the wgmma's operand. No
// 64-bit add or division is left between the ring's wait and the wgmmas.
// RUN: flash-opt %s -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: gpu.func @kernel
// CHECK: %[[WG:.+]], %{{.+}} = gpu.shuffle idx %{{.+}}, %c0_i32, %c32_i32 : i32
// CHECK: arith.index_castui %[[WG]] : i32 to index
// The consumers' serial tile loop (two stages at this shape).
// CHECK: nvvm.setmaxregister increase
// CHECK: scf.for
// CHECK: %[[T:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK-NEXT: %[[S:.+]] = arith.constant 2 : i32
// CHECK-NEXT: %[[SLOT:.+]] = arith.remui %[[T]], %[[S]] : i32
// CHECK-NEXT: %[[ROUND:.+]] = arith.divui %[[T]], %[[S]] : i32
// CHECK: %[[PARITY:.+]] = arith.remui %[[ROUND]], %{{.+}} : i32
// CHECK: nvvm.mbarrier.try_wait.parity %{{.+}}, %[[PARITY]]
// CHECK-NOT: llvm.add
// CHECK: %[[UNITS:.+]] = arith.muli %[[SLOT]], %{{.+}} : i32
// CHECK-NEXT: %[[K:.+]] = arith.addi %{{.+}}, %[[UNITS]] : i32
// CHECK: %[[KW:.+]] = arith.extui %[[K]] : i32 to i64
// CHECK-NEXT: %[[HI:.+]] = arith.constant 4611686293305294848 : i64
// CHECK-NEXT: %[[KD:.+]] = arith.ori %[[KW]], %[[HI]] : i64
// CHECK-NEXT: nvvm.wgmma.mma_async %{{.+}}, %[[KD]]
// The next k16 step: 32 bytes further, an i32 add of 2.
// CHECK: %[[K2:.+]] = arith.addi %[[K]], %{{.+}} : i32
// CHECK: arith.extui %[[K2]] : i32 to i64
// CHECK: nvvm.wgmma.mma_async

// In the PTX, every descriptor is a 32-bit word widened and or-ed with the
// constant high word.
// PTX-LABEL: .entry kernel(
// PTX: shfl.sync.idx.b32
// PTX: or.b64 \09%rd{{[0-9]+}}, %rd{{[0-9]+}}, 4611686293305294848;
// PTX: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
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
