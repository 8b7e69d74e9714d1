// Found by flash-pipeline-fuzzer: MLIR 22.1.8's parsers of linalg.reduce,
// linalg.broadcast and linalg.transpose segfault on a malformed index list
// (`mlir-opt` alone crashes on this file); the fuzz target skips such inputs
// instead of reporting upstream's crash as ours.
// RUN: flash-pipeline-fuzzer %s

func.func @f(%a: tensor<2x3xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %r = linalg.reduce ins(%a : tensor<2x3xf32>) outs(%b : tensor<2xf32>) dimensions = [1 x]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  return %r : tensor<2xf32>
}
