"""Builds every kind of CPU library the project produces — the main job's
example (unfused original and fused), the bf16/f16 integration cases (fused
and reference) — for this CPU and for the baseline x86-64 ISA, and fails
when one would need a symbol that only a compiler runtime defines.

Usage: library_symbols.py FLASH_OPT
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TEST, "lib"))
sys.path.insert(0, HERE)

import flash_cpu_runner as fcr  # noqa: E402
import host_symbols  # noqa: E402
from attention_matrix import LOWP_CASES  # noqa: E402

CPUS = ["native", "x86-64"]


def main():
    tools = fcr.Tools(flash_opt=sys.argv[1])
    with open(os.path.join(os.path.dirname(TEST), "examples", "attention.mlir")) as f:
        example = f.read()
    modules = [("example unfused", example, ""), ("example fused", example, "raise=1")]
    for case, _, opts in LOWP_CASES:
        modules += [(case.name + " fused", case.module_text(), opts),
                    (case.name + " reference", case.module_text(), "reference=1")]
    passed = failed = 0
    for label, text, opts in modules:
        for cpu in CPUS:
            with tempfile.TemporaryDirectory(prefix="flash-symbols-") as tmp:
                lib, obj = fcr.build_library(text, opts, tools, workdir=tmp, cpu=cpu)
                problems = host_symbols.check_library(lib, obj)
            ok = not problems
            print("%s %s -mcpu=%s%s" % ("PASS" if ok else "FAIL", label, cpu,
                                         "".join("\n    " + p for p in problems)))
            passed += ok
            failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
