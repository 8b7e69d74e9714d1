// RUN: flash-opt %s -split-input-file --flash-read-only-tensor-arguments | FileCheck %s

// Tensor arguments become read-only for bufferization; other arguments and
// an explicit choice are left as they are.
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: tensor<4x8xf32> {bufferization.writable = false}, %{{[^:]+}}: memref<4xf32>,
// CHECK-SAME: tensor<8xf32> {bufferization.writable = true}, %{{[^:]+}}: index)
func.func @mixed(%a: tensor<4x8xf32>, %m: memref<4xf32>,
                 %b: tensor<8xf32> {bufferization.writable = true},
                 %i: index) -> tensor<4x8xf32> {
  return %a : tensor<4x8xf32>
}

// -----

// A declaration has no body to bufferize and is not touched.
// CHECK-LABEL: func.func private @external
// CHECK-NOT: bufferization.writable
func.func private @external(tensor<4xf32>)
