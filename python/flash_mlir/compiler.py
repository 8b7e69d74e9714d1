"""compile(): run a registered flash (or upstream) pipeline through the C API."""
import os

from . import _capi
from ._capi import FlashError

__all__ = ["compile", "format_options"]


def format_options(options):
    """Keyword options as a pass-option string: block_q=32, parallel=False
    -> "block-q=32 parallel=false". Lists become comma-separated values."""
    parts = []
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        parts.append("%s=%s" % (key.replace("_", "-"), value))
    return " ".join(parts)


def _read_input(ir_or_path):
    """(text or bytes, name for diagnostics)."""
    if isinstance(ir_or_path, os.PathLike):
        path = os.fspath(ir_or_path)
    elif isinstance(ir_or_path, str) and "\n" not in ir_or_path and "{" not in ir_or_path \
            and os.path.isfile(ir_or_path):
        path = ir_or_path
    else:
        return ir_or_path, None
    with open(path, "rb") as f:
        return f.read(), path


def compile(ir_or_path, pipeline="flash-cpu-pipeline", *, output="mlir", opt_level=2,
            **options):
    """Compiles MLIR (text, bytes, or a path to a .mlir / bytecode file).

    pipeline: a registered pass or pipeline name ("flash-cpu-pipeline",
        "flash-decompose-attention"), a textual pipeline
        ("builtin.module(canonicalize,cse)"), or None to only parse and verify.
    output: "mlir" (text), "bytecode", "llvm" (LLVM IR text), "object" (host
        ELF object, bytes), "assembly", "ptx" or "cubin" (from the module's
        gpu.binary, bytes for cubin).
    opt_level: LLVM optimization level for llvm/object/assembly.
    **options: options of the named pipeline, e.g. block_q=32, reference=True.

    Raises FlashError with the MLIR diagnostics on any failure."""
    data, name = _read_input(ir_or_path)
    opts = format_options(options)
    if opts and (not pipeline or "(" in pipeline or "," in pipeline):
        raise ValueError("keyword options need a single pass or pipeline name, got %r" % pipeline)
    with _capi.Context() as ctx:
        module = ctx.parse(data, name)
        if pipeline:
            module.run(pipeline, opts)
        return module.emit(output, opt_level)
