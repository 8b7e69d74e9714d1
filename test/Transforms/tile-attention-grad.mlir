// RUN: flash-opt %s -split-input-file --flash-tile-attention="block-q=64 block-kv=128" | FileCheck %s

// The tiled gradient holds no Lq x Lk buffer: block-q x block-kv tiles whose
// P is recomputed from the LSE, a forall over key blocks for dK/dV (with the
// query blocks of each group member inside) and one over query blocks for dQ.
// CHECK-LABEL: func.func @grad_8k
// CHECK-NOT: 8192x8192
// CHECK-NOT: flash.attention_grad
// CHECK: scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) in (2, 2, %{{.+}}) shared_outs
// CHECK: scf.for %{{.+}} = %{{.+}} to %c3
// CHECK: math.exp
// CHECK: tensor.parallel_insert_slice
// CHECK: scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) in (2, 6, %{{.+}}) shared_outs
// CHECK: math.exp
// CHECK: tensor.parallel_insert_slice
// CHECK-NOT: 8192x8192
func.func @grad_8k(%q: tensor<2x6x8192x64xbf16>, %k: tensor<2x2x8192x64xbf16>, %v: tensor<2x2x8192x64xbf16>,
                   %o: tensor<2x6x8192x64xbf16>, %do: tensor<2x6x8192x64xbf16>, %lse: tensor<2x6x8192xf32>)
    -> (tensor<2x6x8192x64xbf16>, tensor<2x2x8192x64xbf16>, tensor<2x2x8192x64xbf16>) {
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %do, %lse : tensor<2x6x8192x64xbf16>, tensor<2x2x8192x64xbf16>,
             tensor<2x2x8192x64xbf16>, tensor<2x6x8192x64xbf16>, tensor<2x6x8192x64xbf16>, tensor<2x6x8192xf32>)
         outs(%q, %k, %v : tensor<2x6x8192x64xbf16>, tensor<2x2x8192x64xbf16>, tensor<2x2x8192x64xbf16>)
         scale(0.125) mask(causal)
         -> tensor<2x6x8192x64xbf16>, tensor<2x2x8192x64xbf16>, tensor<2x2x8192x64xbf16>
  return %r#0, %r#1, %r#2 : tensor<2x6x8192x64xbf16>, tensor<2x2x8192x64xbf16>, tensor<2x2x8192x64xbf16>
}

// -----

// A float capture's gradient (an additive bias's dbias): a third walk over
// batch, query blocks and key blocks, sequential so its sums need no
// atomics, each tile's dS · d score_mod / d bias added into the bias slice
// the read indexes; an f32 accumulator of the bias's size, no Lq x Lk
// intermediate.
// CHECK-LABEL: func.func @grad_bias
// CHECK-NOT: flash.attention_grad
// CHECK: scf.forall
// CHECK: scf.forall
// CHECK: scf.for %{{.+}} = %{{.+}} to %c4 step %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (tensor<37x53xf32>)
// CHECK: scf.for {{.*}} -> (tensor<37x53xf32>)
// CHECK: scf.for {{.*}} -> (tensor<37x53xf32>)
// CHECK: math.exp
// CHECK: %[[PART:.+]] = tensor.extract_slice %[[ACC:.+]][%{{.+}}, %{{.+}}] [%{{.+}}, %{{.+}}] [1, 1] : tensor<37x53xf32> to tensor<?x?xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.+}} : tensor<?x?xf32>) outs(%[[PART]] : tensor<?x?xf32>)
// CHECK: tensor.insert_slice %{{.+}} into %[[ACC]]
// CHECK-NOT: flash.attention_grad
func.func @grad_bias(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                     %o: tensor<4x37x12xf32>, %lse: tensor<4x37xf32>, %bias: tensor<37x53xf32>)
    -> tensor<37x53xf32> {
  %r:4 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x37xf32>)
         outs(%q, %k, %v, %bias : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>, tensor<37x53xf32>)
         captures(%bias : tensor<37x53xf32>) scale(0.2)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<37x53xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<37x53xf32>
           %z = arith.addf %s, %x : f32
           flash.yield %z : f32
         } -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>, tensor<37x53xf32>
  return %r#3 : tensor<37x53xf32>
}

// -----

// A per-head bias [H, Lk] at L = 8192: its gradient sums over the query rows
// (a reduction dim of each tile), still without an Lq x Lk buffer.
// CHECK-LABEL: func.func @grad_head_bias_8k
// CHECK-NOT: 8192x8192
// CHECK-NOT: flash.attention_grad
// CHECK: tensor.extract_slice %{{.+}}[%{{.+}}, %{{.+}}] [1, %{{.+}}] [1, 1] : tensor<6x8192xf32> to tensor<?xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]}
// CHECK-NOT: 8192x8192
func.func @grad_head_bias_8k(%q: tensor<2x6x8192x64xf32>, %k: tensor<2x6x8192x64xf32>,
                             %o: tensor<2x6x8192x64xf32>, %lse: tensor<2x6x8192xf32>,
                             %bias: tensor<6x8192xf32>) -> tensor<6x8192xf32> {
  %r:4 = flash.attention_grad ins(%q, %k, %k, %o, %o, %lse : tensor<2x6x8192x64xf32>, tensor<2x6x8192x64xf32>,
             tensor<2x6x8192x64xf32>, tensor<2x6x8192x64xf32>, tensor<2x6x8192x64xf32>, tensor<2x6x8192xf32>)
         outs(%q, %k, %k, %bias : tensor<2x6x8192x64xf32>, tensor<2x6x8192x64xf32>, tensor<2x6x8192x64xf32>, tensor<6x8192xf32>)
         captures(%bias : tensor<6x8192xf32>) scale(0.125) mask(causal)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bt: tensor<6x8192xf32>):
           %x = tensor.extract %bt[%h, %j] : tensor<6x8192xf32>
           %z = arith.addf %s, %x : f32
           flash.yield %z : f32
         } -> tensor<2x6x8192x64xf32>, tensor<2x6x8192x64xf32>, tensor<2x6x8192x64xf32>, tensor<6x8192xf32>
  return %r#3 : tensor<6x8192xf32>
}

