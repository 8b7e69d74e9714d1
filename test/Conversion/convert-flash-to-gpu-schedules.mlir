// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="pingpong=1 defer-pv=0" | FileCheck %s --check-prefix=PP
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="defer-pv=1" | FileCheck %s --check-prefix=DPV
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s --check-prefix=SERIAL
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="defer-pv=0" | FileCheck %s --check-prefix=SERIAL
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="defer-pv=1 pingpong=1 stages=3" | FileCheck %s --check-prefix=BOTH
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="block-m=64 pingpong=1" | FileCheck %s --check-prefix=ONE
// RUN: (flash-opt %s -split-input-file -convert-flash-to-gpu="defer-pv=1 stages=2" 2>&1 || true) | FileCheck %s --check-prefix=STAGES
// RUN: (flash-opt %s -split-input-file -convert-flash-to-gpu="overlap=1 stages=3 pingpong=1" 2>&1 || true) | FileCheck %s --check-prefix=STAGES
// RUN: flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa defer-pv=1 pingpong=1 stages=3" | FileCheck %s --check-prefix=PTX
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="persistent=1 defer-pv=1 prefetch-next=1 q-buffers=1" | FileCheck %s --check-prefix=PERS
// RUN: flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa persistent=1 defer-pv=1 prefetch-next=1 q-buffers=1" | FileCheck %s --check-prefix=PERS-PTX
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="persistent=1 defer-pv=1 q-buffers=1" | FileCheck %s --check-prefix=NOPF

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

// Deferred PV (the default at D = 128 where the walks are long, with three
// stages; these 200 causal rows see 94 of the 150 keys on average, so
// kernel=auto takes the serial loop below: convert-flash-to-gpu-defer-pv-rule.mlir):
// a prologue tile (QK + softmax), a loop that issues QK(t) and
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
// DPV-NOT: nvvm.wgmma
// DPV: nvvm.wgmma.wait.group.sync.aligned 1
// DPV: llvm.nvvm.ex2.approx.ftz.f32
// DPV: nvvm.wgmma.wait.group.sync.aligned 0
// DPV: nvvm.mbarrier.arrive
// DPV: scf.yield
// DPV: scf.if
// DPV: wgmma.mma_async.sync.aligned.m64n64k16
// DPV: nvvm.wgmma.wait.group.sync.aligned 0

// Without it (defer-pv=0, and kernel=auto's choice for these short walks):
// two stages, one wgmma group in flight at a time.
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
// BOTH-NOT: nvvm.wgmma
// BOTH: nvvm.wgmma.wait.group.sync.aligned 1

// One consumer warpgroup: nobody to take turns with.
// ONE-LABEL: gpu.func @kernel
// ONE-NOT: nvvm.barrier
// ONE: gpu.return

// STAGES: convert-flash-to-gpu: need block-m = 64 * warpgroups (0: automatic), block-n a multiple of 16 in [16, 256] (0: automatic), stages >= 1 (>= 3 with overlap or defer-pv; 0: automatic), defer-pv, persistent, score-prefetch and stage-captures in {-1, 0, 1}, soft-exp2 in [0, 8], q-buffers in [0, 2], and overlap without defer-pv or pingpong

// A persistent grid (one Q buffer here; two: convert-flash-to-gpu-q-buffers.mlir):
// as many CTAs as the device holds at once (its SM count,
// one CTA per SM here), none past the work items, and the launch's work counter
// and exit count, two of the stream's counters that are zero at the launch (the
// last CTA out zeroes them again: no memset per launch); 16 more bytes of shared memory for the
// barrier that hands Q's buffer back and the slot that publishes the item. The
// producer starts at item blockIdx.x; for each item it waits for the consumers
// to be done with the previous one's Q, publishes the item, stops the consumers
// with a plain arrival past the last one, and otherwise fetches its next item
// (gridDim.x + a fetch-and-add) before the item's loads. The consumers read the
// item after Q's barrier, carrying its ordinal (Q's parity) and the tiles
// streamed so far (the ring's slot and parity), and hand Q back as soon as
// the item's last QKᵀ completed (in the deferred schedule's first tile or in
// its loop, whichever is last; at once for an item without tiles), so the
// next item's Q loads under this one's last softmax, PV and epilogue.
// PERS-LABEL: func.func @causal
// PERS: %[[BLOCKS:.+]] = arith.ceildivsi %{{.+}}, %c128
// PERS-NEXT: %[[ITEMS:.+]] = arith.muli %[[BLOCKS]], %{{.+}} : index
// PERS: func.call @flashRuntimeMultiprocessorCount()
// PERS: %[[COUNTER:.+]] = func.call @flashRuntimeSplitCounters(%arg4, %{{.+}}) : (!llvm.ptr, i64) -> !llvm.ptr
// PERS: %[[GRID:.+]] = arith.minsi %[[ITEMS]], %{{.+}} : index
// PERS: gpu.launch_func {{.*}} blocks in (%[[GRID]], %{{.+}}, %{{.+}}) threads in (%c384,
// PERS-SAME: dynamic_shared_memory_size %c181320_i32
// PERS-SAME: %[[COUNTER]] : !llvm.ptr)
// PERS-LABEL: gpu.func @kernel
// PERS-COUNT-7: nvvm.mbarrier.init %{{.+}}, %c{{.+}}
// PERS: nvvm.mbarrier.init %{{.+}}, %c8_i32
// PERS: %[[BX:.+]] = gpu.block_id x
// PERS: scf.while (%[[W:.+]] = %[[BX]], %[[ITER:.+]] = %c0{{.*}}, %{{.+}} = %c0{{.*}}) : (index, index, index) -> (index, index, index)
// PERS: arith.cmpi ugt, %[[ITER]]
// PERS: scf.if
// PERS: nvvm.mbarrier.try_wait.parity
// PERS: %[[SLOT:.+]] = llvm.getelementptr %[[BASE:.+]][%c180288_i64] : (!llvm.ptr<3>, i64)
// PERS: llvm.store %{{.+}}, %[[SLOT]] : i32, !llvm.ptr<3>
// PERS: %[[VALID:.+]] = arith.cmpi ult, %[[W]], %[[KITEMS:[0-9a-z_]+]]
// PERS: scf.if %[[VALID]]
// PERS: } else {
// PERS: nvvm.mbarrier.arrive %
// PERS: scf.condition(%[[VALID]])
// PERS: %[[TICKET:.+]] = llvm.atomicrmw add %[[KCOUNTER:[^,]+]], %c1_i32{{.*}} monotonic : !llvm.ptr, i32
// PERS: %[[TICKETX:.+]] = arith.index_cast %[[TICKET]]
// PERS: %[[GX:.+]] = gpu.grid_dim x
// PERS: %[[NEXT:.+]] = arith.addi %[[GX]], %[[TICKETX]]
// PERS: nvvm.mbarrier.arrive.expect_tx
// With prefetch-next, once the item's loads are issued, the next item's Q
// and the K/V tiles it streams first (the ring's depth, each if the item has
// it) are pulled into L2: its loads into shared memory wait for this item's
// last QKᵀ. Not by default:
// NOPF-LABEL: gpu.func @kernel
// NOPF-NOT: nvvm.cp.async.bulk.tensor.prefetch
// PERS: %[[HASNEXT:.+]] = arith.cmpi ult, %[[NEXT]], %[[KITEMS]]
// PERS-NEXT: scf.if %[[HASNEXT]] {
// PERS: nvvm.cp.async.bulk.tensor.prefetch %arg0, box
// PERS: nvvm.cp.async.bulk.tensor.prefetch %arg0, box
// PERS: scf.if
// PERS: nvvm.cp.async.bulk.tensor.prefetch %arg1, box
// PERS: nvvm.cp.async.bulk.tensor.prefetch %arg2, box
// PERS: scf.if
// PERS: nvvm.cp.async.bulk.tensor.prefetch %arg1, box
// PERS: scf.if
// PERS: nvvm.cp.async.bulk.tensor.prefetch %arg1, box
// PERS: scf.yield %[[NEXT]]
// After its last item the producer counts its CTA out; the last one zeroes both.
// PERS: %[[EXITS:.+]] = llvm.getelementptr %[[KCOUNTER]][1] : (!llvm.ptr) -> !llvm.ptr, i32
// PERS: %[[BEFORE:.+]] = llvm.atomicrmw add %[[EXITS]], %{{.+}} acq_rel : !llvm.ptr, i32
// PERS: %[[B:.+]] = arith.index_cast %[[BEFORE]] : i32 to index
// PERS: %[[CTAS:.+]] = arith.muli %{{.+}}, %grid_dim_z
// PERS: %[[LASTN:.+]] = arith.subi %[[CTAS]], %c1
// PERS: %[[ISLAST:.+]] = arith.cmpi eq, %[[B]], %[[LASTN]] : index
// PERS: scf.if %[[ISLAST]] {
// PERS: llvm.store %{{.+}}, %[[KCOUNTER]]
// PERS: llvm.store %{{.+}}, %[[EXITS]]
// PERS: scf.while (%[[CITER:.+]] = %c0{{.*}}, %{{.+}} = %c0{{.*}}) : (index, index) -> (index, index, index)
// PERS: nvvm.mbarrier.try_wait.parity
// PERS: %[[CSLOT:.+]] = llvm.getelementptr %[[BASE]][%c180288_i64] : (!llvm.ptr<3>, i64)
// PERS-NEXT: llvm.load %[[CSLOT]] : !llvm.ptr<3> -> i32
// PERS: scf.condition
// PERS: %[[NOTILE:.+]] = arith.cmpi sge, %[[TB:.+]], %[[TE:.+]] : index
// PERS-NEXT: scf.if %[[NOTILE]] {
// PERS: nvvm.mbarrier.arrive %[[QEMPTY:.+]] : !llvm.ptr<3>
// PERS: nvvm.wgmma.mma_async
// PERS: nvvm.wgmma.wait.group.sync.aligned 0
// PERS-NEXT: %[[T1:.+]] = arith.addi %[[TB]], %c1
// PERS-NEXT: %[[LAST1:.+]] = arith.cmpi eq, %[[T1]], %[[TE]] : index
// PERS-NEXT: scf.if %[[LAST1]] {
// PERS: nvvm.mbarrier.arrive
// PERS: scf.for %[[T:.+]] = %{{.+}} to %[[TE]]
// PERS: nvvm.wgmma.wait.group.sync.aligned 1
// PERS-NEXT: %[[T2:.+]] = arith.addi %[[T]], %c1
// PERS-NEXT: %[[LAST2:.+]] = arith.cmpi eq, %[[T2]], %[[TE]] : index
// PERS-NEXT: scf.if %[[LAST2]] {
// PERS: nvvm.mbarrier.arrive
// PERS: llvm.store
// PERS: scf.yield
// PERS-PTX-LABEL: gpu.binary @flash_attention_0
// PERS-PTX: cp.async.bulk.prefetch.tensor.3d.L2.global.tile

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
