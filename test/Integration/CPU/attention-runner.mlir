// flash-cpu-pipeline output runs under mlir-runner; the fused result matches
// the unfused reference lowered by the same pipeline (deterministic inputs,
// so the printed digits are reproducible).
// REQUIRES: libomp
// RUN: flash-opt %s --flash-cpu-pipeline | mlir-runner -e main -entry-point-result=void -O3 \
// RUN:   -shared-libs=%mlir_lib_dir/libmlir_c_runner_utils%shlibext,%mlir_lib_dir/libmlir_runner_utils%shlibext,%libomp > %t.fused
// RUN: flash-opt %s --flash-cpu-pipeline="reference=1" | mlir-runner -e main -entry-point-result=void -O3 \
// RUN:   -shared-libs=%mlir_lib_dir/libmlir_c_runner_utils%shlibext,%mlir_lib_dir/libmlir_runner_utils%shlibext,%libomp > %t.ref
// RUN: FileCheck %s < %t.fused
// RUN: tail -n +2 %t.fused > %t.fused.data && tail -n +2 %t.ref > %t.ref.data && diff %t.fused.data %t.ref.data

// CHECK: rank = 2 offset = {{[0-9]+}} sizes = [5, 48] strides = [48, 1] data =
// CHECK-NOT: nan

func.func private @printMemrefF32(tensor<*xf32>)

func.func @attn(%q: tensor<2x100x64xf32>, %k: tensor<2x70x64xf32>, %v: tensor<2x70x48xf32>,
                %init: tensor<2x100x48xf32>) -> tensor<2x100x48xf32> {
  %o = flash.attention ins(%q, %k, %v : tensor<2x100x64xf32>, tensor<2x70x64xf32>, tensor<2x70x48xf32>)
         outs(%init : tensor<2x100x48xf32>) scale(0.125) mask(causal, bottom_right)
         -> tensor<2x100x48xf32>
  return %o : tensor<2x100x48xf32>
}

func.func @main() {
  %e = tensor.empty() : tensor<2x100x64xf32>
  // x[a, b, c] = sin((a + b) * c + b): varied, reproducible inputs.
  %x = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
       outs(%e : tensor<2x100x64xf32>) {
  ^bb0(%out: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %s = arith.addi %a, %b : index
    %t = arith.muli %s, %c : index
    %u = arith.addi %t, %b : index
    %i = arith.index_cast %u : index to i64
    %f = arith.sitofp %i : i64 to f32
    %r = math.sin %f : f32
    linalg.yield %r : f32
  } -> tensor<2x100x64xf32>
  %k = tensor.extract_slice %x[0, 30, 0] [2, 70, 64] [1, 1, 1] : tensor<2x100x64xf32> to tensor<2x70x64xf32>
  %v = tensor.extract_slice %x[0, 5, 11] [2, 70, 48] [1, 1, 1] : tensor<2x100x64xf32> to tensor<2x70x48xf32>
  %nan = arith.constant 0x7FC00000 : f32
  %i0 = tensor.empty() : tensor<2x100x48xf32>
  %init = linalg.fill ins(%nan : f32) outs(%i0 : tensor<2x100x48xf32>) -> tensor<2x100x48xf32>
  %o = call @attn(%x, %k, %v, %init)
      : (tensor<2x100x64xf32>, tensor<2x70x64xf32>, tensor<2x70x48xf32>, tensor<2x100x48xf32>) -> tensor<2x100x48xf32>
  // Rows 28..32 of batch 1: around the first row that sees a key (row 30).
  %s = tensor.extract_slice %o[1, 28, 0] [1, 5, 48] [1, 1, 1] : tensor<2x100x48xf32> to tensor<5x48xf32>
  %u = tensor.cast %s : tensor<5x48xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
