"""Correctness sweep of our attention kernels on the GPU (issue 5).

D in {64, 128}; L in {1, 100, 1024, 4097, 16384}; plain, causal top-left and bottom-right
(Lq != Lk, and Lk < Lq so some rows are fully masked), additive bias through score_mod,
GQA 4:1; bf16 and f16. Each case draws fresh inputs, poisons our output with NaN, runs
our kernel and torch SDPA on the same inputs and compares both with a float64
reference: pass when our max error <= 2x SDPA's (+1e-6 for cases where both are exact),
no NaN anywhere and exact zeros on fully masked rows.

    python3 bench/gpu/sweep.py [--artifacts DIR] [--md OUT.md] [--json OUT.json] [--quick]

Cases whose kernel is not in the artifacts are SKIPped (SDPA's error is still reported).
Exit status: 1 if any case failed.
"""
import argparse
import json
import math
import os
import sys

from common import OurKernels, FlashRuntimeError, device_line, torch

import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def cases(ls):
    for dt in DTYPES:
        for d in (64, 128):
            for L in ls:
                b, h = (1, 4) if L >= 16384 else (2, 8)
                lk2 = L + L // 3 + 7
                yield dict(dtype=dt, D=d, variant="plain", B=b, Hq=h, Hkv=h, Lq=L, Lk=L, mask=None)
                yield dict(dtype=dt, D=d, variant="causal_tl", B=b, Hq=h, Hkv=h, Lq=L, Lk=lk2,
                           mask="causal_top_left")
                yield dict(dtype=dt, D=d, variant="causal_br", B=b, Hq=h, Hkv=h, Lq=L, Lk=lk2,
                           mask="causal_bottom_right")
                if L > 1:
                    yield dict(dtype=dt, D=d, variant="causal_br_shortk", B=b, Hq=h, Hkv=h, Lq=L,
                               Lk=L // 2 + 1, mask="causal_bottom_right")
                yield dict(dtype=dt, D=d, variant="bias", B=b, Hq=h, Hkv=h, Lq=L, Lk=L, mask=None,
                           score_mod="bias")
                yield dict(dtype=dt, D=d, variant="gqa4", B=b, Hq=h, Hkv=h // 4, Lq=L, Lk=L, mask=None)


def allowed(c, device):
    """[Lq, Lk] bool: True where the mask lets q attend kv (None: everything)."""
    if not c["mask"]:
        return None
    off = 0 if c["mask"] == "causal_top_left" else c["Lk"] - c["Lq"]
    i = torch.arange(c["Lq"], device=device)[:, None]
    j = torch.arange(c["Lk"], device=device)[None, :]
    return j <= i + off


def reference(q, k, v, scale, keep, bias):
    """float64 attention, one (batch, head) at a time; fully masked rows -> 0."""
    b, hq, lq, d = q.shape
    g = hq // k.shape[1]
    out = torch.empty(b, hq, lq, v.shape[-1], device=q.device, dtype=torch.float64)
    for bi in range(b):
        for h in range(hq):
            s = (q[bi, h].double() @ k[bi, h // g].double().T) * scale
            if bias is not None:
                s += bias.double()
            if keep is not None:
                s.masked_fill_(~keep, float("-inf"))
            m = s.amax(dim=-1, keepdim=True)
            m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
            p = torch.exp(s - m)
            l = p.sum(dim=-1, keepdim=True)
            out[bi, h] = (p @ v[bi, h // g].double()) / torch.where(l == 0, torch.ones_like(l), l)
    return out


def device_healthy():
    try:
        torch.cuda.synchronize()
        return (torch.ones(1, device="cuda") + 1).item() == 2
    except RuntimeError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--artifacts", default=None)
    ap.add_argument("--ls", default="1,100,1024,4097,16384")
    ap.add_argument("--md", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--filter", default=None,
                    help="only cases whose 'dtype D variant' contains this (e.g. for compute-sanitizer)")
    ap.add_argument("--state", default=None, help=argparse.SUPPRESS)  # restart after a device fault
    a = ap.parse_args()
    ours = OurKernels(a.artifacts)
    results, start = [], 0
    if a.state and os.path.exists(a.state):
        with open(a.state) as f:
            st = json.load(f)
        results, start = st["results"], st["next"]
    for idx, c in enumerate(cases([int(x) for x in a.ls.split(",")])):
        if idx < start or (a.filter and a.filter not in f"{c['dtype']} {c['D']} {c['variant']}"):
            continue
        torch.manual_seed(1000 + idx)
        dt = DTYPES[c["dtype"]]
        q = torch.randn(c["B"], c["Hq"], c["Lq"], c["D"], device="cuda", dtype=dt)
        k = torch.randn(c["B"], c["Hkv"], c["Lk"], c["D"], device="cuda", dtype=dt)
        v = torch.randn(c["B"], c["Hkv"], c["Lk"], c["D"], device="cuda", dtype=dt)
        # Rounded to the input type first: SDPA takes the bias in that type, ours in f32, and
        # the reference should not charge SDPA for rounding the bias.
        bias = (torch.randn(c["Lq"], c["Lk"], device="cuda").to(dt).float()
                if c.get("score_mod") else None)
        scale = 1.0 / math.sqrt(c["D"])
        keep = allowed(c, q.device)
        ref = reference(q, k, v, scale, keep, bias)
        live = torch.ones(c["Lq"], dtype=torch.bool, device=q.device) if keep is None else keep.any(dim=1)

        attn_mask = None
        if bias is not None:
            attn_mask = bias.to(dt)
        if keep is not None:
            attn_mask = keep if attn_mask is None else attn_mask.masked_fill(~keep, float("-inf"))
        sd = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale,
                                            enable_gqa=c["Hkv"] != c["Hq"])
        sdpa_err = (sd.double() - ref)[:, :, live].abs().max().item() if live.any() else 0.0
        r = dict(c, sdpa_err=sdpa_err)

        kern = ours.find(c["dtype"], c["D"], c["mask"], c.get("score_mod"), hq=c["Hq"], hkv=c["Hkv"],
                         lq=c["Lq"], lk=c["Lk"], batch=c["B"])
        if not kern:
            r["status"] = "SKIP"
        else:
            o = torch.full_like(q, float("nan"))
            try:
                ours.run(kern, q, k, v, o, *([bias] if bias is not None else []))
                torch.cuda.synchronize()
                nan = torch.isnan(o).any().item()
                err = (o.double() - ref).abs().max().item()
                dead_ok = bool((o[:, :, ~live] == 0).all().item()) if (~live).any() else True
                r.update(ours_err=err, nan=nan, dead_rows_zero=dead_ok)
                r["status"] = "PASS" if (not nan and dead_ok and err <= 2 * sdpa_err + 1e-6) else "FAIL"
            except RuntimeError as e:  # FlashRuntimeError too
                r.update(status="FAIL", error=str(e).splitlines()[0][:300])
                if device_healthy():
                    results.append(r)
                    print(f"FAIL {c} {r['error']}", flush=True)
                    continue
                # A device fault (illegal address, ...) kills this process's CUDA context: record
                # it and continue with the next case in a fresh process.
                r["error"] = "device fault: " + r["error"]
                results.append(r)
                print(f"FAIL {c} {r['error']}", flush=True)
                state = a.state or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"sweep-{os.getpid()}.json")
                with open(state, "w") as f:
                    json.dump({"results": results, "next": idx + 1}, f)
                argv = [x for i, x in enumerate(sys.argv) if x != "--state" and
                        (i == 0 or sys.argv[i - 1] != "--state")]
                os.execv(sys.executable, [sys.executable] + argv + ["--state", state])
        results.append(r)
        print(f"{r['status']:4} {c['dtype']} D={c['D']} {c['variant']:16} B={c['B']} Hq={c['Hq']} "
              f"Hkv={c['Hkv']} Lq={c['Lq']} Lk={c['Lk']} sdpa_err={sdpa_err:.3g} "
              f"ours_err={r.get('ours_err', float('nan')):.3g} {r.get('error', '')}", flush=True)
        del q, k, v, ref, sd
        torch.cuda.empty_cache()

    n = {s: sum(r["status"] == s for r in results) for s in ("PASS", "FAIL", "SKIP")}
    lines = [f"Device: {device_line()}. Max abs error vs a float64 reference; pass: ours <= 2x SDPA "
             f"(+1e-6), no NaN, fully masked rows exactly 0.", "",
             "| dtype | D | case | B×Hq/Hkv | Lq×Lk | SDPA err | ours err | status |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        oe = f"{r['ours_err']:.3g}" if "ours_err" in r else "-"
        lines.append(f"| {r['dtype']} | {r['D']} | {r['variant']} | {r['B']}×{r['Hq']}/{r['Hkv']} | "
                     f"{r['Lq']}×{r['Lk']} | {r['sdpa_err']:.3g} | {oe} | {r['status']} |")
    lines.append("")
    lines.append(f"{n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped")
    table = "\n".join(lines)
    print(table)
    if a.md:
        with open(a.md, "w") as f:
            f.write(table + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": device_line(), "results": results}, f, indent=1)
    raise SystemExit(1 if n["FAIL"] else 0)


if __name__ == "__main__":
    main()
