#!/usr/bin/python3
"""Executable twins: run a function before and after a flash-opt pipeline on
the CPU with fresh random inputs and compare the results.

Reusable by any pass that must not change what a function computes. Each
`// -----` chunk of FILE holds one function under test; per chunk:

  1. the chunk is transformed with `flash-opt <--transform>`; with
     `--expect OP` the output must contain OP (e.g. flash.attention),
  2. the original and the transformed function are put in one module with a
     `main` that feeds both the same random inputs (exact hex constants),
  3. flash ops are lowered by `--lower` (default --flash-decompose-attention),
     the rest by upstream passes to LLVM, and run with mlir-runner,
  4. results are printed bit-exactly (as i32 bits of f32) and compared:
     relative L2 error <= --tol (default 1e-5).

Chunk directives (comments in the chunk):
  // TWIN: skip          do not run this chunk (e.g. a negative case)
  // TWIN: tol=1e-2      tolerance for this chunk (bf16/f16 rounding)
  // TWIN: arg2=causal01 argument 2 is a 0/1 lower-triangular i1 tensor
  // TWIN: arg2=range=0,5  integer argument values in [0, 5)
  // TWIN: arg0=shape=2x10x16  static shape fed to a dynamic argument
  // TWIN: ret0=shape=2x10x8   static shape of a dynamic result

Prints one line per chunk and `N passed, M failed`; exits 1 on a failure.
Example lit line:
  // RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
  // RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
  // RUN:   --transform=--flash-raise-attention --expect flash.attention
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ELEM = {"f32": np.float32, "f16": np.float16, "f64": np.float64,
        "i1": np.bool_, "i8": np.int8, "i32": np.int32, "i64": np.int64}

LOWERING = (
    "builtin.module("
    "func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith,tosa-to-tensor),"
    "{transform}"
    "one-shot-bufferize{{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map}},"
    "func.func(convert-linalg-to-loops),"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "func.func(arith-emulate-unsupported-floats{{source-types=bf16 target-type=f32}}),"
    "convert-math-to-llvm,convert-math-to-libm,"
    "convert-arith-to-llvm,convert-index-to-llvm,finalize-memref-to-llvm,"
    "convert-func-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)")

SOFTMAX_SCHEDULE = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %sm = transform.structured.match ops{["linalg.softmax"]} in %root : (!transform.any_op) -> !transform.any_op
    %d = transform.structured.decompose_interface %sm : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
"""


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("command failed: %s\n%s" % (" ".join(cmd), p.stderr))
    return p.stdout


def split_top(s):
    """Splits on commas outside <>, (), [] and {}."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [x.strip() for x in out]


def parse_type(t):
    m = re.fullmatch(r"tensor<([0-9x]*?)x?(f32|f16|bf16|f64|i1|i8|i32|i64)>", t)
    if not m:
        m0 = re.fullmatch(r"tensor<(f32|f16|bf16|f64|i1|i8|i32|i64)>", t)
        if m0:
            return (), m0.group(1)
        raise ValueError("unsupported argument type " + t)
    dims = tuple(int(d) for d in m.group(1).split("x") if d)
    return dims, m.group(2)


def signature(chunk):
    m = re.search(r"func\.func\s+@([\w$.]+)\s*\(", chunk)
    if not m:
        raise ValueError("no func.func in chunk")
    name, i, depth = m.group(1), m.end(), 1
    j = i
    while depth:
        depth += {"(": 1, ")": -1}.get(chunk[j], 0)
        j += 1
    args = [a.split(":", 1)[1].strip() for a in split_top(chunk[i:j - 1])]
    rest = chunk[j:]
    rm = re.match(r"\s*->\s*(\([^{]*\)|[^{]*?)\s*(attributes|\{)", rest)
    res = []
    if rm:
        r = rm.group(1).strip()
        if r.startswith("("):
            r = r[1:-1]
        res = split_top(r)
    return name, args, res


SCALARS = ("f32", "f16", "f64", "i1", "i8", "i32", "i64", "index")


def random_input(rng, t, directive):
    if t in SCALARS:
        if t.startswith("f"):
            return float(rng.standard_normal()), t
        lo, hi = 0, 8
        if directive and directive.startswith("range="):
            lo, hi = (int(x) for x in directive[6:].split(","))
        return int(rng.integers(lo, hi)), t
    dims, elem = parse_type(t)
    if directive == "causal01":
        lq, lk = dims[-2], dims[-1]
        tri = np.tril(np.ones((lq, lk), dtype=bool))
        return np.broadcast_to(tri, dims).copy(), elem
    if elem == "i1":
        return rng.random(dims) < 0.8, elem
    if elem.startswith("i"):
        lo, hi = 0, 8
        if directive and directive.startswith("range="):
            lo, hi = (int(x) for x in directive[6:].split(","))
        return rng.integers(lo, hi, size=dims).astype(ELEM[elem]), elem
    x = rng.standard_normal(dims)
    return x, elem


def dense(x, t, elem):
    """An exact dense constant (raw little-endian hex)."""
    if t in SCALARS:
        if t.startswith("f"):
            return "%s : %s" % (np.format_float_scientific(np.float32(x), unique=True), t)
        return "%d : %s" % (x, t)
    if elem == "i1":
        def nested(a):
            if a.ndim == 0:
                return "true" if a else "false"
            return "[" + ", ".join(nested(r) for r in a) + "]"
        return "dense<%s> : %s" % (nested(np.asarray(x)), t)
    if elem == "bf16":
        bits = (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        raw = bits.tobytes()
    else:
        raw = np.ascontiguousarray(np.asarray(x, ELEM[elem])).tobytes()
    return 'dense<"0x%s"> : %s' % (raw.hex().upper(), t)


def print_result(k, v, t):
    """Lines printing tensor `v` of type `t` as the i32 bits of its f32 value."""
    dims, elem = parse_type(t)
    shape = "x".join(str(d) for d in dims)
    ft = "tensor<%sxf32>" % shape if dims else "tensor<f32>"
    it = "tensor<%sxi32>" % shape if dims else "tensor<i32>"
    mt = "memref<%sxi32>" % shape if dims else "memref<i32>"
    n = len(dims)
    idmap = "affine_map<(%s) -> (%s)>" % (", ".join("d%d" % i for i in range(n)),
                                          ", ".join("d%d" % i for i in range(n)))
    par = ", ".join(['"parallel"'] * n)
    conv = {"f32": "", "f16": "arith.extf %a : f16 to f32",
            "bf16": "arith.extf %a : bf16 to f32"}[elem]
    body = ("%%f = %s\n      " % conv if conv else "") + \
        "%%b = arith.bitcast %s : f32 to i32\n      linalg.yield %%b : i32" % (
            "%f" if conv else "%a")
    return """
    %%e%(k)s = tensor.empty() : %(it)s
    %%g%(k)s = linalg.generic {indexing_maps = [%(m)s, %(m)s], iterator_types = [%(par)s]}
        ins(%(v)s : %(t)s) outs(%%e%(k)s : %(it)s) {
    ^bb0(%%a: %(el)s, %%o: i32):
      %(body)s
    } -> %(it)s
    %%m%(k)s = bufferization.to_buffer %%g%(k)s : %(it)s to %(mt)s
    %%u%(k)s = memref.cast %%m%(k)s : %(mt)s to memref<*xi32>
    func.call @printMemrefI32(%%u%(k)s) : (memref<*xi32>) -> ()
""" % dict(k=k, it=it, m=idmap, par=par, v=v, t=t, el=elem, body=body, mt=mt)


def strip_module(text):
    """Body of a printed `module { ... }` (printed with local scope)."""
    text = text.strip()
    m = re.match(r"module\s*(attributes\s*\{.*?\}\s*)?\{", text, re.S)
    if not m:
        return text
    return text[m.end():text.rstrip().rfind("}")]


def parse_outputs(text):
    blocks = text.split("Unranked Memref")[1:]
    outs = []
    for b in blocks:
        data = b.split("data =", 1)[1]
        ints = np.array([int(x) for x in re.findall(r"-?\d+", data)], dtype=np.int64)
        outs.append(ints.astype(np.uint32).view(np.float32))
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--opt", required=True)
    ap.add_argument("--mlir", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--transform", action="append", default=[],
                    help="flash-opt argument applied to the twin (repeatable)")
    ap.add_argument("--lower", action="append", default=None,
                    help="flash-opt arguments lowering flash ops "
                         "(default --flash-decompose-attention)")
    ap.add_argument("--expect", default=None,
                    help="text the transformed function must contain")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    lower = args.lower if args.lower is not None else ["--flash-decompose-attention"]

    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    text = open(args.file).read()
    chunks = re.split(r"^// -----\s*$", text, flags=re.M)
    passed, failed = 0, 0
    for idx, chunk in enumerate(chunks):
        if "func.func" not in chunk:
            continue
        directives = {}
        for line in re.findall(r"//\s*TWIN:(.*)", chunk):
            for item in line.split():
                k, _, v = item.partition("=")
                directives[k] = v
        name = signature(chunk)[0]
        if "skip" in directives:
            continue
        tol = float(directives.get("tol", args.tol))
        try:
            name, arg_types, res_types = signature(chunk)
            clean = "\n".join(l for l in chunk.splitlines()
                              if not l.lstrip().startswith("//"))
            twin = run([args.opt, "--mlir-print-local-scope", *args.transform],
                       stdin=clean)
            if args.expect and args.expect not in twin:
                raise RuntimeError("transformed IR does not contain '%s':\n%s" %
                                   (args.expect, twin))
            orig = run([args.opt, "--mlir-print-local-scope"], stdin=clean)
            rename = lambda s, new: re.sub(r"@%s\b" % re.escape(name), "@" + new, s)
            body = strip_module(rename(orig, "orig")) + strip_module(rename(twin, "twin"))
            lines, vals = [], []
            def static(t, key):
                d = directives.get(key, "")
                if not d.startswith("shape="):
                    return t
                return re.sub(r"<[0-9?x]*x(?=[a-z])", "<%sx" % d[6:], t, count=1)
            for a, t in enumerate(arg_types):
                st = static(t, "arg%d" % a)
                x, elem = random_input(rng, st, directives.get("arg%d" % a))
                lines.append("    %%in%d = arith.constant %s" % (a, dense(x, st, elem)))
                if st != t:
                    lines.append("    %%in%d_d = tensor.cast %%in%d : %s to %s" % (a, a, st, t))
                    vals.append("%%in%d_d" % a)
                else:
                    vals.append("%%in%d" % a)
            sig = "(%s) -> (%s)" % (", ".join(arg_types), ", ".join(res_types))
            for which in ("orig", "twin"):
                rs = ["%%%s_r%d" % (which, r) for r in range(len(res_types))]
                lhs = (", ".join(rs) + " = ") if rs else ""
                lines.append("    %scall @%s(%s) : %s" % (lhs, which, ", ".join(vals), sig))
                for r, t in enumerate(res_types):
                    st, v = static(t, "ret%d" % r), rs[r]
                    if st != t:
                        lines.append("    %s_s = tensor.cast %s : %s to %s" % (v, v, t, st))
                        v = v + "_s"
                    lines.append(print_result("%s%d" % (which, r), v, st))
            module = ("module {\n%s\n  func.func private @printMemrefI32(memref<*xi32>)\n"
                      "  func.func @main() {\n%s\n    return\n  }\n}\n" %
                      (body, "\n".join(lines)))
            lowered = run([args.opt, "--mlir-print-local-scope", *lower], stdin=module)
            sched = ""
            if "linalg.softmax" in lowered:
                lowered = lowered.rstrip()
                lowered = lowered[:lowered.rfind("}")] + SOFTMAX_SCHEDULE + "}\n"
                lowered = lowered.replace("module {", "module attributes {transform.with_named_sequence} {", 1)
                sched = "transform-interpreter,test-transform-dialect-erase-schedule,"
            llvm = run([args.mlir, "--pass-pipeline=" + LOWERING.format(transform=sched)],
                       stdin=lowered)
            libs = ["--shared-libs=" + os.path.join(args.lib_dir, l)
                    for l in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so")]
            out = run([args.runner, "-e", "main", "-entry-point-result=void", *libs],
                      stdin=llvm)
            outs = parse_outputs(out)
            n = len(res_types)
            if len(outs) != 2 * n or n == 0:
                raise RuntimeError("expected %d printed results, got %d" % (2 * n, len(outs)))
            worst = 0.0
            for r in range(n):
                a, b = outs[r].astype(np.float64), outs[n + r].astype(np.float64)
                if a.shape != b.shape or a.size == 0:
                    raise RuntimeError("result %d: shapes differ" % r)
                if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
                    raise RuntimeError("result %d: non-finite values" % r)
                norm = np.linalg.norm(a)
                if norm == 0.0:
                    raise RuntimeError("result %d: the original is all zeros" % r)
                worst = max(worst, np.linalg.norm(a - b) / norm)
            if worst > tol:
                raise RuntimeError("relative error %.3e > %.1e" % (worst, tol))
            print("PASS %s: rel err %.2e (tol %.0e)" % (name, worst, tol))
            passed += 1
        except Exception as e:  # report every chunk, then fail
            print("FAIL %s (seed %d): %s" % (name, seed, e))
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
