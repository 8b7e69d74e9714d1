// kernel=auto's deferred PV (defer-pv=-1) by the keys a query block walks: off
// where a mask leaves short walks, since the prologue tile and the lone last PV
// then weigh more than the overlap. Under a mask of the indices alone the bound
// is a mean of 3072 keys (chunks of 512: off; prefix-LM over 8192 keys, ~4.6k
// per block: on), under a causal or window mask 768 (causal N = 1k, 512 on
// average: off; N = 2k, 1024: on). The deferred schedule is the one that waits
// for one of two wgmma groups in flight; the serial loop never does.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=defer-pv=1 | FileCheck %s --check-prefix=FORCED

// CHECK-LABEL: func.func @chunked_512(
// CHECK: gpu.func @kernel(
// CHECK: scf.while
// CHECK-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: gpu.return
// FORCED-LABEL: func.func @chunked_512(
// FORCED: gpu.func @kernel(
// FORCED: nvvm.wgmma.wait.group.sync.aligned 1
func.func @chunked_512(%q: memref<1x4x8192x128xbf16>, %k: memref<1x4x8192x128xbf16>,
                       %v: memref<1x4x8192x128xbf16>, %o: memref<1x4x8192x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<1x4x8192x128xbf16>, tensor<1x4x8192x128xbf16>, tensor<1x4x8192x128xbf16>)
         outs(%ot : tensor<1x4x8192x128xbf16>) scale(0.088)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c512 = arith.constant 512 : index
           %ci = arith.floordivsi %i, %c512 : index
           %cj = arith.floordivsi %j, %c512 : index
           %same = arith.cmpi eq, %ci, %cj : index
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %same, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x4x8192x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x4x8192x128xbf16>, memref<1x4x8192x128xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @prefix_lm_1024(
// CHECK: gpu.func @kernel(
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
func.func @prefix_lm_1024(%q: memref<1x4x8192x128xbf16>, %k: memref<1x4x8192x128xbf16>,
                          %v: memref<1x4x8192x128xbf16>, %o: memref<1x4x8192x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x4x8192x128xbf16> to tensor<1x4x8192x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<1x4x8192x128xbf16>, tensor<1x4x8192x128xbf16>, tensor<1x4x8192x128xbf16>)
         outs(%ot : tensor<1x4x8192x128xbf16>) scale(0.088)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c1024 = arith.constant 1024 : index
           %prefix = arith.cmpi slt, %j, %c1024 : index
           %causal = arith.cmpi sle, %j, %i : index
           %seen = arith.ori %prefix, %causal : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %seen, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x4x8192x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x4x8192x128xbf16>, memref<1x4x8192x128xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @causal_1k(
// CHECK: gpu.func @kernel(
// CHECK-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: gpu.return
// FORCED-LABEL: func.func @causal_1k(
// FORCED: gpu.func @kernel(
// FORCED: nvvm.wgmma.wait.group.sync.aligned 1
func.func @causal_1k(%q: memref<8x16x1024x128xbf16>, %k: memref<8x16x1024x128xbf16>,
                     %v: memref<8x16x1024x128xbf16>, %o: memref<8x16x1024x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>)
         outs(%ot : tensor<8x16x1024x128xbf16>) scale(0.088) mask(causal) -> tensor<8x16x1024x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<8x16x1024x128xbf16>, memref<8x16x1024x128xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @causal_2k(
// CHECK: gpu.func @kernel(
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
func.func @causal_2k(%q: memref<4x16x2048x128xbf16>, %k: memref<4x16x2048x128xbf16>,
                     %v: memref<4x16x2048x128xbf16>, %o: memref<4x16x2048x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<4x16x2048x128xbf16> to tensor<4x16x2048x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<4x16x2048x128xbf16> to tensor<4x16x2048x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<4x16x2048x128xbf16> to tensor<4x16x2048x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<4x16x2048x128xbf16> to tensor<4x16x2048x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<4x16x2048x128xbf16>, tensor<4x16x2048x128xbf16>, tensor<4x16x2048x128xbf16>)
         outs(%ot : tensor<4x16x2048x128xbf16>) scale(0.088) mask(causal) -> tensor<4x16x2048x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<4x16x2048x128xbf16>, memref<4x16x2048x128xbf16>) -> ()
  return
}
