// RUN: flash-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(flash-gpu-stream-order))' | FileCheck %s

// Buffers and launches of a function with a stream go on that stream; a
// buffer bufferization left without a dealloc is freed at the end of its
// block; a constant global gets a device copy.
// CHECK-LABEL: func.func @ordered(
// CHECK-SAME: %[[A:.+]]: memref<64xf32>, %[[S:.+]]: !llvm.ptr {flash.stream})
// CHECK: %[[T:.+]] = builtin.unrealized_conversion_cast %[[S]] : !llvm.ptr to !gpu.async.token
// CHECK: %[[B:.+]], %{{.+}} = gpu.alloc async [%[[T]]] () : memref<64xf32>
// CHECK: %[[D:.+]], %{{.+}} = gpu.alloc async [%[[T]]] () : memref<64xf32>
// CHECK: %[[G:.+]] = memref.get_global @table
// CHECK: gpu.memcpy async [%[[T]]] %[[D]], %[[G]]
// CHECK: gpu.launch_func async [%[[T]]] @k::@k blocks in {{.*}} args(%[[A]] : memref<64xf32>, %[[B]] : memref<64xf32>, %[[D]] : memref<64xf32>)
// CHECK-DAG: gpu.dealloc async [%[[T]]] %[[B]]
// CHECK-DAG: gpu.dealloc async [%[[T]]] %[[D]]
// CHECK: return
module attributes {gpu.container_module} {
  memref.global "private" constant @table : memref<64xf32> = dense<1.0>
  gpu.module @k {
    gpu.func @k(%a: memref<64xf32>, %b: memref<64xf32>, %c: memref<64xf32>) kernel {
      gpu.return
    }
  }
  func.func @ordered(%a: memref<64xf32>, %s: !llvm.ptr {flash.stream}) {
    %c1 = arith.constant 1 : index
    %b = memref.alloc() : memref<64xf32>
    %g = memref.get_global @table : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%a : memref<64xf32>, %b : memref<64xf32>, %g : memref<64xf32>)
    return
  }
}

// -----

// A function without a stream is not a device function: left alone.
// CHECK-LABEL: func.func @host(
// CHECK: memref.alloc
// CHECK: memref.load
func.func @host() -> f32 {
  %c0 = arith.constant 0 : index
  %b = memref.alloc() : memref<4xf32>
  %x = memref.load %b[%c0] : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return %x : f32
}

// -----

func.func @host_read(%a: memref<4xf32>, %s: !llvm.ptr {flash.stream}) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{accesses a device buffer on the host}}
  %x = memref.load %a[%c0] : memref<4xf32>
  return %x : f32
}
