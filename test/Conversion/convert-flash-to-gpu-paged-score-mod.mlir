// A score_mod on flash.paged_attention: both kernels that read pages take the
// region and its captures as they do for flash.attention — the captures after
// the batch sizes, before the sinks and the pages — and call it on the key's
// position in its sequence.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s --check-prefix=WG
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=splitkv" | FileCheck %s --check-prefix=SPLIT
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX

// GQA 32/8 decode, pages of 16, soft-capping and a per-head bias along the
// key's position, with sinks.
// WG-LABEL: func.func @decode_score_mod
// WG: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} args({{.*}} : index, {{.*}} : index, %[[BIAS:.*]] : memref<32x1024xf32>, {{.*}} : memref<?xf32>, {{.*}} : memref<?x?xi32>, {{.*}} : memref<?xi32>, {{.*}} : index,
// WG: gpu.func @kernel(
// WG-SAME: %[[C:[^:]*]]: memref<32x1024xf32>, %{{[^:]*}}: memref<?xf32>, %[[T:[^:]*]]: memref<?x?xi32>
// WG: memref.load %[[T]]
// WG: memref.extract_aligned_pointer_as_index %[[C]]
// WG: ld.global.nc.b32
// SPLIT-LABEL: func.func @decode_score_mod
// SPLIT: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} args({{.*}} : index, {{.*}} : index, {{.*}} : index, %{{.*}} : memref<32x1024xf32>, {{.*}} : memref<?xf32>, {{.*}} : memref<?x?xi32>, {{.*}} : memref<?xi32>
// SPLIT: gpu.func @kernel(
// SPLIT-SAME: %[[C:[^:]*]]: memref<32x1024xf32>, %{{[^:]*}}: memref<?xf32>, %[[T:[^:]*]]: memref<?x?xi32>
// SPLIT: scf.for
// SPLIT: memref.load %[[T]]
// SPLIT: tanh.approx.f32
// SPLIT: memref.extract_strided_metadata %[[C]]
// PTX-LABEL: .entry kernel(
// PTX: ld.global.nc.b32
func.func @decode_score_mod(%q: memref<2x32x1x128xbf16>, %kc: memref<200x16x8x128xbf16>,
                            %vc: memref<200x16x8x128xbf16>, %o: memref<2x32x1x128xbf16>,
                            %t: memref<2x64xi32>, %n: memref<2xi32>, %bias: memref<32x1024xf32>,
                            %s: memref<32xf32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<2x32x1x128xbf16> to tensor<2x32x1x128xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<200x16x8x128xbf16> to tensor<200x16x8x128xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<200x16x8x128xbf16> to tensor<200x16x8x128xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x32x1x128xbf16> to tensor<2x32x1x128xbf16>
  %t_t = bufferization.to_tensor %t restrict : memref<2x64xi32> to tensor<2x64xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<2xi32> to tensor<2xi32>
  %b_t = bufferization.to_tensor %bias restrict : memref<32x1024xf32> to tensor<32x1024xf32>
  %s_t = bufferization.to_tensor %s restrict : memref<32xf32> to tensor<32xf32>
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<2x32x1x128xbf16>, tensor<200x16x8x128xbf16>, tensor<200x16x8x128xbf16>)
      pages(%t_t, %n_t : tensor<2x64xi32>, tensor<2xi32>)
      outs(%o_t : tensor<2x32x1x128xbf16>) captures(%b_t : tensor<32x1024xf32>) sinks(%s_t : tensor<32xf32>)
      scale(0.0883883) score_mod {
      ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<32x1024xf32>):
        %cap = arith.constant 30.0 : f32
        %d = arith.divf %x, %cap : f32
        %th = math.tanh %d : f32
        %y = arith.mulf %th, %cap : f32
        %e = tensor.extract %c[%h, %j] : tensor<32x1024xf32>
        %z = arith.addf %y, %e : f32
        flash.yield %z : f32
      } -> tensor<2x32x1x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x32x1x128xbf16>, memref<2x32x1x128xbf16>) -> ()
  return
}

// -----

// An index-only mask in the region: both kernels classify key tiles over the
// sequence's own length (the interval check 1500 <= a tile's last key, before the
// key loop), so the leading tiles it hides are skipped.
// WG-LABEL: func.func @late_keys
// WG: gpu.func @kernel(
// WG: arith.cmpi sle, %c1500, %{{.*}} : index
// SPLIT-LABEL: func.func @late_keys
// SPLIT: gpu.func @kernel(
// SPLIT: arith.cmpi sle, %c1500, %{{.*}} : index
// SPLIT: scf.for
func.func @late_keys(%q: memref<2x32x1x128xbf16>, %kc: memref<200x16x8x128xbf16>,
                     %vc: memref<200x16x8x128xbf16>, %o: memref<2x32x1x128xbf16>,
                     %t: memref<2x64xi32>, %n: memref<2xi32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<2x32x1x128xbf16> to tensor<2x32x1x128xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<200x16x8x128xbf16> to tensor<200x16x8x128xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<200x16x8x128xbf16> to tensor<200x16x8x128xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x32x1x128xbf16> to tensor<2x32x1x128xbf16>
  %t_t = bufferization.to_tensor %t restrict : memref<2x64xi32> to tensor<2x64xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<2xi32> to tensor<2xi32>
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<2x32x1x128xbf16>, tensor<200x16x8x128xbf16>, tensor<200x16x8x128xbf16>)
      pages(%t_t, %n_t : tensor<2x64xi32>, tensor<2xi32>)
      outs(%o_t : tensor<2x32x1x128xbf16>)
      scale(0.0883883) score_mod {
      ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 1500 : index
        %ok = arith.cmpi sge, %j, %c : index
        %ninf = arith.constant 0xFF800000 : f32
        %y = arith.select %ok, %x, %ninf : f32
        flash.yield %y : f32
      } -> tensor<2x32x1x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x32x1x128xbf16>, memref<2x32x1x128xbf16>) -> ()
  return
}
