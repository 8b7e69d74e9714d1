// RUN: flash-opt %s -split-input-file -verify-diagnostics --flash-gpu-function-boundary | FileCheck %s

// Tensor arguments become read-only views of memrefs, the tensor result a
// trailing memref the attention writes into, the scalar result stays, and
// the stream comes last. The head reshape of K is a view of the caller's
// buffer; the elementwise V is computed into a buffer of its own.
// CHECK-LABEL: func.func @boundary(
// CHECK-SAME: %[[Q:.+]]: memref<8x64x32xbf16>, %[[K:.+]]: memref<2x4x80x32xbf16>, %[[V:.+]]: memref<8x80x48xbf16>,
// CHECK-SAME: %[[OUT:.+]]: memref<8x64x48xbf16>, %[[S:.+]]: !llvm.ptr {flash.stream}) -> f32
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-DAG: %[[QT:.+]] = bufferization.to_tensor %[[Q]] restrict : memref<8x64x32xbf16>
// CHECK-DAG: %[[VT:.+]] = bufferization.to_tensor %[[V]] restrict : memref<8x80x48xbf16>
// CHECK: %[[VE:.+]] = math.exp %[[VT]]
// CHECK: %[[OV:.+]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: %[[KC:.+]] = memref.collapse_shape %[[K]] {{\[}}[0, 1], [2], [3]] : memref<2x4x80x32xbf16> into memref<8x80x32xbf16>
// CHECK: %[[KV:.+]] = bufferization.to_tensor %[[KC]] : memref<8x80x32xbf16>
// CHECK: %[[VB:.+]] = memref.alloc() : memref<8x80x48xbf16>
// CHECK: bufferization.materialize_in_destination %[[VE]] in restrict writable %[[VB]]
// CHECK: %[[VV:.+]] = bufferization.to_tensor %[[VB]] : memref<8x80x48xbf16>
// CHECK: %[[A:.+]] = flash.attention ins(%[[QT]], %[[KV]], %[[VV]] : {{.*}}) outs(%[[OV]] : tensor<8x64x48xbf16>)
// CHECK: bufferization.materialize_in_destination %[[A]] in restrict writable %[[OUT]]
// CHECK: return %{{.*}} : f32
func.func @boundary(%q: tensor<8x64x32xbf16>, %k: tensor<2x4x80x32xbf16>,
                    %v: tensor<8x80x48xbf16>) -> (tensor<8x64x48xbf16>, f32) {
  %kc = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<2x4x80x32xbf16> into tensor<8x80x32xbf16>
  %ve = math.exp %v : tensor<8x80x48xbf16>
  %e = tensor.empty() : tensor<8x64x48xbf16>
  %o = flash.attention ins(%q, %kc, %ve : tensor<8x64x32xbf16>, tensor<8x80x32xbf16>, tensor<8x80x48xbf16>)
         outs(%e : tensor<8x64x48xbf16>) scale(0.125) -> tensor<8x64x48xbf16>
  %c = arith.constant 1.0 : f32
  return %o, %c : tensor<8x64x48xbf16>, f32
}

// -----

// A host scalar captured by the score_mod (a KV length) is written into
// device memory by a kernel: a one-element generic, viewed as rank 0. A
// computed operand reshaped for the attention gets a buffer in its own
// shape, which the op computing it can write in place.
// CHECK-LABEL: func.func @scalar_capture(
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: index
// CHECK: %[[Q4:.+]] = math.exp
// CHECK: %[[G:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1xindex>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: linalg.yield %[[LEN]] : index
// CHECK: %[[QB:.+]] = memref.alloc() : memref<2x4x64x32xbf16>
// CHECK: bufferization.materialize_in_destination %[[Q4]] in restrict writable %[[QB]]
// CHECK: %[[QC:.+]] = memref.collapse_shape %[[QB]] {{\[}}[0, 1], [2], [3]]
// CHECK: %[[QV:.+]] = bufferization.to_tensor %[[QC]] : memref<8x64x32xbf16>
// CHECK: %[[LB:.+]] = memref.alloc() : memref<1xindex>
// CHECK: bufferization.materialize_in_destination %[[G]] in restrict writable %[[LB]]
// CHECK: %[[LC:.+]] = memref.collapse_shape %[[LB]] []
// CHECK: %[[LV:.+]] = bufferization.to_tensor %[[LC]] : memref<index>
// CHECK: flash.attention ins(%[[QV]], {{.*}} captures(%[[LV]] : tensor<index>)
func.func @scalar_capture(%q: tensor<2x4x64x32xbf16>, %k: tensor<8x80x32xbf16>,
                          %v: tensor<8x80x32xbf16>, %len: index) -> tensor<8x64x32xbf16> {
  %q4 = math.exp %q : tensor<2x4x64x32xbf16>
  %qc = tensor.collapse_shape %q4 [[0, 1], [2], [3]] : tensor<2x4x64x32xbf16> into tensor<8x64x32xbf16>
  %n = tensor.from_elements %len : tensor<index>
  %e = tensor.empty() : tensor<8x64x32xbf16>
  %o = flash.attention ins(%qc, %k, %v : tensor<8x64x32xbf16>, tensor<8x80x32xbf16>, tensor<8x80x32xbf16>)
         outs(%e : tensor<8x64x32xbf16>) captures(%n : tensor<index>) scale(0.125) score_mod {
  ^bb0(%s: f32, %b: index, %i: index, %j: index, %t: tensor<index>):
    %l = tensor.extract %t[] : tensor<index>
    %keep = arith.cmpi slt, %j, %l : index
    %ninf = arith.constant 0xFF800000 : f32
    %r = arith.select %keep, %s, %ninf : f32
    flash.yield %r : f32
  } -> tensor<8x64x32xbf16>
  return %o : tensor<8x64x32xbf16>
}

// -----

// A function already in the destination form is left as it is.
// CHECK-LABEL: func.func @destination_form(
// CHECK-SAME: %{{.+}}: memref<8x64x32xbf16>, %{{.+}}: memref<8x80x32xbf16>, %{{.+}}: memref<8x80x32xbf16>, %{{.+}}: memref<8x64x32xbf16>)
// CHECK-NOT: memref.alloc
func.func @destination_form(%q: memref<8x64x32xbf16>, %k: memref<8x80x32xbf16>,
                            %v: memref<8x80x32xbf16>, %o: memref<8x64x32xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<8x64x32xbf16> to tensor<8x64x32xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<8x80x32xbf16> to tensor<8x80x32xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<8x80x32xbf16> to tensor<8x80x32xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<8x64x32xbf16> to tensor<8x64x32xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<8x64x32xbf16>, tensor<8x80x32xbf16>, tensor<8x80x32xbf16>)
         outs(%ot : tensor<8x64x32xbf16>) scale(0.125) -> tensor<8x64x32xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<8x64x32xbf16>, memref<8x64x32xbf16>) -> ()
  return
}

// -----

// expected-error @+1 {{a function on tensors that is called in the module cannot take device buffers}}
func.func @callee(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @caller(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @callee(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{has no device buffer form}}
func.func @unranked(%x: tensor<*xf32>) {
  return
}
