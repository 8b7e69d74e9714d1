// flash-cpu-pipeline takes a whole function as a frontend writes it: TOSA and
// elementwise ops on tensors around the attention are lowered with it, fused
// and unfused, and the result matches float64 NumPy.
// RUN: %python %S/whole_function.py flash-opt | FileCheck %s
// CHECK: PASS fused
// CHECK: PASS unfused
// CHECK: 0 failed
