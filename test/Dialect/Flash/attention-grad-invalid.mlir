// RUN: flash-opt %s -split-input-file -verify-diagnostics

func.func @missing_capture_gradient(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                                    %o: tensor<4x37x12xf32>, %lse: tensor<4x37xf32>, %bias: tensor<37x53xf32>) {
  // expected-error @+1 {{expects 4 inits (dq, dk, dv, then one per float capture: 1), got 3}}
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x37xf32>)
         outs(%q, %k, %v : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>)
         captures(%bias : tensor<37x53xf32>) scale(0.2)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<37x53xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<37x53xf32>
           %z = arith.addf %s, %x : f32
           flash.yield %z : f32
         } -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>
  return
}

// -----

func.func @no_derivative(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                         %o: tensor<4x37x12xf32>, %lse: tensor<4x37xf32>) {
  // expected-error @+1 {{cannot differentiate the score_mod op 'math.erf': it has no derivative rule}}
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x37xf32>)
         outs(%q, %k, %v : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>) scale(0.2)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index):
           %z = math.erf %s : f32
           flash.yield %z : f32
         } -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>
  return
}

// -----

// An op without a derivative is fine where the score does not flow through
// it (here it only computes an index-dependent constant).
func.func @inactive_op_is_fine(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                               %o: tensor<4x37x12xf32>, %lse: tensor<4x37xf32>) {
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x37xf32>)
         outs(%q, %k, %v : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>) scale(0.2)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index):
           %ii = arith.index_cast %i : index to i64
           %f = arith.sitofp %ii : i64 to f32
           %e = math.erf %f : f32
           %z = arith.addf %s, %e : f32
           flash.yield %z : f32
         } -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>
  return
}

// -----

func.func @computed_capture_index(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                                  %o: tensor<4x37x12xf32>, %lse: tensor<4x37xf32>, %rel: tensor<128xf32>) {
  // expected-error @+1 {{cannot differentiate the read of capture #0 at computed or repeated indices}}
  %r:4 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x37xf32>)
         outs(%q, %k, %v, %rel : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>, tensor<128xf32>)
         captures(%rel : tensor<128xf32>) scale(0.2)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %rt: tensor<128xf32>):
           %d = arith.subi %i, %j : index
           %c = arith.constant 64 : index
           %x = arith.addi %d, %c : index
           %e = tensor.extract %rt[%x] : tensor<128xf32>
           %z = arith.addf %s, %e : f32
           flash.yield %z : f32
         } -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>, tensor<128xf32>
  return
}

// -----

func.func @lse_shape(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                     %o: tensor<4x37x12xf32>, %lse: tensor<4x36xf32>) {
  // expected-error @+1 {{'lse' must be f32 [batch..., Lq] for 'query' 'tensor<4x37x24xf32>', got 'tensor<4x36xf32>'}}
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x36xf32>)
         outs(%q, %k, %v : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>) scale(0.2)
         -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>
  return
}

// -----

func.func @dk_init_shape(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                         %o: tensor<4x37x12xf32>, %lse: tensor<4x37xf32>) {
  // expected-error @+1 {{init #1 (dk) 'tensor<4x37x24xf32>' must have the shape of 'tensor<4x53x24xf32>'}}
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x12xf32>, tensor<4x37x12xf32>, tensor<4x37xf32>)
         outs(%q, %q, %v : tensor<4x37x24xf32>, tensor<4x37x24xf32>, tensor<4x53x12xf32>) scale(0.2)
         -> tensor<4x37x24xf32>, tensor<4x37x24xf32>, tensor<4x53x12xf32>
  return
}

// -----

func.func @out_dv(%q: tensor<4x37x24xf32>, %k: tensor<4x53x24xf32>, %v: tensor<4x53x12xf32>,
                  %o: tensor<4x37x10xf32>, %lse: tensor<4x37xf32>) {
  // expected-error @+1 {{'out' value dim Dv = 10 does not match 'value' dim Dv = 12}}
  %r:3 = flash.attention_grad ins(%q, %k, %v, %o, %o, %lse : tensor<4x37x24xf32>, tensor<4x53x24xf32>,
             tensor<4x53x12xf32>, tensor<4x37x10xf32>, tensor<4x37x10xf32>, tensor<4x37xf32>)
         outs(%q, %k, %v : tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>) scale(0.2)
         -> tensor<4x37x24xf32>, tensor<4x53x24xf32>, tensor<4x53x12xf32>
  return
}
