// RUN: flash-opt %s -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file | flash-opt -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file -mlir-print-op-generic | flash-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @grad_gqa_causal
// CHECK: %[[R:.+]]:3 = flash.attention_grad ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<2x6x37x24xbf16>, tensor<2x2x53x24xbf16>, tensor<2x2x53x12xbf16>, tensor<2x6x37x12xbf16>, tensor<2x6x37x12xbf16>, tensor<2x6x37xf32>)
// CHECK-SAME: outs(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x6x37x24xbf16>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>)
// CHECK-SAME: scale(0.125) mask(causal, bottom_right)
func.func @grad_gqa_causal(%q: tensor<2x6x37x24xbf16>, %k: tensor<2x2x53x24xbf16>, %v: tensor<2x2x53x12xbf16>,
                           %o: tensor<2x6x37x12xbf16>, %do: tensor<2x6x37x12xbf16>, %lse: tensor<2x6x37xf32>,
                           %dk: tensor<2x2x53x24xf32>, %dv: tensor<2x2x53x12xf32>)
    -> (tensor<2x6x37x24xbf16>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>) {
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %do, %lse : tensor<2x6x37x24xbf16>, tensor<2x2x53x24xbf16>,
             tensor<2x2x53x12xbf16>, tensor<2x6x37x12xbf16>, tensor<2x6x37x12xbf16>, tensor<2x6x37xf32>)
         outs(%q, %dk, %dv : tensor<2x6x37x24xbf16>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>)
         scale(0.125) mask(causal, bottom_right)
         -> tensor<2x6x37x24xbf16>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>
  return %r#0, %r#1, %r#2 : tensor<2x6x37x24xbf16>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>
}

// -----

// A float capture gets a gradient init; a boolean mask capture does not.
// CHECK-LABEL: func.func @grad_bias_and_bool_mask
// CHECK: flash.attention_grad
// CHECK-SAME: captures(%{{.+}}, %{{.+}} : tensor<37x53xf32>, tensor<37x53xi1>)
// CHECK: math.tanh
// CHECK: flash.yield
// CHECK: -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>, tensor<37x53xf32>
func.func @grad_bias_and_bool_mask(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                                   %o: tensor<4x37x12xf32>, %do: tensor<4x37x12xf32>, %lse: tensor<4x37xf32>,
                                   %bias: tensor<37x53xf32>, %keep: tensor<37x53xi1>)
    -> tensor<37x53xf32> {
  %r:4 = flash.attention_grad ins(%q, %k, %v, %o, %do, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x37xf32>)
         outs(%q, %k, %v, %bias : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>, tensor<37x53xf32>)
         captures(%bias, %keep : tensor<37x53xf32>, tensor<37x53xi1>) scale(0.2)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<37x53xf32>, %kt: tensor<37x53xi1>):
           %c = arith.constant 30.0 : f32
           %a = arith.divf %s, %c : f32
           %t = math.tanh %a : f32
           %y = arith.mulf %t, %c : f32
           %x = tensor.extract %bt[%i, %j] : tensor<37x53xf32>
           %z = arith.addf %y, %x : f32
           %m = tensor.extract %kt[%i, %j] : tensor<37x53xi1>
           %n = arith.constant -1.0e30 : f32
           %w = arith.select %m, %z, %n : f32
           flash.yield %w : f32
         } -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>, tensor<37x53xf32>
  return %r#3 : tensor<37x53xf32>
}
