// Every CPU library the project builds (the example, the bf16/f16 cases),
// for this CPU and for baseline x86-64, references only symbols that libc,
// libm, libomp or MLIR's runner utils define: no compiler-runtime builtin.
// RUN: %python %S/library_symbols.py flash-opt | FileCheck %s
// CHECK-NOT: FAIL
// CHECK: PASS example unfused -mcpu=x86-64
// CHECK-NOT: FAIL
// CHECK: {{[1-9][0-9]*}} passed, 0 failed
