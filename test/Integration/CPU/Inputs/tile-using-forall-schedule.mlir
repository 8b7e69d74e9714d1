// Tiling schedules for tile-using-forall.mlir, picked per op by its `tiling`
// attribute (preloaded, so the payload functions stay plain functions).
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    // Batch 1, whole GQA groups of 3 heads, 4 query rows (a partial last tile).
    %groups = transform.structured.match ops{["flash.attention"]} attributes {tiling = "groups"} in %root : (!transform.any_op) -> !transform.any_op
    %t0, %l0 = transform.structured.tile_using_forall %groups tile_sizes [1, 3, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // Single heads over whole batches, 3 query rows.
    %heads = transform.structured.match ops{["flash.attention"]} attributes {tiling = "heads"} in %root : (!transform.any_op) -> !transform.any_op
    %t1, %l1 = transform.structured.tile_using_forall %heads tile_sizes [0, 1, 3] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // Two of the four heads of a group, 5 query rows.
    %half = transform.structured.match ops{["flash.attention"]} attributes {tiling = "half_group"} in %root : (!transform.any_op) -> !transform.any_op
    %t2, %l2 = transform.structured.tile_using_forall %half tile_sizes [1, 2, 5] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // scf.for loops instead of scf.forall.
    %for = transform.structured.match ops{["flash.attention"]} attributes {tiling = "for"} in %root : (!transform.any_op) -> !transform.any_op
    %t3, %l3:2 = transform.structured.tile_using_for %for tile_sizes [1, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    // A tile tiled again: the offsets of the two levels add up.
    %twice = transform.structured.match ops{["flash.attention"]} attributes {tiling = "twice"} in %root : (!transform.any_op) -> !transform.any_op
    %t4, %l4 = transform.structured.tile_using_forall %twice tile_sizes [1, 6, 8] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t5, %l5 = transform.structured.tile_using_forall %t4 tile_sizes [0, 3, 3] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // Dynamic lengths: the query length is read at run time.
    %dyn = transform.structured.match ops{["flash.attention"]} attributes {tiling = "dynamic"} in %root : (!transform.any_op) -> !transform.any_op
    %t6, %l6 = transform.structured.tile_using_forall %dyn tile_sizes [1, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
