// Every function of the raise tests of frontend forms (TOSA from TFLite /
// ONNX / buddy / rocMLIR, torch-mlir, IREE-style linalg, masks and
// score_mods, mixed precision, LSE export, sinks) compiles whole through
// flash-gpu-pipeline: tensors at the boundary, the frontend's ops around
// the attention, one attention kernel, nothing left on tensors.
// RUN: %python %flash_src_root/test/lib/gpu_pipeline_forms.py flash-opt \
// RUN:   %flash_src_root/test/Transforms/raise-attention/tosa.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/torch-mlir-mha.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/gqa.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/masks-and-score-mods.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/mixed-precision.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/linalg-contractions.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/softmax-forms.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/scale.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/deferred-normalisation.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/lse-export.mlir \
// RUN:   %flash_src_root/test/Transforms/raise-attention/sinks.mlir | FileCheck %s
// CHECK-NOT: FAIL
// CHECK: PASS tosa_gqa_reshape_add_zeros_reshape: compiled
// CHECK-NOT: FAIL
// CHECK: {{[1-9][0-9]*}} passed, 0 failed
