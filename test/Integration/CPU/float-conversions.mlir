// bf16/f16 <-> f32/f64 conversions of flash-cpu-pipeline are bit-identical
// to NumPy's round-to-nearest-even ones (NaN, ±inf, subnormals, ties), on
// this CPU and on baseline x86-64, where LLVM would call builtins instead.
// RUN: %python %S/float_conversions.py flash-opt | FileCheck %s
// CHECK: seed
// CHECK-NOT: FAIL
// CHECK: PASS trunc f32->bf16 -mcpu=x86-64
// CHECK-NOT: FAIL
// CHECK: {{[1-9][0-9]*}} passed, 0 failed
