"""ctypes launcher for kernel libraries built by tools/flash-gpu-build.py.

A kernel library exports `_mlir_ciface_<f>` for each host function; memref arguments
are passed as pointers to MLIR ranked memref descriptors
    { T *allocated; T *aligned; int64 offset; int64 sizes[rank]; int64 strides[rank]; }
built here from torch CUDA tensors (sizes/strides in elements, as torch reports them).
Each call binds the runtime to torch's current stream, so it is asynchronous, can be
timed with CUDA events and captured in a CUDA graph. Runtime errors (no driver, wrong
architecture, bad pointers) raise FlashRuntimeError with the runtime's message.

Needs only ctypes at import; torch is imported lazily by the tensor helpers.
"""
import ctypes
import os

__all__ = ["FlashRuntimeError", "KernelLibrary", "current_stream_handle", "memref_descriptor"]


class FlashRuntimeError(RuntimeError):
    """An error reported by libflash_cuda_runtime; .status holds its FlashRuntimeStatus."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


_DESC_TYPES = {}


def _desc_type(rank):
    t = _DESC_TYPES.get(rank)
    if t is None:
        t = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": [
            ("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
            ("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]})
        _DESC_TYPES[rank] = t
    return t


def memref_descriptor(ptr, sizes, strides, offset=0):
    """A ranked memref descriptor for device (or host) memory at `ptr`."""
    rank = len(sizes)
    return _desc_type(rank)(ptr, ptr, offset, (ctypes.c_int64 * rank)(*sizes),
                            (ctypes.c_int64 * rank)(*strides))


class KernelLibrary:
    """A kernel shared library and the runtime it links (one copy per process).

    The runtime's functions are looked up through the kernel library's own handle,
    so they are the exact copy its mgpu* calls go to (a second dlopen of the runtime
    by another path would have its own thread-local stream binding)."""

    def __init__(self, path, alignment=16):
        self.path = os.path.abspath(path)
        self.alignment = alignment
        self.lib = ctypes.CDLL(self.path)  # runs the module "load": records the blob only
        rt = self.lib
        rt.flashRuntimeGetLastError.restype = ctypes.c_char_p
        rt.flashRuntimeGetStatus.restype = ctypes.c_int
        rt.flashRuntimeSetStream.argtypes = [ctypes.c_void_p]
        rt.flashRuntimeSetDevice.argtypes = [ctypes.c_int]
        rt.flashRuntimeCheckPointer.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p]
        rt.flashRuntimeGetCounter.argtypes = [ctypes.c_char_p]
        rt.flashRuntimeGetCounter.restype = ctypes.c_int64
        self._entries = {}

    # -- runtime state ----------------------------------------------------------
    def _raise_if_error(self):
        status = self.lib.flashRuntimeGetStatus()
        if status:
            msg = self.lib.flashRuntimeGetLastError().decode(errors="replace")
            self.lib.flashRuntimeClearError()
            raise FlashRuntimeError(msg, status)

    def init(self):
        """Load the driver and pick a context now (raises if there is none)."""
        self.lib.flashRuntimeClearError()
        self.lib.flashRuntimeInit()
        self._raise_if_error()

    def counter(self, name):
        return self.lib.flashRuntimeGetCounter(name.encode())

    def set_stream(self, stream_handle, device=None):
        if device is not None:
            self.lib.flashRuntimeSetDevice(int(device))
        self.lib.flashRuntimeSetStream(ctypes.c_void_p(stream_handle))

    # -- calls -------------------------------------------------------------------
    def entry(self, name):
        """The C-interface entry point of host function `name`."""
        fn = self._entries.get(name)
        if fn is None:
            try:
                fn = getattr(self.lib, "_mlir_ciface_" + name)
            except AttributeError:
                raise FlashRuntimeError(
                    f"{self.path} has no entry point '_mlir_ciface_{name}' (is the host function "
                    f"marked llvm.emit_c_interface?)", 4) from None
            fn.restype = None
            self._entries[name] = fn
        return fn

    def _tensor_arg(self, t, what):
        if not t.is_cuda:
            raise FlashRuntimeError(f"{what}: expected a CUDA tensor, got one on {t.device}", 4)
        ptr = t.data_ptr()
        if t.numel() and not ptr:
            raise FlashRuntimeError(f"{what}: null data pointer", 4)
        if ptr % self.alignment:
            raise FlashRuntimeError(
                f"{what}: data pointer {ptr:#x} is not {self.alignment}-byte aligned "
                f"(storage offset {t.storage_offset()})", 4)
        return memref_descriptor(ptr, list(t.shape), list(t.stride()))

    def call_raw(self, name, *args):
        """Call `_mlir_ciface_<name>` with ctypes arguments, on whatever stream is bound."""
        self.lib.flashRuntimeClearError()
        self.entry(name)(*args)
        self._raise_if_error()

    def __call__(self, name, *args, stream=None, pass_stream=False):
        """Call host function `name` on torch's current stream (or `stream`).

        Tensor arguments become memref descriptors (pass contiguous, 16-byte aligned
        CUDA tensors), Python ints become int64 (index) and floats f32. With
        pass_stream, the stream handle is appended as a last pointer argument (the
        convention of convert-flash-to-gpu's host functions)."""
        import torch

        cargs, keep = [], []
        device = None
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                d = self._tensor_arg(a, f"argument {i} of {name}")
                device = a.device if device is None else device
                if a.device != device:
                    raise FlashRuntimeError(f"argument {i} of {name} is on {a.device}, others on {device}", 4)
                keep.append(d)
                cargs.append(ctypes.byref(d))
            elif isinstance(a, bool) or isinstance(a, int):
                cargs.append(ctypes.c_int64(int(a)))
            elif isinstance(a, float):
                cargs.append(ctypes.c_float(a))
            else:
                cargs.append(a)
        if stream is None:
            dev = device if device is not None else torch.device("cuda", torch.cuda.current_device())
            stream = torch.cuda.current_stream(dev)
        self.set_stream(stream.cuda_stream, stream.device.index)
        if pass_stream:
            cargs.append(ctypes.c_void_p(stream.cuda_stream))
        self.call_raw(name, *cargs)

    def launcher(self, name, ranks, shapes=None):
        """A fast caller of host function `name` for tensors of these ranks
        followed by the stream: `launch(tensors, stream, device)` binds the raw
        stream handle `stream` (an int, see current_stream_handle) on device
        ordinal `device` and calls, raising FlashRuntimeError on failure. The
        runtime's error state is clear between calls (a failure raises and
        clears it), so no call clears it first.

        The memref descriptors and ctypes argument list are built once per
        thread, so a launch costs a few field stores instead of constructing
        ctypes structures (the bulk of a call's host time otherwise). With
        `shapes` (a kernel compiled for these static shapes, called only with
        contiguous tensors of them) the sizes and row-major strides are
        written once too and a call stores only the pointers; otherwise they
        are rewritten from each tensor."""
        import threading
        fn = self.entry(name)
        local = threading.local()
        lib, alignment = self.lib, self.alignment
        # One foreign call per launch: flashRuntimeCall binds the stream (the
        # last argument) and the device, calls the host function and returns
        # the status. Its arguments go without argtypes conversion: the
        # device and the count as C ints, the function and the argument
        # array as prebuilt ctypes objects.
        call = lib.flashRuntimeCall
        call.restype = ctypes.c_int
        function = ctypes.c_void_p(ctypes.cast(fn, ctypes.c_void_p).value)
        nargs = len(ranks) + 1

        def new_state():
            descs = [_desc_type(r)() for r in ranks]
            if shapes is not None:
                for d, shape in zip(descs, shapes):
                    d.sizes[:] = shape
                    stride = 1
                    for i in reversed(range(len(shape))):
                        d.strides[i] = stride
                        stride *= max(shape[i], 1)
            argv = (ctypes.c_void_p * nargs)(*[ctypes.addressof(d) for d in descs], None)
            local.state = (descs, argv)
            return local.state

        def misaligned(i, t, ptr):
            return FlashRuntimeError(
                f"argument {i} of {name}: data pointer {ptr:#x} is not {alignment}-byte "
                f"aligned (storage offset {t.storage_offset()})", 4)

        static = shapes is not None
        last = nargs - 1

        def launch(tensors, stream, device):
            descs, argv = getattr(local, "state", None) or new_state()
            for i, (d, t) in enumerate(zip(descs, tensors)):
                ptr = t.data_ptr()
                if ptr % alignment:
                    raise misaligned(i, t, ptr)
                d.allocated = d.aligned = ptr
                if not static:
                    d.sizes[:] = t.shape
                    d.strides[:] = t.stride()
            # The runtime's stream binding is per thread and shared by every
            # kernel library of the process: bound on every call.
            argv[last] = stream
            if call(device, function, nargs, argv):
                self._raise_if_error()

        return launch


def current_stream_handle(device):
    """The raw handle of torch's current stream on CUDA device ordinal `device`
    (without constructing a torch.cuda.Stream, a few microseconds per call)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream
