"""The kernels behind the wgmma one — mma.sync (kernel=mma) and portable (kernel=portable,
the auto fallback) — against the wgmma kernel and torch SDPA, all in one run, through
flash_mlir.attention.

Here (compiler, no GPU):  python3 bench/gpu/bench_portable.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_portable.py
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

B, H, L = 4, 16, 2048
# (label, head dim, dtype, extra attention() keywords)
CASES = [
    ("D=64 bf16 wgmma", 64, "bfloat16", {"kernel": "wgmma"}),
    ("D=64 bf16 mma", 64, "bfloat16", {"kernel": "mma"}),
    ("D=64 bf16 portable", 64, "bfloat16", {"kernel": "portable"}),
    ("D=128 bf16 wgmma", 128, "bfloat16", {"kernel": "wgmma"}),
    ("D=128 bf16 mma", 128, "bfloat16", {"kernel": "mma"}),
    ("D=96 bf16 mma", 96, "bfloat16", {"kernel": "mma"}),
    ("D=96 bf16 portable", 96, "bfloat16", {"kernel": "portable"}),
    ("D=256 bf16 mma", 256, "bfloat16", {"kernel": "mma"}),
    ("D=64 f32 portable", 64, "float32", {"kernel": "portable"}),
]


def prebuild(cache):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for _, d, dtype, kw in CASES:
        for causal in (False, True):
            shape = (B, H, L, d)
            flash_mlir.prebuild(shape, shape, shape, dtype, causal=causal, **kw)


def run():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from common import device_line, time_ms

    print(device_line())
    print("| kernel | causal | ours ms | ours TFLOP/s | SDPA ms (default backend) | ours/SDPA |")
    print("|---|---|---|---|---|---|")
    for label, d, dtype, kw in CASES:
        for causal in (False, True):
            q, k, v = (torch.randn(B, H, L, d, device="cuda", dtype=getattr(torch, dtype))
                       for _ in range(3))
            ours = time_ms(lambda: flash_mlir.attention(q, k, v, causal=causal, **kw))
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                              SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
                ref = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            flops = 4 * B * H * L * L * d / (2 if causal else 1)
            print(f"| {label} | {causal} | {ours:.3f} | {flops / ours / 1e9:.1f} | {ref:.3f} | "
                  f"{ref / ours:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--prebuild":
        prebuild(sys.argv[2])
    elif len(sys.argv) == 1:
        run()
    else:
        sys.exit(__doc__)
