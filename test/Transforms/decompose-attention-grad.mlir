// RUN: flash-opt %s -split-input-file --flash-decompose-attention | FileCheck %s

// The reference gradient recomputes P = exp(s - lse) from the saved LSE (no
// softmax max or sum over the scores), then reduces dP and dS over the score
// matrix; grouped-query dK and dV are summed over the group (affine map
// h * G + g).
// CHECK-DAG: #[[$GROUP:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 * 3 + d4, d2, d3)>
// CHECK-LABEL: func.func @grad_gqa
// CHECK-NOT: flash.attention_grad
// CHECK: linalg.generic {{.*}} ins(%{{.+}}, %{{.+}} : tensor<2x6x37x24xf32>, tensor<2x6x53x24xf32>) outs(%{{.+}} : tensor<2x6x37x53xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.+}}, %{{.+}} : tensor<2x6x37x53xf32>, tensor<2x6x37xf32>)
// CHECK: math.exp
// CHECK-NOT: arith.maximumf
// CHECK: linalg.generic {indexing_maps = [#[[$GROUP]]
// CHECK: return
func.func @grad_gqa(%q: tensor<2x6x37x24xf32>, %k: tensor<2x2x53x24xf32>, %v: tensor<2x2x53x12xf32>,
                    %o: tensor<2x6x37x12xf32>, %do: tensor<2x6x37x12xf32>, %lse: tensor<2x6x37xf32>)
    -> (tensor<2x6x37x24xf32>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>) {
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %do, %lse : tensor<2x6x37x24xf32>, tensor<2x2x53x24xf32>,
             tensor<2x2x53x12xf32>, tensor<2x6x37x12xf32>, tensor<2x6x37x12xf32>, tensor<2x6x37xf32>)
         outs(%q, %k, %v : tensor<2x6x37x24xf32>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>)
         scale(0.125) mask(causal)
         -> tensor<2x6x37x24xf32>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>
  return %r#0, %r#1, %r#2 : tensor<2x6x37x24xf32>, tensor<2x2x53x24xf32>, tensor<2x2x53x12xf32>
}
