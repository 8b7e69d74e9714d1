// flash-raise-attention runs on any function-like op (FunctionOpInterface),
// nested on it or scheduled on the module around it, so a compiler whose
// functions are not func.func (IREE's util.func) and upstream mlir-opt's
// module-level pipelines can run it. Lq = 10, Lk = 12, D = 16, Dv = 8.
// RUN: flash-opt %s -split-input-file --pass-pipeline='builtin.module(flash-raise-attention)' | FileCheck %s
// RUN: flash-opt %s -split-input-file --pass-pipeline='builtin.module(gpu.module(flash-raise-attention))' | FileCheck %s --check-prefix=NESTED
// RUN: flash-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(flash-raise-attention))' | FileCheck %s --check-prefix=FUNC
// Upstream mlir-opt with the plugin runs this file too (test/Plugin/plugin.mlir).

// CHECK-LABEL: func.func @in_func
// CHECK: flash.attention
// CHECK-NOT: linalg.softmax
// FUNC-LABEL: func.func @in_func
// FUNC: flash.attention
func.func @in_func(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e2 = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e3 = tensor.empty() : tensor<2x10x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%f3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}

// -----

// A function that is not a func.func.
// CHECK-LABEL: gpu.func @in_gpu_func
// CHECK: flash.attention
// CHECK-NOT: linalg.softmax
// NESTED-LABEL: gpu.func @in_gpu_func
// NESTED: flash.attention
// FUNC-LABEL: gpu.func @in_gpu_func
// FUNC: linalg.softmax
gpu.module @device {
  gpu.func @in_gpu_func(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
    %zero = arith.constant 0.0 : f32
    %e0 = tensor.empty() : tensor<2x10x12xf32>
    %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
    %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
    %e2 = tensor.empty() : tensor<2x10x12xf32>
    %p = linalg.softmax dimension(2) ins(%s : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
    %e3 = tensor.empty() : tensor<2x10x8xf32>
    %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
    %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%f3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
    gpu.return %o : tensor<2x10x8xf32>
  }
}
