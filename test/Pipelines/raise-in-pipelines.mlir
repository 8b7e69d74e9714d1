// Frontend attention straight into both pipelines, anchored on the module as
// the C API and plugin users run them.
// RUN: flash-opt %s --pass-pipeline='builtin.module(flash-cpu-pipeline{raise=1 parallel=0})' | FileCheck %s --check-prefix=CPU
// RUN: flash-opt %s --pass-pipeline='builtin.module(flash-cpu-pipeline{raise=0 parallel=0})' | FileCheck %s --check-prefix=UNFUSED
// RUN: %if ptxas %{ env CUDA_HOME=%cuda_home flash-opt %s --pass-pipeline='builtin.module(flash-gpu-pipeline)' | FileCheck %s --check-prefix=GPU %}

// CPU: llvm.func @attention_gpu
// CPU-NOT: linalg.
// The unfused original also compiles (linalg.softmax is decomposed) and keeps
// its 10x12 score buffer.
// UNFUSED: llvm.func @attention_gpu
// UNFUSED: llvm.mlir.constant(120 : index)
// GPU-NOT: linalg.
// GPU-DAG: gpu.binary @flash_attention_0
// GPU-DAG: llvm.func @attention_gpu(
func.func @attention_gpu(%qm: memref<2x10x64xf16>, %km: memref<2x12x64xf16>, %vm: memref<2x12x64xf16>, %om: memref<2x10x64xf16>) {
  %q = bufferization.to_tensor %qm restrict : memref<2x10x64xf16> to tensor<2x10x64xf16>
  %k = bufferization.to_tensor %km restrict : memref<2x12x64xf16> to tensor<2x12x64xf16>
  %v = bufferization.to_tensor %vm restrict : memref<2x12x64xf16> to tensor<2x12x64xf16>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x64xf16>, tensor<2x12x64xf16>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e1 = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%e1 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e2 = tensor.empty() : tensor<2x10x12xf16>
  %ph = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf16>) {
  ^bb0(%x: f32, %o: f16):
    %t = arith.truncf %x : f32 to f16
    linalg.yield %t : f16
  } -> tensor<2x10x12xf16>
  %e3 = tensor.empty() : tensor<2x10x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x10x64xf32>) -> tensor<2x10x64xf32>
  %o = linalg.batch_matmul ins(%ph, %v : tensor<2x10x12xf16>, tensor<2x12x64xf16>) outs(%f3 : tensor<2x10x64xf32>) -> tensor<2x10x64xf32>
  %e4 = tensor.empty() : tensor<2x10x64xf16>
  %oh = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%o : tensor<2x10x64xf32>) outs(%e4 : tensor<2x10x64xf16>) {
  ^bb0(%x: f32, %y: f16):
    %t = arith.truncf %x : f32 to f16
    linalg.yield %t : f16
  } -> tensor<2x10x64xf16>
  bufferization.materialize_in_destination %oh in restrict writable %om : (tensor<2x10x64xf16>, memref<2x10x64xf16>) -> ()
  return
}
