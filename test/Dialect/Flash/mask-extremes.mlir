// Mask attributes at the ends of their range print and read back unchanged
// (the suite's round-trip check runs on this file too).
// RUN: flash-opt %s -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file | flash-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @widest_window
// CHECK: mask(sliding_window, 4611686018427387903, bottom_right)
// CHECK: mask(sliding_window, 1)
func.func @widest_window(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%q : tensor<4x8xf32>) scale(1.0) mask(sliding_window, 4611686018427387903, bottom_right) -> tensor<4x8xf32>
  %b = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%a : tensor<4x8xf32>) scale(1.0) mask(sliding_window, 1, top_left) -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @mask_attributes
// CHECK-SAME: test.a = #flash.mask<sliding_window, 4611686018427387903, bottom_right>
// CHECK-SAME: test.b = #flash.mask<causal>
// CHECK-SAME: test.c = #flash.mask<none>
func.func @mask_attributes() attributes {test.a = #flash.mask<sliding_window, 4611686018427387903, bottom_right>, test.b = #flash.mask<causal, top_left>, test.c = #flash.mask<none>} {
  return
}

// -----

// A dynamic head dim is not refused: its size is unknown here.
// CHECK-LABEL: func.func @dynamic_head_dims
// CHECK: tensor<4x?xf32>
func.func @dynamic_head_dims(%q: tensor<4x?xf32>, %v: tensor<4x?xf32>, %o: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %r = flash.attention ins(%q, %q, %v : tensor<4x?xf32>, tensor<4x?xf32>, tensor<4x?xf32>) outs(%o : tensor<4x?xf32>) scale(1.0) -> tensor<4x?xf32>
  return %r : tensor<4x?xf32>
}
