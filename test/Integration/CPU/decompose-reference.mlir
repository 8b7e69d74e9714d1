// The reference decomposition, executed on the CPU with mlir-runner, against an
// independent float64 NumPy attention on fresh random inputs.
// RUN: %python %S/decompose_reference.py flash-opt mlir-runner %mlir_lib_dir | FileCheck %s
// CHECK: plain_3d: {{.*}} ok
// CHECK: no_batch_causal_top_left: {{.*}} ok
// CHECK: gqa_causal_bottom_right_bias: {{.*}} ok
// CHECK: fully_masked_rows: {{.*}} ok
// CHECK: sliding_window_softcap: {{.*}} ok
// CHECK: ALL OK
