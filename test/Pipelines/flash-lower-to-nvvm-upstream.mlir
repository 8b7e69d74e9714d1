// flash-lower-to-nvvm spells out MLIR's gpu-lower-to-nvvm-pipeline as text so
// as to insert flash-tensormap-kernel-params; with that pass off, its expanded
// pass list must be upstream's, option by option. A later MLIR that changes
// upstream's pipeline fails here, not silently in the kernels. (Upstream nests
// each gpu.module pass on its own, ours nest together: the same passes in the
// same order on each gpu.module, so the nesting lines are dropped.)

// RUN: mlir-opt %s --dump-pass-pipeline -o /dev/null \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=bin opt-level=3" 2>&1 \
// RUN:   | tr ',' '\n' | grep -v -e '^ *gpu.module($' -e '^ *)$' -e '^Pass Manager' -e '^ *$' > %t.upstream
// RUN: flash-opt %s --dump-pass-pipeline -o /dev/null \
// RUN:   -flash-lower-to-nvvm="chip=sm_90a features=+ptx80 format=bin opt-level=3 tensormap-params=false" 2>&1 \
// RUN:   | tr ',' '\n' | grep -v -e '^ *gpu.module($' -e '^ *)$' -e '^Pass Manager' -e '^ *$' -e 'test-flash-round-trip' > %t.ours
// RUN: diff %t.upstream %t.ours
// RUN: FileCheck %s --input-file=%t.ours

// Not vacuous: both lists hold the whole pipeline.
// CHECK: convert-nvgpu-to-nvvm
// CHECK: nvvm-attach-target{O=3 chip=sm_90a
// CHECK: convert-gpu-to-nvvm
// CHECK: gpu-module-to-binary{format=bin
// CHECK: reconcile-unrealized-casts

// With the pass on, it sits after the kernels' lowering, before serialization.
// RUN: flash-opt %s --dump-pass-pipeline -o /dev/null -flash-lower-to-nvvm 2>&1 \
// RUN:   | tr ',' '\n' | FileCheck %s --check-prefix=PARAMS
// PARAMS: convert-gpu-to-nvvm
// PARAMS: flash-tensormap-kernel-params
// PARAMS: gpu-to-llvm
// PARAMS: gpu-module-to-binary

module {}
