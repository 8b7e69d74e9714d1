// Small kernels that exercise libflash_cuda_runtime: a grid-strided axpy with a
// dynamic size and a scalar, and a copy through a caller-sized block of dynamic
// shared memory (past the 48 KiB default). python/tests/test_gpu_runtime.py runs
// them on a GPU; here the library is built and called without a driver.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %flash_src_root/tools/flash-gpu-build.py %s -o %t/libruntime_kernels.so --runtime-dir %flash_lib_dir --bundle
// RUN: nm -D %t/libruntime_kernels.so | FileCheck %s --check-prefix=SYMS
// RUN: env FLASH_CUDA_DRIVER=%t/no-such-libcuda.so %python %S/Inputs/call_without_driver.py %t/libruntime_kernels.so | FileCheck %s --check-prefix=NODRV

// SYMS-DAG: T _mlir_ciface_axpy
// SYMS-DAG: T _mlir_ciface_smem_copy
// SYMS-DAG: U mgpuLaunchKernel
// SYMS-DAG: U mgpuModuleLoad

// NODRV: status 1: CUDA driver not found: cannot load '{{.*}}no-such-libcuda.so'
// NODRV-NEXT: after clear: status 0
// NODRV-NEXT: set stream then call: status 1
// NODRV-NEXT: counters: launch 0 stream_create 0 module_load 0

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @axpy(%x: memref<?xf32>, %y: memref<?xf32>, %a: f32, %n: index) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %in = arith.cmpi ult, %i, %n : index
      scf.if %in {
        %xv = memref.load %x[%i] : memref<?xf32>
        %yv = memref.load %y[%i] : memref<?xf32>
        %ax = arith.mulf %a, %xv : f32
        %r = arith.addf %ax, %yv : f32
        memref.store %r, %y[%i] : memref<?xf32>
      }
      gpu.return
    }
    // y[b*256 + t] = x[b*256 + 255 - t], staged through the last 1 KiB of the dynamic block.
    gpu.func @smem_copy(%x: memref<?xf32>, %y: memref<?xf32>, %floor: index) kernel {
      %bid = gpu.block_id x
      %tid = gpu.thread_id x
      %c256 = arith.constant 256 : index
      %base = arith.muli %bid, %c256 : index
      %i = arith.addi %base, %tid : index
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %s = memref.view %dyn[%floor][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%i] : memref<?xf32>
      memref.store %v, %s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %c255 = arith.constant 255 : index
      %j = arith.subi %c255, %tid : index
      %w = memref.load %s[%j] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %w, %y[%i] : memref<?xf32>
      gpu.return
    }
  }

  func.func @axpy(%x: memref<?xf32>, %y: memref<?xf32>, %a: f32) attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c255 = arith.constant 255 : index
    %c256 = arith.constant 256 : index
    %n = memref.dim %x, %c0 : memref<?xf32>
    %n1 = arith.addi %n, %c255 : index
    %nb = arith.divui %n1, %c256 : index
    gpu.launch_func @kernels::@axpy blocks in (%nb, %c1, %c1) threads in (%c256, %c1, %c1)
        args(%x : memref<?xf32>, %y : memref<?xf32>, %a : f32, %n : index)
    return
  }

  // y += x with the convention of the attention host functions (descriptors,
  // the stream last), for flashRuntimeCall: the launch goes to the stream
  // the call binds.
  func.func @add_on_stream(%x: memref<?xf32>, %y: memref<?xf32>, %stream: !llvm.ptr) attributes {llvm.emit_c_interface} {
    %one = arith.constant 1.0 : f32
    func.call @axpy(%x, %y, %one) : (memref<?xf32>, memref<?xf32>, f32) -> ()
    return
  }

  // n must be a multiple of 256; smem_bytes >= 1024 bytes of dynamic shared memory.
  func.func @smem_copy(%x: memref<?xf32>, %y: memref<?xf32>, %smem: i32) attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %c1024 = arith.constant 1024 : index
    %n = memref.dim %x, %c0 : memref<?xf32>
    %nb = arith.divui %n, %c256 : index
    %si = arith.index_cast %smem : i32 to index
    %floor = arith.subi %si, %c1024 : index
    gpu.launch_func @kernels::@smem_copy blocks in (%nb, %c1, %c1) threads in (%c256, %c1, %c1)
        dynamic_shared_memory_size %smem
        args(%x : memref<?xf32>, %y : memref<?xf32>, %floor : index)
    return
  }
}
