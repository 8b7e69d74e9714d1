"""No silent misses, over the whole lit suite: every `// -----` piece of every .mlir input
under the test tree that holds an exponential goes through flash-opt's
test-flash-raise-census, which counts the softmaxes over a matmul's output by its own
definition and checks that each one is fused by flash-raise-attention or explained by a
remark. Pieces that do not parse or verify (the suite's invalid-IR tests) are not IR to
raise and are skipped. Prints the totals and every silent miss; exits 1 on one.

usage: raise_census.py FLASH_OPT ROOT..."""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

CENSUS = re.compile(r"^census: softmaxes (\d+) fused (\d+) remarked (\d+) silent (\d+)",
                    re.M)


def pieces(path):
    with open(path) as f:
        text = f.read()
    # The suite's diagnostics checks are not the census's business.
    text = "\n".join(l for l in text.split("\n") if "expected-" not in l)
    return re.split(r"^// -----\s*$", text, flags=re.M)


def census(flash_opt, path, n, piece):
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(piece)
        name = f.name
    try:
        env = dict(os.environ)
        env.pop("FLASH_VERIFY_ROUNDTRIP", None)  # the census is what is tested here
        r = subprocess.run([flash_opt, "--test-flash-raise-census", name, "-o", os.devnull],
                           capture_output=True, text=True, env=env, timeout=600)
    finally:
        os.unlink(name)
    m = CENSUS.search(r.stderr)
    if not m:
        return path, n, None, r.stderr  # not IR the raise can take: skipped
    return path, n, tuple(int(x) for x in m.groups()), r.stderr.replace(name, "%s#%d" % (path, n))


def main():
    flash_opt, roots = sys.argv[1], sys.argv[2:]
    jobs = []
    for root in roots:
        for d, _, files in sorted(os.walk(root)):
            for fn in sorted(files):
                if fn.endswith(".mlir"):
                    path = os.path.join(d, fn)
                    for n, piece in enumerate(pieces(path)):
                        if "exp" in piece or "softmax" in piece:
                            jobs.append((path, n, piece))
    totals = [0, 0, 0, 0]
    checked = skipped = 0
    misses = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for path, n, counts, err in pool.map(lambda j: census(flash_opt, *j), jobs):
            if counts is None:
                skipped += 1
                continue
            checked += 1
            for k in range(4):
                totals[k] += counts[k]
            if counts[3]:
                misses.append("%s (piece %d):\n%s" % (path, n, err))
    print("pieces %d checked %d skipped %d" % (len(jobs), checked, skipped))
    print("softmaxes %d fused %d remarked %d silent %d" % tuple(totals))
    for m in misses:
        print("SILENT MISS in", m)
    if totals[0] != totals[1] + totals[2] or misses:
        sys.exit(1)


if __name__ == "__main__":
    main()
