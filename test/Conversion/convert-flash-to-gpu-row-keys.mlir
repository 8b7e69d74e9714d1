// The per-element mask of the register-fragment kernels: each thread
// works out once per row and tile the keys its row may see, relative to
// its first column (rowKeys: the diagonal and the window's lower edge,
// clamped into [-1, 2^30] and [0, 2^30] so that they fit i32), and each
// score is then compared with its constant column offset alone.
// RUN: flash-opt %s -convert-flash-to-gpu | FileCheck %s

// A sliding window of 100 keys, bottom-right aligned (diag = row + Lk - Lq).
// CHECK-LABEL: gpu.func @kernel
// The masked branch of the softmax: the row's last visible key (Lk - 1 or
// the diagonal) and the window's first, relative to the thread's base.
// CHECK: scf.if %{{.+}} -> (f32, f32
// CHECK: %[[BASE:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK: %[[DIAG:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK-NEXT: %[[CW:.+]] = arith.constant -99 : index
// CHECK-NEXT: %[[EDGE:.+]] = arith.addi %[[DIAG]], %[[CW]] : index
// CHECK: %[[HI:.+]] = arith.minsi %{{.+}}, %[[DIAG]] : index
// CHECK-NEXT: %[[LOREL:.+]] = arith.subi %[[EDGE]], %[[BASE]] : index
// CHECK: %[[LO:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK-NEXT: %[[HIREL:.+]] = arith.subi %[[HI]], %[[BASE]] : index
// CHECK: %[[HI32:.+]] = arith.index_cast %{{.+}} : index to i32
// The second row half's bounds, then the scores: two i32 compares each.
// CHECK: %[[K0:.+]] = arith.constant 0 : i32
// CHECK-NEXT: %[[A:.+]] = arith.cmpi sle, %[[K0]], %[[HI32]] : i32
// CHECK-NEXT: %[[B:.+]] = arith.cmpi sge, %[[K0]], %[[LO]] : i32
// CHECK-NEXT: %[[OK:.+]] = arith.andi %[[A]], %[[B]] : i1
// CHECK-NEXT: arith.select %[[OK]], %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: %[[K1:.+]] = arith.constant 1 : i32
// CHECK-NEXT: arith.cmpi sle, %[[K1]], %[[HI32]] : i32
func.func @window(%q: memref<2x4x200x64xbf16>, %k: memref<2x4x300x64xbf16>,
                  %v: memref<2x4x300x64xbf16>, %o: memref<2x4x200x64xbf16>) attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x200x64xbf16>, tensor<2x4x300x64xbf16>, tensor<2x4x300x64xbf16>)
         outs(%ot : tensor<2x4x200x64xbf16>) scale(0.125) mask(sliding_window, 100, bottom_right) -> tensor<2x4x200x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x200x64xbf16>, memref<2x4x200x64xbf16>) -> ()
  return
}
