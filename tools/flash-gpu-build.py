#!/usr/bin/env python3
"""Build a GPU module into a shared library with one C entry point per host function.

    input.mlir --[mlir-opt/flash-opt pipeline]--> gpu.binary + LLVM dialect host code
               --mlir-translate--> .ll --llc -relocation-model=pic--> .o
               --cc -shared, linked against libflash_cuda_runtime--> lib<name>.so

The library exports each host func.func `f` as `f` (expanded memref arguments) and,
when it carries `llvm.emit_c_interface`, as `_mlir_ciface_f` (pointers to memref
descriptors). It needs no LLVM at run time: ship it with libflash_cuda_runtime.so
(--bundle copies the runtime next to it; the library finds it through $ORIGIN).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

LLVM_BIN = "/usr/lib/llvm-22/bin"


def run(cmd, env=None):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0 or (p.stderr and "error" in p.stderr.lower()):
        sys.stderr.write(f"flash-gpu-build: command failed: {' '.join(cmd)}\n{p.stderr}")
        sys.exit(1)
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help=".mlir file (a gpu.container_module, lowered or not)")
    ap.add_argument("-o", "--output", required=True, help="output shared library path")
    ap.add_argument("--runtime-dir", required=True, help="directory holding libflash_cuda_runtime.so")
    ap.add_argument("--pipeline", default=None,
                    help="pass pipeline to run first, e.g. 'builtin.module(flash-gpu-pipeline)'; default: "
                         "none if the input already holds a gpu.binary, else gpu-lower-to-nvvm-pipeline")
    ap.add_argument("--opt-tool", default=os.path.join(LLVM_BIN, "mlir-opt"),
                    help="mlir-opt or flash-opt binary that runs --pipeline")
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--features", default="+ptx80")
    ap.add_argument("--format", default="bin", choices=["bin", "isa", "fatbin"],
                    help="cubin (bin), PTX (isa, JIT-compiled by the driver) or fatbin")
    ap.add_argument("--llvm-bin", default=LLVM_BIN)
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--bundle", action="store_true", help="copy libflash_cuda_runtime.so next to the output")
    ap.add_argument("--keep-temps", default=None, help="directory to keep intermediate files in")
    a = ap.parse_args()

    env = dict(os.environ)
    env.setdefault("CUDA_HOME", "/usr/local/cuda")  # else libdevice is not linked (study P4)
    out = os.path.abspath(a.output)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = a.keep_temps or tempfile.mkdtemp(prefix="flash-gpu-build-")
    os.makedirs(tmp, exist_ok=True)
    stem = os.path.join(tmp, os.path.splitext(os.path.basename(out))[0])

    src = open(a.input).read()
    pipeline = a.pipeline
    if pipeline is None and "gpu.binary" not in src:
        pipeline = (f"builtin.module(gpu-lower-to-nvvm-pipeline{{cubin-chip={a.chip} "
                    f"cubin-features={a.features} cubin-format={a.format} opt-level=3}})")
    lowered = a.input
    if pipeline:
        lowered = stem + ".lowered.mlir"
        run([a.opt_tool, a.input, f"--pass-pipeline={pipeline}", "-o", lowered], env)
        # A bad cubin-format is reported but exits 0 (study P3): check the result.
        if "gpu.binary" not in open(lowered).read():
            sys.exit(f"flash-gpu-build: pipeline produced no gpu.binary (see {lowered})")
    ll, obj = stem + ".ll", stem + ".o"
    run([os.path.join(a.llvm_bin, "mlir-translate"), "--mlir-to-llvmir", lowered, "-o", ll], env)
    run([os.path.join(a.llvm_bin, "llc"), "-O2", "-filetype=obj", "-relocation-model=pic", ll, "-o", obj], env)
    rtdir = os.path.abspath(a.runtime_dir)
    if not os.path.exists(os.path.join(rtdir, "libflash_cuda_runtime.so")):
        sys.exit(f"flash-gpu-build: no libflash_cuda_runtime.so in {rtdir}")
    # --no-undefined: every mgpu* call the host code makes must exist in our runtime.
    rpath = ["-Wl,-rpath,$ORIGIN"] + ([] if a.bundle else [f"-Wl,-rpath,{rtdir}"])
    run([a.cc, "-shared", "-o", out, obj, f"-L{rtdir}", "-lflash_cuda_runtime",
         "-Wl,--no-undefined"] + rpath, env)
    if a.bundle:
        dst = os.path.join(os.path.dirname(out), "libflash_cuda_runtime.so")
        if os.path.abspath(dst) != os.path.join(rtdir, "libflash_cuda_runtime.so"):
            shutil.copy2(os.path.join(rtdir, "libflash_cuda_runtime.so"), dst)
    if not a.keep_temps:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
