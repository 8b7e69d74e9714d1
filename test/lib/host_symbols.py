"""What a CPU library built by flash-mlir may leave for the loader to find.

The allowlist is read off the libraries such a library runs against — libc,
libm, libomp and MLIR's runner utils — so a symbol only a compiler runtime
(libgcc, compiler-rt) defines, e.g. __truncsfbf2, __extendhfsf2 or a 128-bit
division helper, is reported: such a symbol makes the library fail to load
on a machine whose runtime lacks it.
"""
import functools
import os
import subprocess

RUNTIME_LIBRARIES = [
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/x86_64-linux-gnu/libm.so.6",
    "/usr/lib/x86_64-linux-gnu/libomp.so.5",
    "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so",
    "/usr/lib/llvm-22/lib/libmlir_runner_utils.so",
]

NM = "/usr/lib/llvm-22/bin/llvm-nm"


def _nm(args):
    res = subprocess.run([NM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if res.returncode:
        raise RuntimeError("%s failed: %s" % (" ".join([NM] + args), res.stderr))
    return res.stdout.splitlines()


@functools.lru_cache(maxsize=None)
def allowed():
    names = set()
    for lib in RUNTIME_LIBRARIES:
        if not os.path.exists(lib):
            continue
        for line in _nm(["-D", "--defined-only", "--format=just-symbols", lib]):
            names.add(line.split("@")[0])
    return frozenset(names)


def undefined(path, dynamic):
    """Undefined symbols of an object (dynamic=False) or of a shared
    library's dynamic table; weak references are left out: they resolve to
    null when absent and cannot stop the library from loading."""
    out = []
    for line in _nm((["-D"] if dynamic else []) + ["--undefined-only", path]):
        parts = line.split()
        if len(parts) >= 2 and parts[-2] in ("w", "v"):
            continue
        out.append(parts[-1].split("@")[0])
    return sorted(set(out))


def foreign(path, dynamic):
    """The undefined symbols of `path` that none of RUNTIME_LIBRARIES defines."""
    ok = allowed()
    return [s for s in undefined(path, dynamic) if s not in ok]


def check_library(lib, obj=None):
    """Returns a list of 'file: symbol' problems (empty when clean)."""
    problems = ["%s: %s" % (lib, s) for s in foreign(lib, dynamic=True)]
    if obj:
        problems += ["%s: %s" % (obj, s) for s in foreign(obj, dynamic=False)]
    return problems
