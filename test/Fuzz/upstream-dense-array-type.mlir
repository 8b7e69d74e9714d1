// Found by flash-pipeline-fuzzer: MLIR 22.1.8's parseDenseArrayAttr takes the
// bit width of any element type, so `array<index: ...>` segfaults in
// FloatType::getWidth (`mlir-opt` alone crashes on this file); the fuzz target
// skips such inputs instead of reporting upstream's crash as ours.
// RUN: flash-pipeline-fuzzer %s

func.func @offsets_not_index(%q: tensor<16x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x32xf32>, %o: tensor<16x32xf32>, %x: i64, %n: index) {
  %r = "flash.attention"(%q, %k, %v, %o, %x, %n) <{operandSegmentSizes = array<index: 1, 1, 1, 1, 0, 0, 1, 1>, scale = 1.250000e-01 : f32}> ({}) : (tensor<16x64xf32>, tensor<70x64xf32>, tensor<70x32xf32>, tensor<16x32xf32>, i64, index) -> tensor<16x32xf32>
  return
}
