// The C API from a C program: every error comes back as a string with the
// MLIR diagnostic, and lowered IR, LLVM IR, object and assembly come out.
// RUN: flash-capi-test 2>&1 | FileCheck %S/capi.c
