"""On-disk cache of compiled artifacts, keyed by everything that shapes them."""
import hashlib
import json
import os
import tempfile

from . import _capi

# Bump when the way artifacts are built changes (linking, calling convention).
ARTIFACT_FORMAT = 1


def cache_dir():
    """$FLASH_MLIR_CACHE_DIR, else $XDG_CACHE_HOME/flash_mlir (~/.cache)."""
    d = os.environ.get("FLASH_MLIR_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "flash_mlir")
    os.makedirs(d, exist_ok=True)
    return d


def key(ir, pipeline, options, target, extra=()):
    """Hash of the IR, the pipeline and its options, the compiler (version and
    build) and the target the code is generated for (host CPU or GPU)."""
    h = hashlib.sha256()
    for part in (str(ARTIFACT_FORMAT), _capi.version(), _capi.build_id(), target, pipeline or "", options or "",
                 *map(str, extra), ir):
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:40]


def lookup(k, suffix=".so"):
    path = os.path.join(cache_dir(), k + suffix)
    return path if os.path.exists(path) else None


def store_file(k, build, suffix=".so", meta=None):
    """Runs build(tmp_path) and moves the result into the cache atomically, so
    concurrent processes never see a partial file."""
    d = cache_dir()
    final = os.path.join(d, k + suffix)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + k, suffix=suffix, dir=d)
    os.close(fd)
    try:
        build(tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if meta is not None:
        with open(os.path.join(d, k + ".json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
    return final
