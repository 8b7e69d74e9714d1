// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="pingpong=1 defer-pv=0" | FileCheck %s --check-prefix=PP
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s --check-prefix=DPV
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="defer-pv=0" | FileCheck %s --check-prefix=SERIAL
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="defer-pv=1 pingpong=1 stages=3" | FileCheck %s --check-prefix=BOTH
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="block-m=64 pingpong=1" | FileCheck %s --check-prefix=ONE
// RUN: (flash-opt %s -split-input-file -convert-flash-to-gpu="defer-pv=1 stages=2" 2>&1 || true) | FileCheck %s --check-prefix=STAGES
// RUN: (flash-opt %s -split-input-file -convert-flash-to-gpu="overlap=1 stages=3 pingpong=1" 2>&1 || true) | FileCheck %s --check-prefix=STAGES
// RUN: flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa defer-pv=1 pingpong=1 stages=3" | FileCheck %s --check-prefix=PTX

// D = 128, Dv = 64, Lq != Lk, causal: two consumer warpgroups by default.

// Ping-pong: the first warpgroup opens its own turn once; each tile waits for
// its turn (named barrier 1 + warpgroup, 256 threads) before QK and passes it
// on right after issuing QK.
// PP-LABEL: gpu.func @kernel
// PP: nvvm.setmaxregister increase 240
// PP: scf.if
// PP-NEXT: nvvm.barrier.arrive id = %[[OWN:.+]] number_of_threads = %[[N:.+]]
// PP: scf.for
// PP: nvvm.mbarrier.try_wait.parity
// PP: nvvm.barrier id = %[[OWN]] number_of_threads = %[[N]]
// PP-COUNT-8: nvvm.wgmma.mma_async
// PP: nvvm.wgmma.commit.group.sync.aligned
// PP-NEXT: nvvm.barrier.arrive id = %[[NEXT:.+]] number_of_threads = %[[N]]
// PP: nvvm.wgmma.wait.group.sync.aligned 0

// Deferred PV (the default at D = 128, with three stages): a prologue tile (QK + softmax), a loop that issues QK(t) and
// PV(t-1) back to back and waits for QK alone, then PV of the last tile.
// DPV: gpu.launch_func
// DPV-SAME: dynamic_shared_memory_size %c181304_i32
// DPV-LABEL: gpu.func @kernel
// DPV-NOT: nvvm.barrier
// DPV: scf.if
// DPV-COUNT-8: nvvm.wgmma.mma_async
// DPV: nvvm.wgmma.wait.group.sync.aligned 0
// DPV: scf.for
// DPV-COUNT-8: nvvm.wgmma.mma_async
// DPV: nvvm.wgmma.commit.group.sync.aligned
// DPV-NOT: nvvm.wgmma.wait.group
// DPV: nvvm.wgmma.fence.aligned
// DPV: wgmma.mma_async.sync.aligned.m64n64k16
// DPV: nvvm.wgmma.commit.group.sync.aligned
// DPV-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// DPV: llvm.nvvm.ex2.approx.ftz.f32
// DPV: nvvm.wgmma.wait.group.sync.aligned 0
// DPV: nvvm.mbarrier.arrive
// DPV: scf.yield
// DPV: scf.if
// DPV: wgmma.mma_async.sync.aligned.m64n64k16
// DPV: nvvm.wgmma.wait.group.sync.aligned 0

// Without it: two stages, one wgmma group in flight at a time.
// SERIAL: gpu.launch_func
// SERIAL-SAME: dynamic_shared_memory_size %c132136_i32
// SERIAL-LABEL: gpu.func @kernel
// SERIAL-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// SERIAL: gpu.return

// Both: QK(t) and PV(t-1) are issued inside one turn.
// BOTH-LABEL: gpu.func @kernel
// BOTH: scf.for
// BOTH: nvvm.barrier id
// BOTH-COUNT-8: nvvm.wgmma.mma_async
// BOTH: wgmma.mma_async.sync.aligned.m64n64k16
// BOTH: nvvm.wgmma.commit.group.sync.aligned
// BOTH-NEXT: nvvm.barrier.arrive id
// BOTH-NEXT: nvvm.wgmma.wait.group.sync.aligned 1

// One consumer warpgroup: nobody to take turns with.
// ONE-LABEL: gpu.func @kernel
// ONE-NOT: nvvm.barrier
// ONE: gpu.return

// STAGES: convert-flash-to-gpu: need block-m = 64 * warpgroups (0: automatic), block-n a multiple of 16 in [16, 256] (0: automatic), stages >= 1 (>= 3 with overlap or defer-pv; 0: automatic), defer-pv in {-1, 0, 1}, and overlap without defer-pv or pingpong

// PTX-LABEL: gpu.binary @flash_attention_0
// PTX-DAG: bar.arrive
// PTX-DAG: bar.sync
// PTX-DAG: wgmma.wait_group.sync.aligned {{(\\09)?}}1;
func.func @causal(%q: memref<2x4x200x128xbf16>, %k: memref<2x4x150x128xbf16>,
                  %v: memref<2x4x150x64xbf16>, %o: memref<2x4x200x64xbf16>) attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x200x128xbf16> to tensor<2x4x200x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x150x128xbf16> to tensor<2x4x150x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x150x64xbf16> to tensor<2x4x150x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x200x128xbf16>, tensor<2x4x150x128xbf16>, tensor<2x4x150x64xbf16>)
         outs(%ot : tensor<2x4x200x64xbf16>) scale(0.088) mask(causal, bottom_right) -> tensor<2x4x200x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x200x64xbf16>, memref<2x4x200x64xbf16>) -> ()
  return
}
