// RUN: flash-opt %s -split-input-file --flash-attention-into-destination | FileCheck %s

// CHECK-LABEL: func.func @wrapped
// CHECK-SAME: %[[OUT:[^:]+]]: memref<4x100x48xbf16>
// CHECK: %[[VIEW:.+]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: %[[R:.+]] = flash.attention {{.*}} outs(%[[VIEW]] : tensor<4x100x48xbf16>)
// CHECK: bufferization.materialize_in_destination %[[R]] in restrict writable %[[OUT]]
func.func @wrapped(%q: tensor<4x100x64xbf16>, %k: tensor<4x70x64xbf16>, %v: tensor<4x70x48xbf16>, %out: memref<4x100x48xbf16>) {
  %e = tensor.empty() : tensor<4x100x48xbf16>
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xbf16>, tensor<4x70x64xbf16>, tensor<4x70x48xbf16>)
         outs(%e : tensor<4x100x48xbf16>) scale(0.125) -> tensor<4x100x48xbf16>
  bufferization.materialize_in_destination %r in restrict writable %out : (tensor<4x100x48xbf16>, memref<4x100x48xbf16>) -> ()
  return
}

// -----

// The result has another user: the init stays a temporary.
// CHECK-LABEL: func.func @other_user
// CHECK: %[[E:.+]] = tensor.empty
// CHECK: flash.attention {{.*}} outs(%[[E]] :
func.func @other_user(%q: tensor<4x100x64xbf16>, %k: tensor<4x70x64xbf16>, %v: tensor<4x70x48xbf16>, %out: memref<4x100x48xbf16>) -> tensor<4x100x48xbf16> {
  %e = tensor.empty() : tensor<4x100x48xbf16>
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xbf16>, tensor<4x70x64xbf16>, tensor<4x70x48xbf16>)
         outs(%e : tensor<4x100x48xbf16>) scale(0.125) -> tensor<4x100x48xbf16>
  bufferization.materialize_in_destination %r in restrict writable %out : (tensor<4x100x48xbf16>, memref<4x100x48xbf16>) -> ()
  return %r : tensor<4x100x48xbf16>
}

// -----

// The destination is already read as a tensor: `restrict` forbids a second view.
// CHECK-LABEL: func.func @destination_already_viewed
// CHECK: %[[E:.+]] = tensor.empty
// CHECK: flash.attention {{.*}} outs(%[[E]] :
func.func @destination_already_viewed(%q: tensor<4x100x64xbf16>, %k: tensor<4x70x64xbf16>, %v: tensor<4x70x48xbf16>, %out: memref<4x100x48xbf16>) -> tensor<4x100x48xbf16> {
  %old = bufferization.to_tensor %out restrict : memref<4x100x48xbf16> to tensor<4x100x48xbf16>
  %e = tensor.empty() : tensor<4x100x48xbf16>
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xbf16>, tensor<4x70x64xbf16>, tensor<4x70x48xbf16>)
         outs(%e : tensor<4x100x48xbf16>) scale(0.125) -> tensor<4x100x48xbf16>
  bufferization.materialize_in_destination %r in writable %out : (tensor<4x100x48xbf16>, memref<4x100x48xbf16>) -> ()
  return %old : tensor<4x100x48xbf16>
}
