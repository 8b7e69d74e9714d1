// The runtime's contract with the driver, checked without a GPU: the kernel libraries
// built from runtime-kernels.mlir and Inputs/tma_qk.mlir run against a fake libcuda that
// records every driver call (Inputs/fake_cuda.c).
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cc -shared -fPIC -I%cuda_home/include %S/Inputs/fake_cuda.c -o %t/libfakecuda.so
// RUN: %python %flash_src_root/tools/flash-gpu-build.py %S/runtime-kernels.mlir -o %t/libruntime_kernels.so --runtime-dir %flash_lib_dir --bundle
// RUN: %python %flash_src_root/tools/flash-gpu-build.py %S/Inputs/tma_qk.mlir -o %t/libtma_qk.so --runtime-dir %flash_lib_dir --bundle
// RUN: %python %flash_src_root/tools/flash-gpu-build.py %S/Inputs/tma_qk.mlir -o %t/libtma_qk_param.so --runtime-dir %flash_lib_dir --bundle --opt-tool flash-opt --pipeline 'builtin.module(flash-lower-to-nvvm)'
// RUN: %python %flash_src_root/tools/flash-gpu-build.py %S/Inputs/decode_splitkv.mlir -o %t/libdecode_splitkv.so --runtime-dir %flash_lib_dir --bundle --opt-tool flash-opt --pipeline 'builtin.module(flash-gpu-pipeline{kernel=splitkv})'
// RUN: env FLASH_CUDA_DRIVER=%t/libfakecuda.so %python %S/Inputs/fake_driver_check.py %t | FileCheck %s

// Bound to a caller's stream: every launch goes there, no stream is created or
// synchronized, the module loads once.
// CHECK: bound x5: launches=5 stream=0xabc0 creates=0 syncs=0 loads=1 setattr=0 allocs=0 {{.*}} status=0
// Unbound: one runtime stream for the thread, created once; the host code's syncs honoured.
// CHECK-NEXT: unbound x3: launches=8 stream=0x5001 creates=1 syncs=3 loads=1 {{.*}} status=0
// flashRuntimeCall binds its last argument as the stream and launches there.
// CHECK-NEXT: call: status=0
// CHECK-NEXT: call x1: launches=9 stream=0xd00d0 creates=1 syncs=3 {{.*}} status=0
// CHECK-NEXT: call with 0 arguments: status=4
// CHECK-NEXT: call 0 args: launches=9 {{.*}} status=4 flashRuntimeCall: a function and 1 to 16 pointer arguments, the stream last (got 0)
// The >48 KiB shared-memory attribute is set once, not per launch; past the device's limit
// the call fails cleanly and launches nothing.
// CHECK-NEXT: smem 100K x3: launches=12 stream=0xabc0 creates=1 syncs=3 loads=1 setattr=1 {{.*}} status=0
// CHECK-NEXT: smem 300K: launches=12 {{.*}} status=5 kernel 'smem_copy' needs 307200 bytes of dynamic shared memory; device 0 'Fake H200' (sm_90) allows at most 232448
// CHECK-NEXT: wrong arch: launches=12 {{.*}} status=3 cannot load the kernel module (a cubin for sm_90) on device 0 'Fake H200' (sm_90): CUDA_ERROR_NO_BINARY_FOR_GPU; rebuild it
// A failed load is not cached (and its maps are never uploaded); TMA maps: one pool
// allocation, uploaded once, then hits.
// CHECK-NEXT: tma call 0: launches=13 stream=0xabc0 {{.*}} loads=2 setattr=1 allocs=1 htod=2/0 encodes=4 status=0
// CHECK-NEXT: tma call 1: launches=14 stream=0xabc0 {{.*}} allocs=1 htod=2/0 encodes=6 status=0
// CHECK-NEXT: tma misaligned: launches=14 {{.*}} status=4 TMA descriptor: base address 0x30000008 is not 16-byte aligned
// A new map inside a capture is uploaded asynchronously on the capturing stream; its
// first eager use rewrites it synchronously once, then it is a hit.
// CHECK-NEXT: tma captured: launches=15 stream=0xcafe0 {{.*}} allocs=1 htod=2/1 encodes=8 status=0
// CHECK-NEXT: captured upload stream=0xcafe0
// CHECK-NEXT: tma eager after capture: launches=16 {{.*}} htod=3/1 encodes=10 status=0
// CHECK-NEXT: tma eager again: launches=17 {{.*}} htod=3/1 encodes=12 status=0
// CHECK-NEXT: runtime counters: module_load=2 stream_create=1 launch=17 tensormap_upload=4 tensormap_hit=6 tensormap_param=0
// Through flash-lower-to-nvvm the kernel takes its maps by value: each launch carries
// their bytes (the fake's encoding starts with the base address), nothing is uploaded
// or allocated, and a buffer never seen before costs the same as the last one.
// CHECK-NEXT: by value 0x30000000: launches=18 {{.*}} allocs=1 htod=3/1 encodes=14 status=0
// CHECK-NEXT: params 0x30000000 0x30010000
// CHECK-NEXT: by value 0x30080000: launches=19 {{.*}} allocs=1 htod=3/1 encodes=16 status=0
// CHECK-NEXT: params 0x30080000 0x30010000
// CHECK-NEXT: by value 0x300c0000: launches=20 {{.*}} allocs=1 htod=3/1 encodes=18 status=0
// CHECK-NEXT: params 0x300c0000 0x30010000
// CHECK-NEXT: runtime counters: module_load=3 stream_create=1 launch=20 tensormap_upload=4 tensormap_hit=6 tensormap_param=6
// A 128-byte parameter the host code filled with anything but a map is refused.
// CHECK-NEXT: by value, no map: launches=20 {{.*}} status=4 parameter 0 of kernel '{{.+}}' is a 128-byte tensor map, but the host code passed no map encoded on this thread
// Arrival counters: 1024 at least, zeroed on the asking stream when allocated, reused
// as they are while they suffice, grown to twice (or to n) past that; one set per stream.
// CHECK-NEXT: split counters 0xabc0 n=100: p0 allocs+1 zeroed 1024 on 0xabc0 value 0 zeroed-here=True
// CHECK-NEXT: split counters 0xabc0 n=1024: p0 allocs+0 as is
// CHECK-NEXT: split counters 0xabc0 n=5000: p1 allocs+1 zeroed 5000 on 0xabc0 value 0 zeroed-here=True
// CHECK-NEXT: split counters 0xabc0 n=6000: p2 allocs+1 zeroed 10000 on 0xabc0 value 0 zeroed-here=True
// CHECK-NEXT: split counters 0xabc0 n=12000: p3 allocs+1 zeroed 20000 on 0xabc0 value 0 zeroed-here=True
// CHECK-NEXT: split counters 0xdef0 n=10: p4 allocs+1 zeroed 1024 on 0xdef0 value 0 zeroed-here=True
// CHECK-NEXT: split counters 0xabc0 n=7: p3 allocs+0 as is
// The split decode's split count (grid.x of its first launch; the combine follows):
// each launch site remembers its last question and answer, and a changed key length
// is a new question, never the old answer. A second site (a copy of the library)
// computes afresh what the first remembered.
// CHECK-NEXT: decode 4096 keys: grid.x=[[S4K:[0-9]+]] launches+2 status=0
// CHECK-NEXT: decode 4096 keys: grid.x=[[S4K]] launches+2 status=0
// CHECK-NEXT: decode 300 keys: grid.x=[[S300:[0-9]+]] launches+2 status=0
// CHECK-NEXT: decode 4096 keys: grid.x=[[S4K]] launches+2 status=0
// CHECK-NEXT: decode 130000 keys: grid.x=[[S130K:[0-9]+]] launches+2 status=0
// CHECK-NEXT: decode 300 keys: grid.x=[[S300]] launches+2 status=0
// CHECK-NEXT: fresh site 300 keys: grid.x=[[S300]] launches+2 status=0
// CHECK-NEXT: fresh site 4096 keys: grid.x=[[S4K]] launches+2 status=0
// CHECK-NEXT: fresh site 130000 keys: grid.x=[[S130K]] launches+2 status=0
