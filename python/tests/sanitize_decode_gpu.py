"""compute-sanitizer on the split-KV decode path (split + combine, packed GQA rows, row
blocks), through flash_mlir.attention:
    FLASH_MLIR_CACHE_DIR=DIR compute-sanitizer --tool memcheck python3 python/tests/sanitize_decode_gpu.py
(and --tool racecheck); the kernels are test_decode_gpu.py's split3, lq16-causal-br and
rows160-forced cases, so its --prebuild cache serves them."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torch, flash_mlir
torch.manual_seed(0)
def run(qs, ks, **kw):
    q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
    o = flash_mlir.attention(q, k, v, **kw)
    torch.cuda.synchronize()
    print(qs, ks, kw, "ok", float(o[0].float().abs().sum() if not isinstance(o, tuple) else o[0].float().abs().sum()))
run((2, 16, 1, 128), (2, 4, 2000, 128), split_kv=3, return_lse=True)
run((2, 32, 16, 128), (2, 8, 3000, 128), causal=True, align="bottom_right", return_lse=True)
run((1, 8, 40, 64), (1, 2, 1500, 64), causal=True, align="bottom_right", kernel="splitkv")
