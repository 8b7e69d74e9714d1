// Fused (flash-cpu-pipeline) vs unfused (reference=1) vs float64 NumPy, f32,
// fresh random inputs: Lq, Lk in {1, 17, 64, 127, 1000}, D in {16, 64, 80,
// 128}, Dv != D, 0-2 batch dims, GQA/MQA, causal both alignments, sliding
// window, bias, soft-capping, ALiBi, LSE, dynamic dims, two block shapes.
// RUN: %python %S/attention_matrix.py flash-opt f32 | FileCheck %s
// CHECK: seed
// CHECK-NOT: FAIL
// CHECK: {{[1-9][0-9]*}} passed, 0 failed
