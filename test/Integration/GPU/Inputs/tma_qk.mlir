// Runtime test input: TMA descriptors (nvgpu.tma.create.descriptor ->
// mgpuTensorMapEncodeTiledMemref) feeding a wgmma tile; S = Q * K for 64x64 f16
// (K read as B stored [k][n] with {transposeB}, exact on the H200 per the Hopper study).
// One CTA, one warpgroup (128 threads).
!mbarT = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
!tmaQ  = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!tmaK  = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!accT  = !nvgpu.warpgroup.accumulator<fragmented = vector<64x64xf32>>
!smem  = memref<?xi8, #gpu.address_space<workgroup>>

module attributes {gpu.container_module} {
  gpu.module @kernels {
    // Kernel args are !llvm.ptr: convert-gpu-to-nvvm cannot convert a gpu.func signature that
    // mentions !nvgpu.tensormap.descriptor, so cast inside (casts fold in reconcile-unrealized-casts).
    gpu.func @qk_kernel(%pq: !llvm.ptr, %pk: !llvm.ptr, %out: memref<64x64xf32>) kernel {
      %dq = builtin.unrealized_conversion_cast %pq : !llvm.ptr to !tmaQ
      %dk = builtin.unrealized_conversion_cast %pk : !llvm.ptr to !tmaK
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c8192 = arith.constant 8192 : index
      %c16384 = arith.constant 16384 : index
      %tx = arith.constant 16384 : index          // bytes expected: 2 * 64*64*2
      %ticks = arith.constant 10000000 : index
      %phase0 = arith.constant false
      %tid = gpu.thread_id x
      %dyn = gpu.dynamic_shared_memory : !smem
      %c1023 = arith.constant 1023 : index
      %c1024 = arith.constant 1024 : index
      %base = memref.extract_aligned_pointer_as_index %dyn : !smem -> index
      %b1 = arith.addi %base, %c1023 : index
      %b2 = arith.divui %b1, %c1024 : index
      %b3 = arith.muli %b2, %c1024 : index
      %pad = arith.subi %b3, %base : index
      %oK = arith.addi %pad, %c8192 : index
      %oS = arith.addi %pad, %c16384 : index
      %sQ = memref.view %dyn[%pad][] : !smem to memref<64x64xf16, #gpu.address_space<workgroup>>
      %sK = memref.view %dyn[%oK][] : !smem to memref<64x64xf16, #gpu.address_space<workgroup>>
      %sS = memref.view %dyn[%oS][] : !smem to memref<64x64xf32, #gpu.address_space<workgroup>>
      %bar = nvgpu.mbarrier.create -> !mbarT
      %is0 = arith.cmpi eq, %tid, %c0 : index
      scf.if %is0 {
        nvgpu.mbarrier.init %bar[%c0], %c1 : !mbarT
        nvgpu.tma.prefetch.descriptor %dq : !tmaQ
        nvgpu.tma.prefetch.descriptor %dk : !tmaK
      }
      gpu.barrier
      scf.if %is0 {
        nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %tx : !mbarT
        // TMA coordinates are innermost-first: [col, row]
        nvgpu.tma.async.load %dq[%c0, %c0], %bar[%c0] to %sQ : !tmaQ, !mbarT -> memref<64x64xf16, #gpu.address_space<workgroup>>
        nvgpu.tma.async.load %dk[%c0, %c0], %bar[%c0] to %sK : !tmaK, !mbarT -> memref<64x64xf16, #gpu.address_space<workgroup>>
      }
      nvgpu.mbarrier.try_wait.parity %bar[%c0], %phase0, %ticks : !mbarT
      %descA = nvgpu.warpgroup.generate.descriptor %sQ, %dq : memref<64x64xf16, #gpu.address_space<workgroup>>, !tmaQ
          -> !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, #gpu.address_space<workgroup>>>
      %descB = nvgpu.warpgroup.generate.descriptor %sK, %dk : memref<64x64xf16, #gpu.address_space<workgroup>>, !tmaK
          -> !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, #gpu.address_space<workgroup>>>
      %acc0 = nvgpu.warpgroup.mma.init.accumulator -> !accT
      %acc = nvgpu.warpgroup.mma %descA, %descB, %acc0 {transposeB}
          : !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, #gpu.address_space<workgroup>>>,
            !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, #gpu.address_space<workgroup>>>,
            !accT -> !accT
      nvgpu.warpgroup.mma.store %acc, %sS : !accT to memref<64x64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      // copy S (smem) -> global, 4 floats per thread per row step
      %w = arith.divui %tid, %c32 : index
      %l = arith.remui %tid, %c32 : index
      %col = arith.muli %l, %c4 : index
      %c2 = arith.constant 2 : index
      %col2 = arith.remui %col, %c64 : index
      %rofs = arith.divui %col, %c64 : index
      scf.for %r = %w to %c64 step %c4 {
        %rr = arith.muli %r, %c1 : index
        %v = vector.load %sS[%rr, %col2] : memref<64x64xf32, #gpu.address_space<workgroup>>, vector<4xf32>
        vector.store %v, %out[%rr, %col2] : memref<64x64xf32>, vector<4xf32>
      }
      gpu.return
    }
  }

  func.func @tma_qk(%q: memref<64x64xf16>, %k: memref<64x64xf16>, %s: memref<64x64xf32>)
      attributes {llvm.emit_c_interface} {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %smem = arith.constant 33792 : i32
    %uq = memref.cast %q : memref<64x64xf16> to memref<*xf16>
    %uk = memref.cast %k : memref<64x64xf16> to memref<*xf16>
    %dq = nvgpu.tma.create.descriptor %uq box[%c64, %c64] : memref<*xf16> -> !tmaQ
    %dk = nvgpu.tma.create.descriptor %uk box[%c64, %c64] : memref<*xf16> -> !tmaK
    %pq = builtin.unrealized_conversion_cast %dq : !tmaQ to !llvm.ptr
    %pk = builtin.unrealized_conversion_cast %dk : !tmaK to !llvm.ptr
    gpu.launch_func @kernels::@qk_kernel blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        dynamic_shared_memory_size %smem
        args(%pq : !llvm.ptr, %pk : !llvm.ptr, %s : memref<64x64xf32>)
    return
  }
}
