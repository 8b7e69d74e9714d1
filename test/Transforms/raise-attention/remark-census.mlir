// No silent misses: over every input of the lit suite and the examples, each
// softmax over a matmul's output (counted by test-flash-raise-census's own
// definition, not the raise's matchers) is fused by flash-raise-attention or
// explained by one of its remarks, and softmaxes = fused + remarked.
// RUN: %python %flash_src_root/test/lib/raise_census.py flash-opt %flash_src_root/test %flash_src_root/examples | FileCheck %s
// CHECK: pieces {{[0-9]+}} checked {{[1-9][0-9][0-9]+}}
// CHECK: softmaxes {{[1-9][0-9][0-9]+}} fused {{[1-9][0-9]+}} remarked {{[1-9][0-9]+}} silent 0
// CHECK-NOT: SILENT MISS
