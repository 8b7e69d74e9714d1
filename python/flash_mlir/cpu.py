"""Host execution: link a compiled object into a shared library and call its
C-interface entry points on NumPy arrays."""
import ctypes
import os
import shutil
import subprocess
import tempfile

from ._capi import FlashError
from .gpu import memref_descriptor

# flash-cpu-pipeline maps the query-block loop to OpenMP (libomp's __kmpc ABI).
LIBOMP_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/libomp.so.5",
    "/usr/lib/llvm-22/lib/libomp.so",
]


def find_libomp():
    for path in LIBOMP_CANDIDATES:
        if os.path.exists(path):
            return path
    return None


def link_shared(obj, out_path, libs=(), rpaths=()):
    """Links object bytes into the shared library `out_path` with the system
    C compiler ($CC, else cc)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise FlashError("flash_mlir: no C compiler (cc) to link the compiled object")
    with tempfile.TemporaryDirectory(prefix="flash-link-") as tmp:
        o = os.path.join(tmp, "module.o")
        with open(o, "wb") as f:
            f.write(obj)
        cmd = [cc, "-shared", "-o", out_path, o, "-Wl,--no-undefined", "-lm", *libs]
        cmd += ["-Wl,-rpath," + r for r in rpaths]
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if res.returncode:
            raise FlashError("flash_mlir: linking failed: %s\n%s" % (" ".join(cmd), res.stderr))


def link_host_object(obj, out_path):
    libs = []
    if b"__kmpc_" in obj:
        omp = find_libomp()
        if not omp:
            raise FlashError("flash_mlir: the module uses OpenMP but libomp was not found "
                             "(install libomp5, or compile with parallel=False)")
        libs.append(omp)
    link_shared(obj, out_path, libs)


class HostLibrary:
    """A compiled shared library; `call(name, *arrays)` runs
    `_mlir_ciface_<name>` with one memref descriptor per array (in place:
    destination arrays are written)."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)

    def call(self, name, *arrays):
        try:
            fn = getattr(self.lib, "_mlir_ciface_" + name)
        except AttributeError:
            raise FlashError("%s has no entry point _mlir_ciface_%s" % (self.path, name)) from None
        fn.restype = None
        descs = []
        for a in arrays:
            if not a.flags.c_contiguous:
                raise ValueError("arrays passed to compiled code must be C-contiguous")
            descs.append(memref_descriptor(a.ctypes.data, list(a.shape),
                                           [s // a.itemsize for s in a.strides]))
        fn(*[ctypes.byref(d) for d in descs])
