#!/usr/bin/env python3
"""Seeds the fuzzer's corpus from every lit input: each `// -----` chunk of
each .mlir under test/ (and examples/) becomes one file, named by its hash.

usage: make-corpus.py SOURCE_ROOT OUT_DIR"""
import hashlib
import pathlib
import re
import sys

root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
count = 0
for path in sorted(list((root / "test").rglob("*.mlir")) + list((root / "examples").rglob("*.mlir"))):
    for chunk in re.split(r"^// -----.*$", path.read_text(), flags=re.M):
        # RUN/CHECK lines carry no IR; dropping them keeps seeds small.
        body = "\n".join(l for l in chunk.splitlines()
                         if not re.match(r"\s*// *(RUN|CHECK|[A-Z0-9-]+:)", l)).strip()
        if not body:
            continue
        data = (body + "\n").encode()
        (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
        count += 1
print("make-corpus: %d seeds in %s" % (count, out))
