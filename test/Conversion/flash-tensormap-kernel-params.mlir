// RUN: flash-opt %s --pass-pipeline='builtin.module(gpu.module(flash-tensormap-kernel-params))' | FileCheck %s

// A kernel pointer read only as TMA tensor maps (a load's descriptor, a
// descriptor prefetch) becomes a 128-byte grid-constant parameter; a pointer
// that is also loaded from, one that is only loaded from, and the arguments of
// a non-kernel function keep their pointer type and no attributes.
// CHECK-LABEL: llvm.func @tma(
// CHECK-SAME: %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant},
// CHECK-SAME: %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant},
// CHECK-SAME: %{{[^:]+}}: !llvm.ptr,
// CHECK-SAME: %{{[^:]+}}: !llvm.ptr,
// CHECK-SAME: %{{[^:]+}}: !llvm.ptr<3>,
// CHECK-SAME: %{{[^:]+}}: !llvm.ptr<7>)
// CHECK-LABEL: llvm.func @helper(
// CHECK-SAME: %{{[^:]+}}: !llvm.ptr)
module attributes {gpu.container_module} {
  gpu.module @k {
    llvm.func @tma(%a: !llvm.ptr, %b: !llvm.ptr, %mixed: !llvm.ptr, %data: !llvm.ptr,
                   %smem: !llvm.ptr<3>, %dst: !llvm.ptr<7>) attributes {gpu.kernel, nvvm.kernel} {
      %c0 = llvm.mlir.constant(0 : i32) : i32
      nvvm.prefetch tensormap, %a : !llvm.ptr
      nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %a, %smem, box[%c0, %c0] : !llvm.ptr<7>, !llvm.ptr
      nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %b, %smem, box[%c0, %c0] : !llvm.ptr<7>, !llvm.ptr
      nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %mixed, %smem, box[%c0, %c0] : !llvm.ptr<7>, !llvm.ptr
      %x = llvm.load %mixed : !llvm.ptr -> i64
      %y = llvm.load %data : !llvm.ptr -> i64
      llvm.return
    }
    llvm.func @helper(%a: !llvm.ptr) {
      nvvm.prefetch tensormap, %a : !llvm.ptr
      llvm.return
    }
  }
}
