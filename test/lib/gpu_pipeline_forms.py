"""Every function of the given lit inputs (split at `// -----`), compiled
whole by flash-gpu-pipeline: each must give a module with a gpu.binary of an
attention kernel and host code with no flash op and no tensor left, or a
diagnostic from a GPU kernel's legality check that names what the kernel
does not take (such functions are listed in --refused). Prints one line per
function and a summary.

Usage: gpu_pipeline_forms.py FLASH_OPT [--refused NAME,...] FILE...
"""
import re
import subprocess
import sys


def chunks(path):
    text = open(path).read()
    for chunk in re.split(r"^// -----\s*$", text, flags=re.M):
        names = re.findall(r"^func\.func @([A-Za-z0-9_]+)", chunk, flags=re.M)
        if names:
            yield names[0], chunk


def main():
    opt = sys.argv[1]
    args = sys.argv[2:]
    refused = set()
    if args and args[0] == "--refused":
        refused = set(args[1].split(","))
        args = args[2:]
    passed = failed = 0
    for path in args:
        for name, chunk in chunks(path):
            r = subprocess.run([opt, "-", "--flash-gpu-pipeline=format=isa"], input=chunk,
                               capture_output=True, text=True)
            if name in refused:
                ok = r.returncode != 0 and "convert-flash-to-gpu:" in r.stderr
                why = "refused with a kernel diagnostic" if ok else "not refused as expected"
            else:
                ok = (r.returncode == 0 and "gpu.binary @flash_attention" in r.stdout
                      and not re.search(r"\bflash\.\w+ ", r.stdout)
                      and "tensor<" not in r.stdout)
                why = "compiled" if ok else (r.stderr.strip().splitlines() or ["no kernel"])[0]
            print("%s %s: %s" % ("PASS" if ok else "FAIL", name, why))
            passed += ok
            failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
