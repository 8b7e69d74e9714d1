#!/usr/bin/python3
"""Fused vs unfused flash.attention on the CPU: time and peak memory.

The same module (`flash.attention`, or with --op backward its gradient
`flash.attention_grad`; one head, D = Dv = 64, f32) is compiled twice by
flash-cpu-pipeline: fused (flash-tile-attention: for the backward, P
recomputed from the LSE tile by tile) and unfused (reference=1, i.e.
flash-decompose-attention, which materialises the L x L scores, and for the
backward P, dP and dS as well). Each (path, L) runs in its own process so that its peak RSS
(getrusage of that child) is its own; the table also gives the peak RSS of
the same process that stops right before the call, so the difference is
what the attention itself allocated.

Usage: bench/cpu/bench.py [--flash-opt PATH] [--lengths 1024,...]
                          [--mask none|causal] [--op forward|backward]
                          [--markdown FILE]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "lib"))

import numpy as np  # noqa: E402

import flash_attention_cases as fac  # noqa: E402
import flash_cpu_runner as fcr  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "Integration", "CPU"))
import attention_grad as agr  # noqa: E402


class BackwardCase:
    """flash.attention_grad over [1, L, 64] inputs (the gradient check's
    module builder), called with random q, k, v, o, dO and a finite LSE."""

    def __init__(self, mask, length):
        self.case = agr.Case("bench", (1,), lq=length, lk=length, d=64, dv=64,
                             mask=None if mask == "none" else mask)

    def module_text(self):
        return self.case.module()

    def call(self, lib, rng):
        sh = self.case.shapes()
        f32 = lambda s: rng.standard_normal(s).astype(np.float32)
        args = [f32(sh["q"]), f32(sh["k"]), f32(sh["v"]), f32(sh["o"]), f32(sh["o"]),
                np.full(sh["lse"], 8.0, np.float32)]
        inits = [np.zeros(sh[n], np.float32) for n in ("q", "k", "v")]
        return lib.call("grad", args + inits, [(x.ndim, np.float32) for x in inits])


class ForwardCase:
    def __init__(self, mask, length):
        self.case = fac.Case("bench", d=64, dv=64, batch=(1,),
                             mask=None if mask == "none" else mask)
        self.length = length

    def module_text(self):
        return self.case.module_text()

    def call(self, lib, rng):
        inputs, _ = self.case.inputs(rng, self.length, self.length)
        return lib.call("attn", inputs, self.case.result_spec())


def make_case(op, mask, length):
    # The forward module has dynamic lengths; the backward's is built per L.
    return (BackwardCase if op == "backward" else ForwardCase)(mask, length)


def child(args):
    """Runs one measurement in this process and prints it as JSON."""
    case = make_case(args.op, args.mask, args.length)
    lib = fcr.Library(args.child)
    rng = np.random.default_rng(0)
    times, cpu = [], []
    if not args.no_call:
        reps = 3 if args.length <= 4096 else 1
        if args.length <= 4096:
            case.call(lib, rng)  # warm-up
        for _ in range(reps):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            out = case.call(lib, rng)
            times.append(time.perf_counter() - t)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        assert not np.isnan(out[0]).any()
    print(json.dumps({"time": min(times) if times else 0.0,
                      "cpu": min(cpu) if cpu else 0.0}))


def measure(lib, length, mask, op, no_call=False):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", lib,
           "--length", str(length), "--mask", mask, "--op", op]
    if no_call:
        cmd.append("--no-call")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError("benchmark child failed: %s" % " ".join(cmd))
    result = json.loads(out)
    result["peak_mib"] = usage.ru_maxrss / 1024.0  # ru_maxrss is in KiB
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flash-opt", default=None)
    ap.add_argument("--lengths", default="1024,2048,4096,8192,16384")
    ap.add_argument("--mask", default="none", choices=["none", "causal"])
    ap.add_argument("--op", default="forward", choices=["forward", "backward"])
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--child", default=None)
    ap.add_argument("--length", type=int, default=0)
    ap.add_argument("--no-call", action="store_true")
    args = ap.parse_args()
    if args.child:
        return child(args)

    flash_opt = args.flash_opt or os.path.join(HERE, "..", "..", "build", "bin",
                                               "flash-opt")
    tools = fcr.Tools(flash_opt=flash_opt)
    par = "" if args.parallel else " parallel=0"
    lengths = [int(x) for x in args.lengths.split(",")]

    def libs_for(length):
        text = make_case(args.op, args.mask, length).module_text()
        return {"fused": fcr.compile_module(text, par.strip(), tools).path,
                "unfused": fcr.compile_module(text, "reference=1" + par, tools).path}

    shared = libs_for(lengths[0]) if args.op == "forward" else None
    rows = []
    header = ("| L | fused time (s) | unfused time (s) | speed-up | "
              "fused CPU (s) | unfused CPU (s) | "
              "fused peak (MiB) | unfused peak (MiB) | "
              "fused attention mem (MiB) | unfused attention mem (MiB) |")
    rule = "|---:" * 10 + "|"
    print(header)
    print(rule)
    for length in lengths:
        libs = shared or libs_for(length)
        base = measure(libs["fused"], length, args.mask, args.op, no_call=True)
        f = measure(libs["fused"], length, args.mask, args.op)
        u = measure(libs["unfused"], length, args.mask, args.op)
        row = ("| %d | %.3f | %.3f | %.1fx | %.3f | %.3f | %.0f | %.0f | %.0f "
               "| %.0f |") % (
            length, f["time"], u["time"], u["time"] / f["time"],
            f["cpu"], u["cpu"],
            f["peak_mib"], u["peak_mib"],
            max(f["peak_mib"] - base["peak_mib"], 0.0),
            max(u["peak_mib"] - base["peak_mib"], 0.0))
        print(row, flush=True)
        rows.append(row)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(header + "\n" + rule + "\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    sys.exit(main())
