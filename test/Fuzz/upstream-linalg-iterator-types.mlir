// Found by flash-pipeline-fuzzer: MLIR 22.1.8's linalg.generic parser casts
// each iterator_types entry to a string unchecked, so a non-string entry
// reads garbage and aborts (`mlir-opt` alone dies with "LLVM ERROR: out of
// memory" on this file); the fuzz target skips such inputs instead of
// reporting upstream's crash as ours.
// RUN: flash-pipeline-fuzzer %s

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = [1.0]} ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
