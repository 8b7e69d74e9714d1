"""ctypes binding of libFlashCAPI (include/flash-c/Flash.h).

The library is found, in order, through $FLASH_MLIR_CAPI (the .so itself),
$FLASH_MLIR_LIB_DIR, the package's own lib/ (a `pip install .`), the build
tree next to this source tree (build/lib) and an installed prefix
(<prefix>/lib next to <prefix>/python/flash_mlir).
"""
import ctypes
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAME = "libFlashCAPI.so"

# FlashOutputKind
OUTPUT_KINDS = {
    "mlir": 0,
    "llvm": 1,
    "object": 2,
    "assembly": 3,
    "ptx": 4,
    "cubin": 5,
    "bytecode": 6,
}
TEXT_KINDS = {"mlir", "llvm", "assembly", "ptx"}


class FlashError(RuntimeError):
    """A compilation error; the message carries the MLIR diagnostics."""

    def __init__(self, message, diagnostics=None):
        super().__init__(message)
        self.diagnostics = diagnostics if diagnostics is not None else message


class _String(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


def _candidates():
    env = os.environ.get("FLASH_MLIR_CAPI")
    if env:
        yield env
    libdir = os.environ.get("FLASH_MLIR_LIB_DIR")
    if libdir:
        yield os.path.join(libdir, _NAME)
    yield os.path.join(_HERE, "lib", _NAME)
    root = os.path.dirname(os.path.dirname(_HERE))
    build = os.environ.get("FLASH_MLIR_BUILD_DIR", os.path.join(root, "build"))
    yield os.path.join(build, "lib", _NAME)
    yield os.path.join(root, "lib", _NAME)


def library_path():
    """Path of the libFlashCAPI.so this package uses."""
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return os.path.abspath(path)
        tried.append(path)
    raise FlashError("flash_mlir: libFlashCAPI.so not found; build flash-mlir or "
                     "set FLASH_MLIR_LIB_DIR (tried: %s)" % ", ".join(tried))


_lib = None
_lib_error = None
_lock = threading.Lock()


def available():
    """Whether the compiler (libFlashCAPI and the libMLIR it links) loads here.
    Without it, only kernels already in the cache can run (flash_mlir.prebuild
    makes them on a machine that has the compiler)."""
    try:
        lib()
        return True
    except (FlashError, OSError):
        return False


def unavailable_reason():
    """Why available() is False ('' when it is True)."""
    try:
        lib()
        return ""
    except (FlashError, OSError) as e:
        return str(e)


def lib():
    global _lib, _lib_error
    with _lock:
        if _lib is None:
            if _lib_error is not None:
                raise _lib_error
            path = library_path()
            try:
                L = ctypes.CDLL(path)
            except OSError as e:
                # Remembered: a failed dlopen (no libMLIR here) is not retried on every call.
                _lib_error = FlashError("flash_mlir: cannot load %s: %s" % (path, e))
                raise _lib_error from None
            L.flashVersion.restype = ctypes.c_char_p
            L.flashHostTarget.restype = ctypes.c_char_p
            L.flashIsRegisteredPass.argtypes = [ctypes.c_char_p]
            L.flashIsRegisteredPass.restype = ctypes.c_int
            L.flashContextCreate.restype = ctypes.c_void_p
            L.flashContextDestroy.argtypes = [ctypes.c_void_p]
            L.flashModuleParse.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                           ctypes.c_char_p, ctypes.POINTER(_String)]
            L.flashModuleParse.restype = ctypes.c_void_p
            L.flashModuleDestroy.argtypes = [ctypes.c_void_p]
            L.flashModuleRunPipeline.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                                 ctypes.POINTER(_String)]
            L.flashModuleEmit.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                          ctypes.POINTER(_String), ctypes.POINTER(_String)]
            L.flashStringDestroy.argtypes = [ctypes.POINTER(_String)]
            for fn in (L.flashModuleRunPipeline, L.flashModuleEmit):
                fn.restype = ctypes.c_int
            _lib = L
        return _lib


def _take(s):
    """Bytes of a FlashString, which is then freed."""
    if not s.data:
        return b""
    try:
        return ctypes.string_at(s.data, s.size)
    finally:
        lib().flashStringDestroy(ctypes.byref(s))


def version():
    return lib().flashVersion().decode()


_build_id = None


def build_id():
    """Hash of the C API library, which links every flash pass statically:
    it changes whenever the compiler does, even at the same version."""
    global _build_id
    if _build_id is None:
        import hashlib
        with open(library_path(), "rb") as f:
            _build_id = hashlib.sha256(f.read()).hexdigest()[:16]
    return _build_id


def host_target():
    return lib().flashHostTarget().decode()


def is_registered(name):
    return bool(lib().flashIsRegisteredPass(name.encode()))


class Context:
    """A FlashContext; modules parsed in it are freed with it."""

    def __init__(self):
        self._ptr = lib().flashContextCreate()
        if not self._ptr:
            raise FlashError("flash_mlir: could not create a context")

    def close(self):
        if self._ptr:
            lib().flashContextDestroy(self._ptr)
            self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def parse(self, text, name=None):
        data = text.encode() if isinstance(text, str) else bytes(text)
        err = _String()
        ptr = lib().flashModuleParse(self._ptr, data, len(data),
                                     name.encode() if name else None, ctypes.byref(err))
        if not ptr:
            msg = _take(err).decode(errors="replace")
            raise FlashError(msg.rstrip() or "flash_mlir: parse failed", msg)
        return Module(self, ptr)


class Module:
    def __init__(self, context, ptr):
        self.context = context  # keeps the context alive
        self._ptr = ptr

    def close(self):
        if self._ptr and self.context._ptr:
            lib().flashModuleDestroy(self._ptr)
        self._ptr = None

    def run(self, pipeline, options=""):
        err = _String()
        rc = lib().flashModuleRunPipeline(self._ptr, pipeline.encode(),
                                          (options or "").encode(), ctypes.byref(err))
        if rc:
            msg = _take(err).decode(errors="replace")
            raise FlashError(msg.rstrip(), msg)

    def emit(self, kind="mlir", opt_level=2):
        if kind not in OUTPUT_KINDS:
            raise ValueError("output must be one of %s, got %r" % (sorted(OUTPUT_KINDS), kind))
        out, err = _String(), _String()
        rc = lib().flashModuleEmit(self._ptr, OUTPUT_KINDS[kind], int(opt_level),
                                   ctypes.byref(out), ctypes.byref(err))
        if rc:
            msg = _take(err).decode(errors="replace")
            raise FlashError(msg.rstrip(), msg)
        data = _take(out)
        return data.decode() if kind in TEXT_KINDS else data
