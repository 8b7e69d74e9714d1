// bf16 and f16 inputs and outputs (f32 accumulation): fused vs unfused vs
// float64 NumPy on the same rounded inputs; tolerances documented in
// attention_matrix.py (bf16 1e-2, f16 2e-3 relative to the largest output).
// RUN: %python %S/attention_matrix.py flash-opt lowp | FileCheck %s
// CHECK: seed
// CHECK-NOT: FAIL
// CHECK: {{[1-9][0-9]*}} passed, 0 failed
