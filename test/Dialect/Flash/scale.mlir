// The scale clause reads every f32 literal form MLIR knows and prints one that
// reads back to the same bits: custom form, re-parsed custom form, and the
// generic form (which prints the FloatAttr itself) all agree.
// RUN: flash-opt %s -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file | flash-opt -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file | flash-opt -split-input-file -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: flash-opt %s -split-input-file -mlir-print-op-generic | flash-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @negative
// CHECK: scale(-0.125) ->
// GENERIC-LABEL: sym_name = "negative"
// GENERIC: scale = -1.250000e-01 : f32
func.func @negative(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%q : tensor<4x8xf32>) scale(-0.125) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @negative_zero
// CHECK: scale(-0.0) ->
// GENERIC-LABEL: sym_name = "negative_zero"
// GENERIC: scale = -0.000000e+00 : f32
func.func @negative_zero(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%q : tensor<4x8xf32>) scale(-0.0) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @positive_zero
// CHECK: scale(0.0) ->
// GENERIC-LABEL: sym_name = "positive_zero"
// GENERIC: scale = 0.000000e+00 : f32
func.func @positive_zero(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%q : tensor<4x8xf32>) scale(0) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// An exponent without a '.' (as C and Python print 1e30) reads as 1.0e30:
// MLIR's lexer alone would split it into the integer 1 and `e30`.
// CHECK-LABEL: func.func @huge
// CHECK-COUNT-4: scale(1.00000002E+30) ->
// GENERIC-LABEL: sym_name = "huge"
// GENERIC-COUNT-4: scale = 1.000000e+30 : f32
func.func @huge(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%q : tensor<4x8xf32>) scale(1e30) -> tensor<4x8xf32>
  %b = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%a : tensor<4x8xf32>) scale(1.0e30) -> tensor<4x8xf32>
  %c = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%b : tensor<4x8xf32>) scale(1E+30) -> tensor<4x8xf32>
  %d = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%c : tensor<4x8xf32>) scale(0x7149F2CA) -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @largest_and_smallest
// CHECK: scale(3.40282347E+38) ->
// CHECK: scale(-3.40282347E+38) ->
// CHECK: scale(1.17549435E-38) ->
// CHECK: scale(1.40129846E-45) ->
// CHECK: scale(-1.40129846E-45) ->
// CHECK: scale(1.40129846E-45) ->
// GENERIC-LABEL: sym_name = "largest_and_smallest"
// GENERIC: scale = 3.40282347E+38 : f32
// GENERIC: scale = -3.40282347E+38 : f32
// GENERIC: scale = 1.17549435E-38 : f32
// GENERIC: scale = 1.401300e-45 : f32
// GENERIC: scale = -1.401300e-45 : f32
// GENERIC: scale = 1.401300e-45 : f32
func.func @largest_and_smallest(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%q : tensor<4x8xf32>) scale(3.40282347E+38) -> tensor<4x8xf32>
  %b = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%a : tensor<4x8xf32>) scale(0xFF7FFFFF) -> tensor<4x8xf32>
  %c = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%b : tensor<4x8xf32>) scale(0x00800000) -> tensor<4x8xf32>
  %d = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%c : tensor<4x8xf32>) scale(1e-45) -> tensor<4x8xf32>
  %e = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%d : tensor<4x8xf32>) scale(-1.4e-45) -> tensor<4x8xf32>
  %f = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) scale(0x00000001) -> tensor<4x8xf32>
  return %f : tensor<4x8xf32>
}

// -----

// A decimal is rounded once, to the nearest f32 (0.1 is 0x3DCCCCCD), and an
// integer is a float.
// CHECK-LABEL: func.func @rounding
// CHECK: scale(0.100000001) ->
// CHECK: scale(3.0) ->
// CHECK: scale(-2.0) ->
// CHECK: scale(0.00100000005) ->
// GENERIC-LABEL: sym_name = "rounding"
// GENERIC: scale = 1.000000e-01 : f32
// GENERIC: scale = 3.000000e+00 : f32
// GENERIC: scale = -2.000000e+00 : f32
// GENERIC: scale = 1.000000e-03 : f32
func.func @rounding(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%q : tensor<4x8xf32>) scale(0.1) -> tensor<4x8xf32>
  %b = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%a : tensor<4x8xf32>) scale(3) -> tensor<4x8xf32>
  %c = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%b : tensor<4x8xf32>) scale(-2) -> tensor<4x8xf32>
  %d = flash.attention ins(%q, %q, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%c : tensor<4x8xf32>) scale(1e-3) -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}
