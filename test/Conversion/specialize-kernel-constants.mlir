// A kernel launched from one place takes that launch's constant sizes as
// constants; a run-time size, a kernel launched twice and a non-integer
// argument keep their arguments.
// RUN: flash-opt %s -flash-specialize-kernel-constants | FileCheck %s
// RUN: flash-opt %s -flash-specialize-kernel-constants -canonicalize | FileCheck %s --check-prefix=FOLD

module attributes {gpu.container_module} {
  gpu.module @once {
    // CHECK-LABEL: gpu.func @sizes
    // CHECK-SAME: (%[[LQ:.+]]: index, %[[LK:.+]]: index, %[[N:.+]]: i32, %[[P:.+]]: !llvm.ptr)
    // CHECK-DAG: %[[C1024:.+]] = arith.constant 1024 : index
    // CHECK-DAG: %[[C7:.+]] = arith.constant 7 : i32
    // CHECK: arith.ceildivsi %[[C1024]], %{{.+}} : index
    // CHECK: arith.divui %{{.+}}, %[[LK]] : index
    // CHECK: arith.addi %[[C7]], %{{.+}} : i32
    // CHECK: llvm.store %{{.+}}, %[[P]]
    // FOLD-LABEL: gpu.func @sizes
    // FOLD-NOT: arith.ceildivsi
    // FOLD: arith.constant 8 : index
    gpu.func @sizes(%lq: index, %lk: index, %n: i32, %p: !llvm.ptr) kernel {
      %c128 = arith.constant 128 : index
      %blocks = arith.ceildivsi %lq, %c128 : index
      %tid = gpu.thread_id x
      %per = arith.divui %tid, %lk : index
      %s = arith.addi %blocks, %per : index
      %si = arith.index_cast %s : index to i32
      %t = arith.addi %n, %si : i32
      llvm.store %t, %p : i32, !llvm.ptr
      gpu.return
    }
  }
  gpu.module @twice {
    // CHECK-LABEL: gpu.func @shared
    // CHECK-NOT: arith.constant
    // CHECK: arith.addi %arg0, %arg0
    gpu.func @shared(%x: index, %p: !llvm.ptr) kernel {
      %y = arith.addi %x, %x : index
      %yi = arith.index_cast %y : index to i32
      llvm.store %yi, %p : i32, !llvm.ptr
      gpu.return
    }
  }

  func.func @host(%d: memref<?x64xf32>, %p: !llvm.ptr) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : i32
    %lk = memref.dim %d, %c0 : memref<?x64xf32>
    %c1024 = arith.constant 1024 : index
    gpu.launch_func @once::@sizes blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%c1024 : index, %lk : index, %c7 : i32, %p : !llvm.ptr)
    gpu.launch_func @twice::@shared blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%c1024 : index, %p : !llvm.ptr)
    %c5 = arith.constant 5 : index
    gpu.launch_func @twice::@shared blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%c5 : index, %p : !llvm.ptr)
    return
  }
}
