"""Compile MLIR with flash-opt's CPU pipeline into a shared library and call it.

The executable twin of any lit test: `compile_module` runs
    flash-opt --flash-cpu-pipeline | mlir-translate --mlir-to-llvmir
      | opt -O3 | llc -O3 | cc -shared
and `Library.call` invokes a function (declared with `llvm.emit_c_interface`)
on NumPy arrays through ctypes, passing ranked memref descriptors and reading
back memref results. bf16 arrays travel as uint16 (see `to_bf16`/`from_bf16`).
Only /usr/bin/python3 with NumPy is needed.
"""
import ctypes
import os
import shutil
import subprocess
import tempfile

import numpy as np

LIBOMP_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/libomp.so.5",
    "/usr/lib/llvm-22/lib/libomp.so",
    "/usr/lib/llvm-14/lib/libomp.so",
]


def find_libomp():
    for path in LIBOMP_CANDIDATES:
        if os.path.exists(path):
            return path
    return None


class Tools:
    """Paths of the programs the compile step runs."""

    def __init__(self, flash_opt=None, llvm_bin=None):
        self.flash_opt = flash_opt or os.environ.get("FLASH_OPT") or shutil.which(
            "flash-opt")
        llvm_bin = llvm_bin or os.environ.get("LLVM_TOOLS_DIR", "/usr/lib/llvm-22/bin")
        self.mlir_translate = os.path.join(llvm_bin, "mlir-translate")
        self.opt = os.path.join(llvm_bin, "opt")
        self.llc = os.path.join(llvm_bin, "llc")
        self.cc = shutil.which("cc") or "cc"
        if not self.flash_opt:
            raise RuntimeError("flash-opt not found: pass it or set FLASH_OPT")


def _run(cmd, stdin_bytes=None):
    res = subprocess.run(cmd, input=stdin_bytes, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise RuntimeError("command failed: %s\n%s" %
                           (" ".join(cmd), res.stderr.decode(errors="replace")))
    return res.stdout


def compile_module(mlir_text, pipeline_options="", tools=None, workdir=None,
                   parallel=True, cpu="native"):
    """Compiles `mlir_text` (flash.attention on tensors, in func.func) to a
    shared library and returns it loaded, as a `Library`. The arguments are
    those of `build_library`."""
    return Library(build_library(mlir_text, pipeline_options, tools, workdir,
                                 parallel, cpu)[0])


def build_library(mlir_text, pipeline_options="", tools=None, workdir=None,
                  parallel=True, cpu="native"):
    """Compiles `mlir_text` to a shared library without loading it; returns
    the paths of (library, object). `pipeline_options` is the option
    string of flash-cpu-pipeline, e.g. "reference=1 block-q=32". `cpu` is
    llc's -mcpu: "x86-64" builds for the baseline ISA (no F16C, no
    AVX512-BF16), where LLVM would call conversion builtins."""
    tools = tools or Tools()
    workdir = workdir or tempfile.mkdtemp(prefix="flash-cpu-")
    opts = pipeline_options
    if find_libomp() is None:
        parallel = False
    if not parallel and "parallel=" not in opts:
        opts = (opts + " parallel=0").strip()
    llvm_dialect = _run([tools.flash_opt, "--flash-cpu-pipeline=" + opts],
                        mlir_text.encode())
    llvm_ir = _run([tools.mlir_translate, "--mlir-to-llvmir"], llvm_dialect)
    triple = ["-mtriple=x86_64-unknown-linux-gnu", "-mcpu=" + cpu]
    bitcode = _run([tools.opt, "-O3"] + triple + ["-o", "-"], llvm_ir)
    obj = os.path.join(workdir, "module.o")
    _run([tools.llc, "-O3", "-relocation-model=pic", "-filetype=obj"] + triple +
         ["-o", obj], bitcode)
    lib = os.path.join(workdir, "module.so")
    link = [tools.cc, "-shared", "-o", lib, obj, "-lm"]
    omp = find_libomp()
    if omp and "parallel=0" not in opts:
        link.append(omp)
    _run(link)
    return lib, obj


# ---------------------------------------------------------------------------
# Memref descriptors.

_CTYPE = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.float16): ctypes.c_uint16,
    np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.bool_): ctypes.c_int8,
}

_DESC_CACHE = {}


def descriptor_type(rank):
    """ctypes struct of a ranked memref descriptor (element type erased)."""
    if rank not in _DESC_CACHE:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_int64)]
        if rank > 0:
            fields += [("sizes", ctypes.c_int64 * rank),
                       ("strides", ctypes.c_int64 * rank)]
        _DESC_CACHE[rank] = type("MemRef%dD" % rank, (ctypes.Structure,),
                                 {"_fields_": fields})
    return _DESC_CACHE[rank]


def to_descriptor(array):
    array = np.ascontiguousarray(array)
    desc = descriptor_type(array.ndim)()
    desc.allocated = desc.aligned = array.ctypes.data
    desc.offset = 0
    for d in range(array.ndim):
        desc.sizes[d] = array.shape[d]
        desc.strides[d] = array.strides[d] // array.itemsize
    return desc, array


def from_descriptor(desc, rank, dtype):
    """Copies the memref that `desc` describes into a new NumPy array."""
    dtype = np.dtype(dtype)
    shape = [desc.sizes[d] for d in range(rank)]
    strides = [desc.strides[d] for d in range(rank)]
    if any(s == 0 for s in shape):
        return np.zeros(shape, dtype)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    base = desc.aligned + desc.offset * dtype.itemsize
    buf = (ctypes.c_char * (extent * dtype.itemsize)).from_address(base)
    flat = np.frombuffer(buf, dtype=dtype, count=extent)
    view = np.lib.stride_tricks.as_strided(
        flat, shape=shape, strides=[s * dtype.itemsize for s in strides])
    return np.array(view, copy=True)


class Library:
    """A compiled module; call its C-interface functions on NumPy arrays."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)

    def call(self, name, args, results):
        """Calls `_mlir_ciface_<name>` with memref arguments `args` (NumPy
        arrays) and returns the memref results, described by `results`, a
        list of (rank, dtype). Results come back as fresh NumPy arrays."""
        fn = getattr(self.lib, "_mlir_ciface_" + name)
        keep, ptrs = [], []
        if results:
            fields = [("r%d" % k, descriptor_type(rank))
                      for k, (rank, _) in enumerate(results)]
            ResultStruct = type("Results", (ctypes.Structure,),
                                {"_fields_": fields})
            out = ResultStruct()
            ptrs.append(ctypes.pointer(out))
        for a in args:
            desc, arr = to_descriptor(a)
            keep.append((desc, arr))
            ptrs.append(ctypes.pointer(desc))
        fn.restype = None
        fn(*ptrs)
        if not results:
            return []
        return [from_descriptor(getattr(out, "r%d" % k), rank, dtype)
                for k, (rank, dtype) in enumerate(results)]


# ---------------------------------------------------------------------------
# bfloat16 as uint16.

def to_bf16(x):
    """Rounds float32 values to bfloat16 (nearest even), stored as uint16.
    NaN stays NaN with its sign, the quiet bit set and the high payload bits
    (the rounding bias must not carry a NaN's payload into infinity)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    rounded = ((bits + rounding) >> 16).astype(np.uint16)
    quiet = ((bits >> 16) | 0x0040).astype(np.uint16)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, quiet, rounded)


def from_bf16(x):
    return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
