// RUN: flash-opt %s -split-input-file --transform-interpreter -verify-diagnostics

// Tiles that flash.attention refuses, with the reason at the op.

func.func @heads_break_groups(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>, %o: tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32> {
  // expected-error @+4 {{cannot tile the heads dim (batch dim #1) with a tile of 2 heads: query head i reads key/value head i / 3 (6 query heads, 2 key/value heads), so a tile must hold whole groups (a multiple of 3 heads) or lie inside one group (a divisor of 3), at an offset that is a multiple of its size}}
  // expected-error @+3 {{to tile operation}}
  // expected-error @+2 {{failed to generate tiling loops}}
  // expected-note @+1 {{when applied to this op}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
         outs(%o : tensor<2x6x10x8xf32>) scale(0.25) -> tensor<2x6x10x8xf32>
  return %r : tensor<2x6x10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{transform.structured.tile_using_forall failed to apply}}
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [0, 2] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

func.func @dynamic_heads(%q: tensor<2x?x10x16xf32>, %k: tensor<2x?x12x16xf32>, %v: tensor<2x?x12x8xf32>, %o: tensor<2x?x10x8xf32>) -> tensor<2x?x10x8xf32> {
  // expected-error @+4 {{cannot tile the heads dim (batch dim #1) into tiles of more than one head: with dynamic head counts only the whole dim or single heads are known to pair up with their key/value heads}}
  // expected-error @+3 {{to tile operation}}
  // expected-error @+2 {{failed to generate tiling loops}}
  // expected-note @+1 {{when applied to this op}}
  %r = flash.attention ins(%q, %k, %v : tensor<2x?x10x16xf32>, tensor<2x?x12x16xf32>, tensor<2x?x12x8xf32>)
         outs(%o : tensor<2x?x10x8xf32>) scale(0.25) -> tensor<2x?x10x8xf32>
  return %r : tensor<2x?x10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{transform.structured.tile_using_forall failed to apply}}
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [0, 2] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

func.func @key_loop(%q: tensor<10x16xf32>, %k: tensor<12x16xf32>, %v: tensor<12x8xf32>, %o: tensor<10x8xf32>) -> tensor<10x8xf32> {
  // expected-error @+3 {{can only be tiled along its batch dims and query rows; the key (Lk) loop #1 must be whole (tile size 0)}}
  // expected-error @+2 {{to tile operation}}
  // expected-error @+1 {{failed to generate tiling loops}}
  %r = flash.attention ins(%q, %k, %v : tensor<10x16xf32>, tensor<12x16xf32>, tensor<12x8xf32>)
         outs(%o : tensor<10x8xf32>) scale(0.25) -> tensor<10x8xf32>
  return %r : tensor<10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %l:2 = transform.structured.tile_using_for %a tile_sizes [5, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

func.func @value_loop(%q: tensor<10x16xf32>, %k: tensor<12x16xf32>, %v: tensor<12x8xf32>, %o: tensor<10x8xf32>) -> tensor<10x8xf32> {
  // expected-error @+4 {{can only be tiled along its batch dims and query rows; the value (Dv) loop #3 must be whole (tile size 0)}}
  // expected-error @+3 {{to tile operation}}
  // expected-error @+2 {{failed to generate tiling loops}}
  // expected-note @+1 {{when applied to this op}}
  %r = flash.attention ins(%q, %k, %v : tensor<10x16xf32>, tensor<12x16xf32>, tensor<12x8xf32>)
         outs(%o : tensor<10x8xf32>) scale(0.25) -> tensor<10x8xf32>
  return %r : tensor<10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{transform.structured.tile_using_forall failed to apply}}
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [0, 0, 0, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
