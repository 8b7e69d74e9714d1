"""Drive kernel libraries against the fake libcuda (fake_cuda.c) and print what the
runtime asked the driver to do: the stream contract (launch on the bound stream, no
per-call stream creation/synchronization/allocation), module and attribute caching, the
TMA descriptor cache (eager and captured uploads) and the error paths."""
import ctypes as C
import sys

d = sys.argv[1]
fake = C.CDLL(f"{d}/libfakecuda.so")  # same handle the runtime dlopens (FLASH_CUDA_DRIVER)


class Stats(C.Structure):
    _fields_ = [(n, C.c_int64) for n in (
        "launches", "stream_creates", "stream_syncs", "module_loads", "func_set_attr",
        "mem_allocs", "htod_sync", "htod_async", "tensormap_encodes")] + [
        ("last_launch_stream", C.c_void_p), ("last_htod_async_stream", C.c_void_p),
        ("last_launch_param_words", C.c_uint64 * 4), ("memsets", C.c_int64),
        ("last_memset_ptr", C.c_void_p), ("last_memset_n", C.c_uint64),
        ("last_memset_value", C.c_uint32), ("last_memset_stream", C.c_void_p)]


fake.fakeStats.restype = C.POINTER(Stats)
st = fake.fakeStats().contents
fake.fakeSetCapturingStream.argtypes = [C.c_void_p]


def load(name):
    lib = C.CDLL(f"{d}/lib{name}.so")
    lib.flashRuntimeGetLastError.restype = C.c_char_p
    lib.flashRuntimeSetStream.argtypes = [C.c_void_p]
    lib.flashRuntimeGetCounter.restype = C.c_int64
    return lib


def desc(addr, sizes):
    r = len(sizes)
    strides, s = [], 1
    for n in reversed(sizes):
        strides.insert(0, s)
        s *= n
    D = type("D", (C.Structure,), {"_fields_": [("a", C.c_void_p), ("b", C.c_void_p), ("o", C.c_int64),
                                                ("s", C.c_int64 * r), ("t", C.c_int64 * r)]})
    return D(addr, addr, 0, (C.c_int64 * r)(*sizes), (C.c_int64 * r)(*strides))


def show(tag, lib):
    err = lib.flashRuntimeGetLastError().decode()
    print(f"{tag}: launches={st.launches} stream={st.last_launch_stream and hex(st.last_launch_stream)} "
          f"creates={st.stream_creates} syncs={st.stream_syncs} loads={st.module_loads} "
          f"setattr={st.func_set_attr} allocs={st.mem_allocs} htod={st.htod_sync}/{st.htod_async} "
          f"encodes={st.tensormap_encodes} status={lib.flashRuntimeGetStatus()} {err}")
    lib.flashRuntimeClearError()


rk = load("runtime_kernels")
x, y = desc(0x10000000, [1000]), desc(0x20000000, [1000])
rk.flashRuntimeSetStream(C.c_void_p(0xABC0))
for _ in range(5):
    rk._mlir_ciface_axpy(C.byref(x), C.byref(y), C.c_float(2.0))
show("bound x5", rk)
rk.flashRuntimeResetStream()
for _ in range(3):
    rk._mlir_ciface_axpy(C.byref(x), C.byref(y), C.c_float(2.0))
show("unbound x3", rk)
# flashRuntimeCall: bind the last argument as the stream, call, return the
# status; an argument count out of range is refused before anything runs.
rk.flashRuntimeResetStream()
argv = (C.c_void_p * 3)(C.addressof(x), C.addressof(y), 0xD00D0)
fn = C.cast(rk._mlir_ciface_add_on_stream, C.c_void_p)
print(f"call: status={rk.flashRuntimeCall(0, fn, 3, argv)}")
show("call x1", rk)
print(f"call with 0 arguments: status={rk.flashRuntimeCall(0, fn, 0, argv)}")
show("call 0 args", rk)
rk.flashRuntimeSetStream(C.c_void_p(0xABC0))
xs, ys = desc(0x10000000, [1024]), desc(0x20000000, [1024])
for _ in range(3):
    rk._mlir_ciface_smem_copy(C.byref(xs), C.byref(ys), C.c_int32(100 * 1024))
show("smem 100K x3", rk)
rk._mlir_ciface_smem_copy(C.byref(xs), C.byref(ys), C.c_int32(300 * 1024))
show("smem 300K", rk)

tq = load("tma_qk")
q, k, s = desc(0x30000000, [64, 64]), desc(0x30010000, [64, 64]), desc(0x30020000, [64, 64])
fake.fakeFailModuleLoad(1)
tq._mlir_ciface_tma_qk(C.byref(q), C.byref(k), C.byref(s))
show("wrong arch", tq)
fake.fakeFailModuleLoad(0)
for i in range(2):
    tq._mlir_ciface_tma_qk(C.byref(q), C.byref(k), C.byref(s))
    show(f"tma call {i}", tq)
bad = desc(0x30000008, [64, 64])
tq._mlir_ciface_tma_qk(C.byref(bad), C.byref(k), C.byref(s))
show("tma misaligned", tq)
fake.fakeSetCapturingStream(C.c_void_p(0xCAFE0))
tq.flashRuntimeSetStream(C.c_void_p(0xCAFE0))
q2 = desc(0x30040000, [64, 64])
tq._mlir_ciface_tma_qk(C.byref(q2), C.byref(k), C.byref(s))
show("tma captured", tq)
print(f"captured upload stream={hex(st.last_htod_async_stream)}")
fake.fakeSetCapturingStream(C.c_void_p(0))
tq._mlir_ciface_tma_qk(C.byref(q2), C.byref(k), C.byref(s))
show("tma eager after capture", tq)
tq._mlir_ciface_tma_qk(C.byref(q2), C.byref(k), C.byref(s))
show("tma eager again", tq)


def counters(lib):
    return " ".join(f"{n}={lib.flashRuntimeGetCounter(n.encode())}" for n in
                    ("module_load", "stream_create", "launch", "tensormap_upload",
                     "tensormap_hit", "tensormap_param"))


print("runtime counters: " + counters(tq))
# The by-value kernel's parameters as the driver reports them: the two maps, then the
# output memref's descriptor (pointers and i64s).
sizes = [128, 128] + [8] * 7
fake.fakeSetParamSizes((C.c_size_t * len(sizes))(*sizes), len(sizes))
tp = load("tma_qk_param")
tp.flashRuntimeSetStream(C.c_void_p(0xABC0))
for base in (0x30000000, 0x30080000, 0x300C0000):
    tp._mlir_ciface_tma_qk(C.byref(desc(base, [64, 64])), C.byref(k), C.byref(s))
    show(f"by value {hex(base)}", tp)
    print("params " + " ".join(hex(w) for w in st.last_launch_param_words[:2]))
print("runtime counters: " + counters(tp))
# A kernel whose first parameter the driver reports as 128 bytes, given a pointer
# there by its host code (the axpy kernel, its sizes first asked now): refused, not
# a read past the pointer.
sizes = [128] + [8] * 9 + [4, 8]
fake.fakeSetParamSizes((C.c_size_t * len(sizes))(*sizes), len(sizes))
rk.flashRuntimeSetStream(C.c_void_p(0xABC0))
rk._mlir_ciface_axpy(C.byref(x), C.byref(y), C.c_float(2.0))
show("by value, no map", rk)

# The split decode's arrival counters: per stream, zeroed on that stream when new or
# grown (geometrically), then handed out as they are: the kernels leave them at zero.
rk.flashRuntimeSplitCounters.restype = C.c_void_p
rk.flashRuntimeSplitCounters.argtypes = [C.c_void_p, C.c_int64]
seen = {}


def split_counters(stream, n):
    allocs, memsets = st.mem_allocs, st.memsets
    p = rk.flashRuntimeSplitCounters(C.c_void_p(stream), n)
    name = seen.setdefault(p, f"p{len(seen)}")
    zeroed = (f"zeroed {st.last_memset_n} on {hex(st.last_memset_stream)} value "
              f"{st.last_memset_value}" if st.memsets > memsets else "as is")
    print(f"split counters {hex(stream)} n={n}: {name} allocs+{st.mem_allocs - allocs} "
          f"{zeroed} zeroed-here={st.last_memset_ptr == p}")


split_counters(0xABC0, 100)
split_counters(0xABC0, 1024)
split_counters(0xABC0, 5000)
split_counters(0xABC0, 6000)
split_counters(0xABC0, 12000)
split_counters(0xDEF0, 10)
split_counters(0xABC0, 7)

# The split decode's host code (Inputs/decode_splitkv.mlir, dynamic key length) on a
# device of 132 SMs: the split count is its kernel's grid.x. Each launch site keeps its
# last question and answer; a copy of the library is a second site, whose first call
# must give what the first library computed for the same keys.
fake.fakeSetParamSizes(None, 0)
fake.fakeLaunchGridX.argtypes = [C.POINTER(C.c_uint), C.c_int]


def decode_splits(lib, keys):
    before = st.launches
    q, o = desc(0x40000000, [1, 8, 1, 128]), desc(0x40100000, [1, 8, 1, 128])
    k, v = desc(0x41000000, [1, 1, keys, 128]), desc(0x50000000, [1, 1, keys, 128])
    lib._mlir_ciface_decode(C.byref(q), C.byref(k), C.byref(v), C.byref(o),
                            C.c_void_p(0xABC0))
    grids = (C.c_uint * st.launches)()
    fake.fakeLaunchGridX(grids, st.launches)
    err = lib.flashRuntimeGetLastError().decode()
    return (f"grid.x={grids[before]} launches+{st.launches - before} "
            f"status={lib.flashRuntimeGetStatus()} {err}")


import shutil  # noqa: E402
shutil.copy(f"{d}/libdecode_splitkv.so", f"{d}/libdecode_splitkv_copy.so")
dk, dk2 = load("decode_splitkv"), load("decode_splitkv_copy")
for keys in (4096, 4096, 300, 4096, 130000, 300):
    print(f"decode {keys} keys: {decode_splits(dk, keys)}")
for keys in (300, 4096, 130000):
    print(f"fresh site {keys} keys: {decode_splits(dk2, keys)}")
