"""The main job: take a frontend's attention IR through the whole flash-mlir
pipeline and show what each stage did.

  1. flash-raise-attention  finds matmul -> softmax -> matmul, rewrites it to flash.attention
  2. flash-tile-attention   online-softmax loop nest; no Lq x Lk buffer is left
  3. flash-cpu-pipeline     compiles the original and the fused module for this CPU and runs
                            both on random inputs against a float64 NumPy attention
  4. flash-gpu-pipeline     compiles the same function for the H200 (sm_90a) into a cubin

Usage: run_example.py FLASH_OPT [input.mlir]
"""
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import flash_cpu_runner as cpu  # noqa: E402

FLASH_OPT = sys.argv[1]
INPUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "examples", "attention.mlir")
ENV = dict(os.environ, CUDA_HOME=os.environ.get("CUDA_HOME", "/usr/local/cuda"))


def opt(text, *passes):
    res = subprocess.run([FLASH_OPT, *passes], input=text, capture_output=True, text=True, env=ENV)
    if res.returncode:
        sys.exit(f"flash-opt {' '.join(passes)} failed:\n{res.stderr}")
    return res.stdout, res.stderr


def op_histogram(text, top=8):
    ops = re.findall(r"\b((?:flash|linalg|scf|vector|memref|gpu|nvgpu|nvvm|llvm|math)\.[a-z_]+)", text)
    names, counts = np.unique(ops, return_counts=True)
    order = np.argsort(-counts)[:top]
    return ", ".join(f"{counts[i]} {names[i]}" for i in order)


def largest_tensors(text, n=3):
    shapes = set(re.findall(r"tensor<((?:\d+x)+)(\w+)>", text))
    sized = sorted(((int(np.prod([int(d) for d in s.rstrip('x').split('x')])), s + t)
                    for s, t in shapes), reverse=True)
    width = {"f32": 4, "bf16": 2, "f16": 2}
    return [f"tensor<{s}> ({n_ * width.get(s.split('x')[-1], 4) / 2**20:.1f} MiB)" for n_, s in sized[:n]]


def banner(title):
    print(f"\n== {title}")


source = open(INPUT).read()
fn = re.search(r"func\.func @(\w+)\(([^)]*)\)\s*->\s*([^{\n]+?)\s*(?:attributes|\{)", source, re.S)
name, args, result = fn.group(1), fn.group(2), fn.group(3).strip()
arg_types = re.findall(r"tensor<([0-9x]+)x(bf16|f16|f32)>", args)
banner(f"input {os.path.relpath(INPUT, ROOT)}: @{name}, {len(arg_types)} tensor arguments")
print("   ", op_histogram(source))
for t in largest_tensors(source):
    print("    materialised:", t)

banner("1. flash-raise-attention (with remarks)")
raised, remarks = opt(source, "--flash-raise-attention", "--canonicalize", "--mlir-pass-statistics")
for line in raised.splitlines():
    if "flash.attention" in line:
        print("   ", line.strip())
for line in remarks.splitlines():
    if "remark" in line:
        print("    remark:", line.split("remark:")[-1].strip())
print("    left over:", op_histogram(raised))
if "flash.attention" not in raised:
    sys.exit("no attention was found in the input")

banner("2. flash-tile-attention")
tiled, _ = opt(raised, "--flash-tile-attention")
print("   ", op_histogram(tiled))
q_shape = [int(d) for d in arg_types[0][0].split("x")]
k_shape = [int(d) for d in arg_types[1][0].split("x")]
lq, lk = q_shape[-2], k_shape[-2]
big = [t for t in largest_tensors(tiled, 20) if f"x{lq}x{lk}x" in t or t.startswith(f"tensor<{lq}x{lk}x")]
print(f"    Lq x Lk ({lq}x{lk}) buffers left: {len(big)}; largest now:", largest_tensors(tiled, 1)[0])

banner("3. CPU: original (unfused) vs fused, random inputs, float64 NumPy reference")
rng = np.random.default_rng()
dtype = arg_types[0][1]
inputs = [rng.standard_normal([int(d) for d in s.split("x")]).astype(np.float32) for s, _ in arg_types]
if dtype == "bf16":
    to_dev, from_dev = cpu.to_bf16, cpu.from_bf16
elif dtype == "f16":
    to_dev, from_dev = (lambda x: x.astype(np.float16)), (lambda x: x.astype(np.float32))
else:
    to_dev, from_dev = (lambda x: x), (lambda x: x)
dev_inputs = [to_dev(x) for x in inputs]
q, k, v = (from_dev(x).astype(np.float64) for x in dev_inputs[:3])
s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
if "mask(causal" in raised:
    s = np.where(np.tril(np.ones((lq, lk), bool)), s, -np.inf)
p = np.exp(s - s.max(-1, keepdims=True))
reference = (p / p.sum(-1, keepdims=True)) @ v
out_rank = len(q_shape)
out_np = {"bf16": np.uint16, "f16": np.float16, "f32": np.float32}[dtype]
for label, text, options in [("unfused original", source, ""), ("fused (raise=1)", source, "raise=1")]:
    t0 = time.time()
    lib = cpu.compile_module(text, options, tools=cpu.Tools(flash_opt=FLASH_OPT))
    compile_s = time.time() - t0
    t0 = time.time()
    (out,) = lib.call(name, dev_inputs, [(out_rank, out_np)])
    run_s = time.time() - t0
    got = from_dev(out).astype(np.float64)
    err = np.abs(got - reference).max() / np.abs(reference).max()
    print(f"    {label:18s} compile {compile_s:5.1f} s, run {run_s * 1e3:8.1f} ms, "
          f"max rel err vs float64 {err:.2e}")

banner("4. GPU: flash-gpu-pipeline for sm_90a")
if dtype not in ("bf16", "f16"):
    print("    skipped: the GPU kernel takes bf16 or f16 inputs")
    sys.exit(0)
memref = lambda t: t.replace("tensor<", "memref<")
arg_ts = [f"tensor<{s}x{t}>" for s, t in arg_types]
wrapper = [f"func.func @{name}_gpu(" + ", ".join(f"%a{i}: {memref(t)}" for i, t in enumerate(arg_ts))
           + f", %out: {memref(result)}) attributes {{llvm.emit_c_interface}} {{"]
for i, t in enumerate(arg_ts):
    wrapper.append(f"  %t{i} = bufferization.to_tensor %a{i} restrict : {memref(t)} to {t}")
wrapper.append(f"  %r = func.call @{name}(" + ", ".join(f"%t{i}" for i in range(len(arg_ts)))
               + f") : ({', '.join(arg_ts)}) -> {result}")
wrapper.append(f"  bufferization.materialize_in_destination %r in restrict writable %out : ({result}, {memref(result)}) -> ()")
wrapper += ["  return", "}"]
gpu_source = source.replace(f"func.func @{name}(", f"func.func private @{name}(", 1) \
    .replace("attributes {llvm.emit_c_interface} {", "{", 1) + "\n" + "\n".join(wrapper) + "\n"
t0 = time.time()
lowered, _ = opt(gpu_source, "--inline", "--symbol-dce", "--flash-gpu-pipeline")
binary = re.search(r'gpu\.binary @(\w+).*?bin = "', lowered, re.S)
kernels = sorted(set(re.findall(r"@(\w*attention\w*kernel\w*|\w+_kernel\w*)", lowered)))
blob = re.search(r'bin = "((?:[^"\\]|\\.)*)"', lowered)
size = len(re.sub(r"\\[0-9A-F]{2}", "x", blob.group(1))) if blob else 0
fmt = "cubin" if "\\7FELF" in lowered[:] or "ELF" in (blob.group(1)[:12] if blob else "") else "PTX/other"
print(f"    compiled in {time.time() - t0:.1f} s: gpu.binary @{binary.group(1) if binary else '?'} "
      f"({fmt}, {size / 1024:.0f} KiB), host entry _mlir_ciface_{name}_gpu(q, k, v, out, stream)")
launches = len(re.findall(r"gpu\.launch_func", lowered))
calls = sorted(set(re.findall(r"llvm\.call @(mgpu\w+)", lowered)))
print(f"    host code: {launches} gpu.launch_func on the caller's stream; runtime calls: {', '.join(calls)}")
out_dir = os.environ.get("FLASH_EXAMPLE_GPU_DIR")
if out_dir:
    # A shippable kernel library (no LLVM needed to run it) for examples/run_example_gpu.py.
    os.makedirs(out_dir, exist_ok=True)
    inlined, _ = opt(gpu_source, "--inline", "--symbol-dce")
    src = os.path.join(out_dir, f"{name}_gpu.mlir")
    open(src, "w").write(inlined)
    build_dir = os.path.dirname(os.path.dirname(FLASH_OPT))
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "flash-gpu-build.py"), src,
                    "-o", os.path.join(out_dir, f"lib{name}_gpu.so"), "--bundle",
                    "--runtime-dir", os.path.join(os.path.abspath(build_dir), "lib"),
                    "--opt-tool", FLASH_OPT, "--pipeline", "builtin.module(flash-gpu-pipeline)"],
                   check=True, env=ENV)
    shapes = {"name": f"{name}_gpu", "args": [[int(d) for d in s_.split("x")] for s_, _ in arg_types],
              "dtype": dtype, "causal": "mask(causal" in raised, "scale": 1 / np.sqrt(q_shape[-1])}
    import json
    json.dump(shapes, open(os.path.join(out_dir, "example.json"), "w"))
    print(f"    kernel library: {out_dir}/lib{name}_gpu.so; run examples/run_example_gpu.py {out_dir} on a GPU")
else:
    print("    set FLASH_EXAMPLE_GPU_DIR to also build a kernel library for examples/run_example_gpu.py")
