// What a score_mod costs per score in the wgmma kernel.
//
// A bias read from a capture at the score's (row, col) is loaded before the
// tile's QKᵀ is waited for (score-prefetch, on by default), once for the
// masked and the mask-free branch; score-prefetch=0 reads it where the score
// is modified. A read along the key index from global memory
// (stage-captures=0 here; staged tiles: convert-flash-to-gpu-staged-
// captures.mlir) is a predicated ld.global.nc at an immediate offset from
// the row's address (no clamp and no address arithmetic per score); a
// column past Lk reads nothing.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="stage-captures=0" | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="score-prefetch=0 stage-captures=0" | FileCheck %s --check-prefix=LATE
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa stage-captures=0" | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel({{.*}}, %[[BIAS:[a-z0-9]+]]: memref<300x200xbf16>
// CHECK: nvvm.wgmma.mma_async
// CHECK: memref.extract_strided_metadata %[[BIAS]]
// CHECK: llvm.inline_asm {{.*}}"mov.b16 $0, 0;\0A@$1 ld.global.nc.b16 $0, [$2+0];", "=h,b,l"
// CHECK: llvm.inline_asm {{.*}}ld.global.nc.b16 $0, [$2+2];"
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: ld.global.nc
// CHECK: scf.if
// CHECK-NOT: ld.global.nc
// CHECK: wgmma.mma_async.sync.aligned
// LATE-LABEL: gpu.module @flash_attention_0
// LATE: gpu.func @kernel({{.*}}, %[[BIAS:[a-z0-9]+]]: memref<300x200xbf16>
// LATE: nvvm.wgmma.wait.group.sync.aligned 0
// LATE: scf.if
// LATE: llvm.inline_asm {{.*}}ld.global.nc.b16
// LATE-NOT: memref.load %[[BIAS]]
// LATE: gpu.return
// PTX-LABEL: llvm.func @bias(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: @%p{{[0-9]+}} ld.global.nc.b16 %rs{{[0-9]+}}, [%rd{{[0-9]+}}+2];
// PTX-SAME: @%p{{[0-9]+}} ld.global.nc.b16 %rs{{[0-9]+}}, [%rd{{[0-9]+}}+16];
func.func @bias(%q: memref<2x300x64xbf16>, %k: memref<2x200x64xbf16>, %v: memref<2x200x64xbf16>,
                %o: memref<2x300x64xbf16>, %bias: memref<300x200xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %bt = bufferization.to_tensor %bias restrict : memref<300x200xbf16> to tensor<300x200xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x300x64xbf16>, tensor<2x200x64xbf16>, tensor<2x200x64xbf16>)
         outs(%ot : tensor<2x300x64xbf16>) captures(%bt : tensor<300x200xbf16>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bb: tensor<300x200xbf16>):
           %x = tensor.extract %bb[%i, %j] : tensor<300x200xbf16>
           %w = arith.extf %x : bf16 to f32
           %y = arith.addf %s, %w : f32
           flash.yield %y : f32
         } -> tensor<2x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x300x64xbf16>, memref<2x300x64xbf16>) -> ()
  return
}

// -----

// ALiBi's distance with static lengths: the indices' conversions to f32
// are f32 arithmetic on per-tile copies (an i32 conversion of each row and
// of the tile's column base), not a 64-bit integer conversion per score.
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel(
// CHECK-NOT: arith.sitofp {{.*}} : i64 to f32
// CHECK: arith.sitofp {{.*}} : i32 to f32
// CHECK-NOT: arith.sitofp {{.*}} : i64 to f32
// CHECK: arith.minnumf
// CHECK-NOT: arith.sitofp {{.*}} : i64 to f32
// CHECK: gpu.return
func.func @alibi(%q: memref<2x4x300x64xbf16>, %k: memref<2x4x200x64xbf16>, %v: memref<2x4x200x64xbf16>,
                 %o: memref<2x4x300x64xbf16>, %slopes: memref<4xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %st = bufferization.to_tensor %slopes restrict : memref<4xf32> to tensor<4xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x300x64xbf16>, tensor<2x4x200x64xbf16>, tensor<2x4x200x64xbf16>)
         outs(%ot : tensor<2x4x300x64xbf16>) captures(%st : tensor<4xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
           %e = tensor.extract %sl[%h] : tensor<4xf32>
           %d = arith.subi %i, %j : index
           %di = arith.index_cast %d : index to i64
           %df = arith.sitofp %di : i64 to f32
           %a = math.absf %df : f32
           %p = arith.mulf %e, %a : f32
           %y = arith.subf %s, %p : f32
           flash.yield %y : f32
         } -> tensor<2x4x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x300x64xbf16>, memref<2x4x300x64xbf16>) -> ()
  return
}

// -----

// With dynamic lengths nothing bounds the indices: the conversion stays.
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel(
// CHECK: arith.sitofp {{.*}} : i64 to f32
func.func @alibi_dynamic(%q: memref<2x?x64xbf16>, %k: memref<2x?x64xbf16>, %v: memref<2x?x64xbf16>,
                         %o: memref<2x?x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x?x64xbf16> to tensor<2x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x?x64xbf16> to tensor<2x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x?x64xbf16> to tensor<2x?x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x?x64xbf16> to tensor<2x?x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x?x64xbf16>, tensor<2x?x64xbf16>, tensor<2x?x64xbf16>)
         outs(%ot : tensor<2x?x64xbf16>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index):
           %d = arith.subi %i, %j : index
           %di = arith.index_cast %d : index to i64
           %df = arith.sitofp %di : i64 to f32
           %a = math.absf %df : f32
           %y = arith.subf %s, %a : f32
           flash.yield %y : f32
         } -> tensor<2x?x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x?x64xbf16>, memref<2x?x64xbf16>) -> ()
  return
}

// -----

// Soft-capping: with 16-bit operands tanh is the hardware's tanh.approx.f32
// (one instruction beside the softmax's ex2); with f32 operands the
// expansion through ex2 and an approximate division. The products by
// constants in a row are one multiply before the tanh (the scale by 1/30:
// 0.125 / 30); after it the cap, 30: the scores' max is taken in natural
// units and log2(e) goes into the exponent's FMA. Every f32 multiply and
// add may contract into an FMA.
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: %[[S:.*]] = arith.constant 0.0041666{{[0-9]*}} : f32
// CHECK-NEXT: %[[IN:.*]] = arith.mulf %{{.*}}, %[[S]] fastmath<contract> : f32
// CHECK-NEXT: %[[T:.*]] = llvm.inline_asm asm_dialect = att "tanh.approx.f32 $0, $1;", "=f,f" %[[IN]]
// CHECK-NEXT: arith.mulf %[[T]], %{{[a-z0-9_]+}} fastmath<contract> : f32
// CHECK: %[[L2E:.*]] = arith.constant 1.44269{{[0-9]*}} : f32
// CHECK: llvm.intr.fma(%{{.*}}, %[[L2E]], %{{.*}}) : (f32, f32, f32) -> f32
// CHECK-NOT: math.tanh
// CHECK-LABEL: gpu.module @flash_attention_1
// CHECK-NOT: tanh.approx
// CHECK: arith.divf {{.*}} fastmath<afn>
// CHECK-NOT: tanh.approx
func.func @softcap(%q: memref<2x300x64xbf16>, %k: memref<2x200x64xbf16>, %v: memref<2x200x64xbf16>,
                   %o: memref<2x300x64xbf16>, %q32: memref<2x300x64xf32>, %k32: memref<2x200x64xf32>,
                   %v32: memref<2x200x64xf32>, %o32: memref<2x300x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x300x64xbf16>, tensor<2x200x64xbf16>, tensor<2x200x64xbf16>)
         outs(%ot : tensor<2x300x64xbf16>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index):
           %c = arith.constant 30.0 : f32
           %x = arith.divf %s, %c : f32
           %t = math.tanh %x : f32
           %y = arith.mulf %t, %c : f32
           flash.yield %y : f32
         } -> tensor<2x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x300x64xbf16>, memref<2x300x64xbf16>) -> ()
  %qt2 = bufferization.to_tensor %q32 restrict : memref<2x300x64xf32> to tensor<2x300x64xf32>
  %kt2 = bufferization.to_tensor %k32 restrict : memref<2x200x64xf32> to tensor<2x200x64xf32>
  %vt2 = bufferization.to_tensor %v32 restrict : memref<2x200x64xf32> to tensor<2x200x64xf32>
  %ot2 = bufferization.to_tensor %o32 restrict writable : memref<2x300x64xf32> to tensor<2x300x64xf32>
  %r2 = flash.attention ins(%qt2, %kt2, %vt2 : tensor<2x300x64xf32>, tensor<2x200x64xf32>, tensor<2x200x64xf32>)
         outs(%ot2 : tensor<2x300x64xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index):
           %c = arith.constant 30.0 : f32
           %t = math.tanh %s : f32
           %y = arith.mulf %t, %c : f32
           %n = arith.divf %y, %s : f32
           flash.yield %n : f32
         } -> tensor<2x300x64xf32>
  bufferization.materialize_in_destination %r2 in restrict writable %o32 : (tensor<2x300x64xf32>, memref<2x300x64xf32>) -> ()
  return
}

// -----

// ALiBi under a causal mask written as a compare: the mask-free branch of a
// tile the mask shows whole inlines the region without its select (the
// index mask's live value), and its conversion is f32 arithmetic too.
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel(
// CHECK-NOT: arith.sitofp {{.*}} : i64 to f32
// CHECK: gpu.return
func.func @alibi_causal_compare(%q: memref<2x4x300x64xbf16>, %k: memref<2x4x200x64xbf16>, %v: memref<2x4x200x64xbf16>,
                                %o: memref<2x4x300x64xbf16>, %slopes: memref<4xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %st = bufferization.to_tensor %slopes restrict : memref<4xf32> to tensor<4xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x300x64xbf16>, tensor<2x4x200x64xbf16>, tensor<2x4x200x64xbf16>)
         outs(%ot : tensor<2x4x300x64xbf16>) captures(%st : tensor<4xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
           %e = tensor.extract %sl[%h] : tensor<4xf32>
           %d = arith.subi %i, %j : index
           %di = arith.index_cast %d : index to i64
           %df = arith.sitofp %di : i64 to f32
           %a = math.absf %df : f32
           %p = arith.mulf %e, %a : f32
           %y = arith.subf %s, %p : f32
           %ok = arith.cmpi sge, %i, %j : index
           %ninf = arith.constant 0xFF800000 : f32
           %m = arith.select %ok, %y, %ninf : f32
           flash.yield %m : f32
         } -> tensor<2x4x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x300x64xbf16>, memref<2x4x300x64xbf16>) -> ()
  return
}

// -----

// A boolean mask tensor is a byte per score, read the same way; a read
// whose last index is not the key (a transposed bias) keeps the clamped
// element load.
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel({{.*}}, %[[MASK:[a-z0-9]+]]: memref<300x200xi1>, %[[BT:[a-z0-9]+]]: memref<200x300xf32>
// CHECK: llvm.inline_asm {{.*}}ld.global.nc.u8 $0, [$2+1];", "=h,b,l"
// CHECK: arith.trunci {{.*}} : i16 to i1
// CHECK: memref.load %[[BT]]
// CHECK-NOT: memref.load %[[MASK]]
// CHECK: gpu.return
func.func @mask_and_transposed(%q: memref<2x300x64xbf16>, %k: memref<2x200x64xbf16>, %v: memref<2x200x64xbf16>,
                               %o: memref<2x300x64xbf16>, %mask: memref<300x200xi1>, %bias: memref<200x300xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %mt = bufferization.to_tensor %mask restrict : memref<300x200xi1> to tensor<300x200xi1>
  %bt = bufferization.to_tensor %bias restrict : memref<200x300xf32> to tensor<200x300xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x300x64xbf16>, tensor<2x200x64xbf16>, tensor<2x200x64xbf16>)
         outs(%ot : tensor<2x300x64xbf16>) captures(%mt, %bt : tensor<300x200xi1>, tensor<200x300xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %m: tensor<300x200xi1>, %t: tensor<200x300xf32>):
           %keep = tensor.extract %m[%i, %j] : tensor<300x200xi1>
           %w = tensor.extract %t[%j, %i] : tensor<200x300xf32>
           %y = arith.addf %s, %w : f32
           %ninf = arith.constant 0xFF800000 : f32
           %z = arith.select %keep, %y, %ninf : f32
           flash.yield %z : f32
         } -> tensor<2x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x300x64xbf16>, memref<2x300x64xbf16>) -> ()
  return
}
