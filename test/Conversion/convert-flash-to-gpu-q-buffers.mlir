// The persistent grid's second Q buffer (q-buffers): work item i takes Q
// buffer i mod 2, with its own full and empty barrier and item slot, so the
// producer loads item i+1's Q while the consumers still multiply by item i's.
// With q-buffers=0, where the second buffer fits beside the ring: causal
// N = 1k at D = 128 takes the serial loop's two stages (2 · 32 KiB of Q +
// 2 · 64 KiB of K/V + 10 barriers and slots); the non-causal shape's deferred
// PV needs three stages, beside which a second Q does not fit (256 KiB). One
// buffer by default (until measured on a GPU).
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=q-buffers=0 | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s --check-prefix=ONE
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=q-buffers=1 | FileCheck %s --check-prefix=ONE
// RUN: (flash-opt %s -split-input-file -convert-flash-to-gpu=q-buffers=2 2>&1 || true) | FileCheck %s --check-prefix=FIT
// RUN: (flash-opt %s -split-input-file -convert-flash-to-gpu=q-buffers=3 2>&1 || true) | FileCheck %s --check-prefix=BAD
// RUN: flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa q-buffers=0" | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @causal
// CHECK: gpu.launch_func {{.*}} dynamic_shared_memory_size %c197712_i32
// CHECK-LABEL: gpu.func @kernel
// qFull per buffer, the ring's full/empty pairs, qEmpty per buffer.
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.+}}, %c1_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c8_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c1_i32
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.+}}, %c8_i32
// The producer, before it publishes item ITEM: buffer ITEM mod 2 is free once
// the consumers handed back the item it held before (its fill ITEM / 2 > 0),
// waited for on that buffer's empty barrier; the item goes to that buffer's slot.
// CHECK: scf.while (%{{.+}} = %block_id_x, %[[ITEM:.+]] = %{{.+}}, %{{.+}} = %{{.+}}) : (index, index, index)
// CHECK-NEXT: %c2 = arith.constant 2 : index
// CHECK-NEXT: %[[BUF:.+]] = arith.remui %[[ITEM]], %c2 : index
// CHECK: %[[FILL:.+]] = arith.divui %[[ITEM]], %{{.+}} : index
// CHECK: arith.cmpi ugt, %[[FILL]]
// CHECK: arith.constant 196656 : index
// CHECK: arith.muli %[[BUF]], %c8
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: arith.constant 196672 : index
// CHECK: arith.muli %[[BUF]], %c8
// CHECK: llvm.store
// CHECK: scf.condition
// Its loads: Q into the item's buffer, 32 KiB apart, on that buffer's barrier.
// CHECK: %[[LBUF:.+]] = arith.remui %{{.+}}, %c2 : index
// CHECK: arith.constant 196608 : index
// CHECK: arith.muli %[[LBUF]], %c8
// CHECK: arith.muli %[[LBUF]], %c32768 : index
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[QFULL:.+]], %c32768_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg0, %[[QFULL]]
// The consumers wait on the item's buffer's full barrier (parity: its fill
// mod 2), read the item from its slot, multiply by Q in that buffer (its
// descriptor 2048 16-byte units further) and hand that buffer back.
// CHECK: scf.while (%[[CITEM:.+]] = %{{.+}}, %{{.+}} = %{{.+}}) : (index, index)
// CHECK: %[[CBUF:.+]] = arith.remui %[[CITEM]], %{{.+}} : index
// CHECK: %[[CFILL:.+]] = arith.divui %[[CITEM]], %{{.+}} : index
// CHECK: %[[PAR:.+]] = arith.remui %[[CFILL]], %{{.+}} : index
// CHECK: arith.constant 196608 : index
// CHECK: nvvm.mbarrier.try_wait.parity %{{.+}}, %{{.+}}, %{{.+}} : !llvm.ptr<3>, i32, i32
// CHECK: arith.constant 196672 : index
// CHECK: llvm.load
// CHECK: scf.condition
// CHECK: arith.muli %{{.+}}, %c2048 : index
// CHECK: nvvm.wgmma.mma_async
// CHECK: arith.constant 196656 : index
// CHECK: nvvm.mbarrier.arrive

// One buffer: Q at 0, its barriers at fixed places, 32 KiB less.
// ONE-LABEL: func.func @causal
// ONE: dynamic_shared_memory_size %c164920_i32
// ONE-LABEL: gpu.func @kernel
// ONE-NOT: %c32768 = arith.constant 32768 : index
// ONE: gpu.return

// CHECK-LABEL: func.func @full
// CHECK: gpu.launch_func {{.*}} dynamic_shared_memory_size %c230472_i32
// ONE-LABEL: func.func @full
// ONE: dynamic_shared_memory_size %c230472_i32

// Forced: the causal kernel takes two buffers as with q-buffers=0; where they
// do not fit, the error names the option.
// FIT-DAG: dynamic_shared_memory_size %c197712_i32
// FIT-DAG: error: 'flash.attention' op convert-flash-to-gpu: the wgmma kernel's shared memory (2 Q buffers of 128 rows, 3 stages of 128-key K/V tiles at D = 128, Dv = 128) is {{[0-9]+}} bytes, more than the 232448 a CTA may have: lower block-n, block-m, stages or q-buffers
// BAD: q-buffers in [0, 2]

// PTX-LABEL: gpu.binary @flash_attention_0
// PTX: mbarrier.init.shared.b64 \09[%rd{{[0-9]+}}+196608], %r{{[0-9]+}};\0A\09mbarrier.init.shared.b64 \09[%rd{{[0-9]+}}+196616]

func.func @causal(%q: memref<8x16x1024x128xbf16>, %k: memref<8x16x1024x128xbf16>,
                  %v: memref<8x16x1024x128xbf16>, %o: memref<8x16x1024x128xbf16>) attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>)
         outs(%ot : tensor<8x16x1024x128xbf16>) scale(0.088) mask(causal) -> tensor<8x16x1024x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<8x16x1024x128xbf16>, memref<8x16x1024x128xbf16>) -> ()
  return
}

// -----

func.func @full(%q: memref<8x16x1024x128xbf16>, %k: memref<8x16x1024x128xbf16>,
                %v: memref<8x16x1024x128xbf16>, %o: memref<8x16x1024x128xbf16>) attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>)
         outs(%ot : tensor<8x16x1024x128xbf16>) scale(0.088) -> tensor<8x16x1024x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<8x16x1024x128xbf16>, memref<8x16x1024x128xbf16>) -> ()
  return
}
