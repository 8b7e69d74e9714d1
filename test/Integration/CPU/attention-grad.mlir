// flash.attention_grad through flash-cpu-pipeline (the reference gradient:
// P recomputed from the LSE) against torch's float64 autograd on fresh
// random inputs: masks, GQA/MQA, Lq != Lk != D != Dv, fully masked rows,
// score_mod (bias with its gradient, softcap, ALiBi); f32 within 1e-5; the
// reference decomposition and the tiled lowering (large and small tiles).
// REQUIRES: torch
// RUN: %python %S/attention_grad.py flash-opt | FileCheck %s
// CHECK: seed
// CHECK-NOT: FAIL
// CHECK: PASS bias_causal small-tiles
// CHECK-NOT: FAIL
// CHECK: {{[1-9][0-9]*}} passed, 0 failed
