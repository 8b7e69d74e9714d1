"""The GPU half of the main job, for a machine with an H200 and torch (no LLVM
needed): load the kernel library that run_example.py built from the frontend
IR, run it on random inputs, and check it against a float64 reference with
FlashAttention's rule (error at most 2x torch SDPA's), then time it next to
SDPA's backends.

Usage: run_example_gpu.py DIR   (DIR holds example.json and the library)
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from flash_mlir.gpu import KernelLibrary  # noqa: E402

d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "example.json")))
lib = KernelLibrary(os.path.join(d, f"lib{cfg['name']}.so"))
dt = {"bf16": torch.bfloat16, "f16": torch.float16}[cfg["dtype"]]
q, k, v = (torch.randn(*s, device="cuda", dtype=dt) for s in cfg["args"])
out = torch.full_like(q[..., : cfg["args"][2][-1]], float("nan"))
lib(cfg["name"], q, k, v, out, pass_stream=True)
torch.cuda.synchronize()
ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=cfg["causal"])
sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=cfg["causal"])
err = (out.double() - ref).abs().max().item()
err_sdpa = (sdpa.double() - ref).abs().max().item()
ok = not torch.isnan(out).any().item() and err <= 2 * err_sdpa + 1e-5
print(f"shape {cfg['args']} {cfg['dtype']} causal={cfg['causal']}: max abs err {err:.3e} "
      f"(SDPA {err_sdpa:.3e}) {'ok' if ok else 'FAIL'}")


def time_ms(fn, reps=50):
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


ours = time_ms(lambda: lib(cfg["name"], q, k, v, out, pass_stream=True))
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
row = [f"ours {ours * 1e3:.1f} us"]
for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
    with sdpa_kernel(be):
        t = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=cfg["causal"]))
    row.append(f"sdpa-{name} {t * 1e3:.1f} us")
print("time per call: " + ", ".join(row))
sys.exit(0 if ok else 1)
