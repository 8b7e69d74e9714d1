"""Call a kernel library's entry point with no usable CUDA driver: the runtime must
report an error string and status instead of crashing, and launch nothing."""
import ctypes as C
import sys

lib = C.CDLL(sys.argv[1])
lib.flashRuntimeGetLastError.restype = C.c_char_p
lib.flashRuntimeGetCounter.restype = C.c_int64
lib.flashRuntimeSetStream.argtypes = [C.c_void_p]


class D(C.Structure):
    _fields_ = [("a", C.c_void_p), ("b", C.c_void_p), ("off", C.c_int64),
                ("sizes", C.c_int64 * 1), ("strides", C.c_int64 * 1)]


bufs = [(C.c_float * 256)() for _ in range(2)]
ds = [D(C.addressof(b), C.addressof(b), 0, (C.c_int64 * 1)(256), (C.c_int64 * 1)(1)) for b in bufs]
lib._mlir_ciface_axpy(C.byref(ds[0]), C.byref(ds[1]), C.c_float(2.0))
print(f"status {lib.flashRuntimeGetStatus()}: {lib.flashRuntimeGetLastError().decode()}")
lib.flashRuntimeClearError()
print(f"after clear: status {lib.flashRuntimeGetStatus()}")
lib.flashRuntimeSetStream(C.c_void_p(0x1234))
lib._mlir_ciface_smem_copy(C.byref(ds[0]), C.byref(ds[1]), C.c_int32(4096))
print(f"set stream then call: status {lib.flashRuntimeGetStatus()}")
print("counters: " + " ".join(f"{n} {lib.flashRuntimeGetCounter(n.encode())}"
                              for n in ("launch", "stream_create", "module_load")))
