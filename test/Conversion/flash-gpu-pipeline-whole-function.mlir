// flash-gpu-pipeline on functions as a frontend writes them (tensors at the
// boundary, elementwise math, a transpose and a row reduction around an
// attention spelled matmul -> softmax -> matmul): the boundary becomes the
// caller's device buffers and stream, the attention one kernel, the rest
// simple kernels, every allocation and launch on that stream. The functions
// run on the GPU in python/tests/test_whole_function_gpu.py.
// RUN: flash-opt %S/../Integration/GPU/Inputs/whole-function.mlir \
// RUN:   --pass-pipeline='builtin.module(flash-gpu-pipeline{format=isa})' \
// RUN:   --mlir-disable-threading --mlir-print-ir-after=flash-gpu-stream-order -o /dev/null 2>&1 | FileCheck %s
// RUN: flash-opt %S/../Integration/GPU/Inputs/whole-function.mlir \
// RUN:   --pass-pipeline='builtin.module(flash-gpu-pipeline{format=isa})' | FileCheck %s --check-prefix=LLVM

// Inputs, then one buffer per tensor result, then the stream.
// CHECK-LABEL: func.func @around(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<2x4x100x64xbf16>, %[[K:[a-z0-9]+]]: memref<2x4x70x64xbf16>, %[[V:[a-z0-9]+]]: memref<2x4x70x64xbf16>,
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<2x4x100x64xbf16>, %[[SUMS:[a-z0-9]+]]: memref<2x4x100xf32>, %[[S:[a-z0-9]+]]: !llvm.ptr {flash.stream})
// CHECK-SAME: llvm.emit_c_interface
// CHECK: %[[T:.+]] = builtin.unrealized_conversion_cast %[[S]] : !llvm.ptr to !gpu.async.token
// sin(q) into a device buffer of its own, on the stream.
// CHECK: %[[QS:[a-z0-9_]+]], %{{.*}} = gpu.alloc async [%[[T]]] () : memref<2x4x100x64xbf16>
// CHECK: gpu.launch_func async [%[[T]]] @{{.*}} args({{.*}}%[[Q]] : memref<2x4x100x64xbf16>, %[[QS]] : memref<2x4x100x64xbf16>)
// V is only reshaped: the attention reads the caller's buffer (through a TMA
// map: the wgmma kernel) and writes the f32 result the frontend keeps into
// a buffer of the function.
// CHECK: %[[VC:.+]] = memref.collapse_shape %[[V]] {{\[}}[0, 1], [2], [3]] : memref<2x4x70x64xbf16> into memref<8x70x64xbf16>
// CHECK: %[[OF:[a-z0-9_]+]], %{{.*}} = gpu.alloc async [%[[T]]] () : memref<8x100x64xf32>
// CHECK: %[[VA:.+]] = memref.cast %[[VC]] : memref<8x70x64xbf16> to memref<*xbf16>
// CHECK: nvgpu.tma.create.descriptor %[[VA]]
// CHECK: memref.extract_aligned_pointer_as_index %[[OF]]
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel
// After it: tanh(2 o) into the caller's output, the row sums into the second.
// CHECK: gpu.launch_func async [%[[T]]] @{{.*}}%[[OUT]] : memref<2x4x100x64xbf16>)
// CHECK: gpu.launch_func async [%[[T]]] @{{.*}}%[[SUMS]] : memref<2x4x100xf32>)
// The function's own buffers are freed in stream order, nothing is copied
// to itself, nothing waits.
// CHECK-NOT: memref.copy
// CHECK: gpu.dealloc async [%[[T]]] %[[QS]]
// CHECK-NOT: gpu.wait
// CHECK: return

// The attention writes the result into the caller's buffer: nothing else.
// CHECK-LABEL: func.func @causal_dv40(
// CHECK-SAME: %[[OUT2:[a-z0-9]+]]: memref<6x90x40xbf16>, %{{.*}}: !llvm.ptr {flash.stream})
// CHECK-NOT: gpu.alloc
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT2]]
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_1::@kernel
// CHECK-NOT: gpu.launch_func
// CHECK: return

// The decode functions with an f32 output: the wgmma kernel's decode form
// (256 threads: a producer and a consumer warpgroup) writes into the
// caller's f32 buffer, its splits merged by its last CTA per row block (the
// runtime's arrival counters, one launch) or by the combine kernel.
// CHECK-LABEL: func.func @decode_f32_fused(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<4x8x1x48xf32>, %{{.*}}: !llvm.ptr {flash.stream})
// CHECK: call @flashRuntimeSplitCounters
// CHECK: gpu.launch_func async [%{{.*}}] @{{flash_attention_[0-9]+}}::@kernel {{.*}} threads in (%c256
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK-LABEL: func.func @decode_f32_combine(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<2x8x2x48xf32>, %{{.*}}: !llvm.ptr {flash.stream})
// CHECK-NOT: flashRuntimeSplitCounters
// CHECK: gpu.launch_func async [%{{.*}}] @[[DC:flash_attention_[0-9]+]]::@kernel {{.*}} threads in (%c256
// CHECK: gpu.launch_func async [%{{.*}}] @[[DC]]::@combine
// CHECK: return

// LLVM-LABEL: llvm.func @_mlir_ciface_around(
// LLVM-LABEL: llvm.func @_mlir_ciface_causal_dv40(
// The f32 output on the wgmma kernel: pairs of f32 per store.
// LLVM: gpu.binary @flash_attention_0
// LLVM-SAME: wgmma.mma_async
// LLVM-SAME: st.global.v2.b32
// LLVM: gpu.binary @flash_attention_1
// LLVM-SAME: wgmma.mma_async
// The fused merge stores f32 rows (one element a lane) after the partials
// (pairs of f32).
// LLVM: gpu.binary @flash_attention_3
// LLVM-SAME: wgmma.mma_async
// LLVM-SAME: st.global.v2.b32
// LLVM-SAME: atom.global.add
