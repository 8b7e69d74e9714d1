"""On-disk cache of compiled artifacts.

An entry is keyed by what the code is built from (the IR, the pipeline and its
options, the target) and records which compiler built it in a .json beside it.
Where the compiler loads, an entry built by another compiler (another version,
or a rebuilt library at the same version) is stale and gets rebuilt. Where it
does not (a GPU machine without LLVM), entries are taken as they are: that is
how kernels built elsewhere (flash_mlir.prebuild, or a copied cache folder)
run there.
"""
import hashlib
import json
import os
import tempfile

from . import _capi
from ._version import __version__

# Bump when the way artifacts are built changes (linking, calling convention).
# 3: launchers call through the bundled runtime's flashRuntimeCall.
# 4: kernels take their TMA maps by value (the bundled runtime passes them
#    by the kernel's parameter sizes).
ARTIFACT_FORMAT = 4


def cache_dir():
    """$FLASH_MLIR_CACHE_DIR, else $XDG_CACHE_HOME/flash_mlir (~/.cache)."""
    d = os.environ.get("FLASH_MLIR_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "flash_mlir")
    os.makedirs(d, exist_ok=True)
    return d


def key(ir, pipeline, options, target, extra=()):
    """Hash of the IR, the pipeline and its options, the flash-mlir version and
    the target the code is generated for (host CPU or GPU); the exact compiler
    build is checked by lookup()."""
    h = hashlib.sha256()
    for part in (str(ARTIFACT_FORMAT), __version__, target, pipeline or "", options or "",
                 *map(str, extra), ir):
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:40]


def compiler_id():
    """The compiler that builds here: its version and a hash of its library
    (which links every flash pass, so it changes whenever the compiler does)."""
    return {"version": _capi.version(), "build": _capi.build_id()}


def _meta_path(k):
    return os.path.join(cache_dir(), k + ".json")


def read_meta(k):
    try:
        with open(_meta_path(k)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def lookup(k, suffix=".so"):
    """The entry's path, or None when it is missing or, where the compiler
    loads, was built by a different one."""
    path = os.path.join(cache_dir(), k + suffix)
    if not os.path.exists(path):
        return None
    if _capi.available():
        meta = read_meta(k)
        if meta is None or meta.get("compiler") != compiler_id():
            return None
    return path


def store_file(k, build, suffix=".so", meta=None):
    """Runs build(tmp_path) and moves the result into the cache atomically, so
    concurrent processes never see a partial file. The .json (with the
    compiler that built it) is written first: an entry never appears without it."""
    d = cache_dir()
    final = os.path.join(d, k + suffix)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + k, suffix=suffix, dir=d)
    os.close(fd)
    try:
        build(tmp)
        meta = dict(meta or {}, compiler=compiler_id())
        fd, tmp_meta = tempfile.mkstemp(prefix=".tmp-" + k, suffix=".json", dir=d)
        with os.fdopen(fd, "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
        os.replace(tmp_meta, _meta_path(k))
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final
