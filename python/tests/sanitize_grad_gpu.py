"""compute-sanitizer on the backward (prep, key blocks with cp.async and the dQ
atomics, dq), through flash_mlir.attention in autograd:
    FLASH_MLIR_CACHE_DIR=DIR compute-sanitizer --tool memcheck python3 python/tests/sanitize_grad_gpu.py
(and --tool racecheck); the cases are test_attention_grad_gpu.py's d128-l100-causal,
d64-dv128-causal and dead-rows cases, so its --prebuild cache serves them."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

import flash_mlir  # noqa: E402

torch.manual_seed(0)


def run(qs, ks, vs, **kw):
    q, k, v = (torch.randn(s, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for s in (qs, ks, vs))
    o = flash_mlir.attention(q, k, v, **kw)
    o.backward(torch.randn_like(o))
    torch.cuda.synchronize()
    print(qs, ks, vs, kw, "ok", [float(x.grad.float().abs().sum()) for x in (q, k, v)])


run((2, 4, 100, 128), (2, 4, 100, 128), (2, 4, 100, 128), causal=True)
run((2, 2, 500, 64), (2, 2, 300, 64), (2, 2, 300, 128), causal=True)
run((2, 4, 300, 64), (2, 2, 100, 64), (2, 2, 100, 64), causal=True, align="bottom_right")
