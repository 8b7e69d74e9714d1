"""compute-sanitizer on the paged decode path, through flash_mlir.attention, with block
tables that point anywhere (out-of-range entries, negative ones, every slot past a
sequence's length garbage) and lengths past the table's capacity: no read may leave the
page pool.
    FLASH_MLIR_CACHE_DIR=DIR compute-sanitizer --tool memcheck python3 python/tests/sanitize_paged_gpu.py
(and --tool racecheck); the kernels are test_paged_gpu.py's, so its --prebuild cache
serves them."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
import torch  # noqa: E402

import flash_mlir  # noqa: E402
from test_paged_gpu import CASES, _inputs  # noqa: E402

for name in ("gqa8-page48-f16", "lq16-causal-page32", "past-capacity"):
    c = CASES[name]
    q, k, v, table, lens = _inputs(torch, c, seed=1)
    g = torch.Generator(device="cuda").manual_seed(2)
    junk = torch.randint(-(1 << 31), (1 << 31) - 1, table.shape, generator=g, device="cuda",
                         dtype=torch.int64).to(torch.int32)
    table = torch.where(torch.rand(table.shape, generator=g, device="cuda") < 0.3, junk, table)
    o = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, **c["kw"])
    torch.cuda.synchronize()
    o = o[0] if isinstance(o, tuple) else o
    print(name, "ok", bool(torch.isfinite(o).all()))
