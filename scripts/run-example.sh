#!/usr/bin/env bash
# The main job: set up, build, then take an example IR file through the
# pipeline stage by stage and show what each stage did.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FLASH_BUILD_DIR:-$ROOT/build}"
INPUT="${1:-$ROOT/examples/attention.mlir}"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh" >/dev/null
OPT="$BUILD/bin/flash-opt"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

count() { grep -oE '\b(flash|linalg|scf|vector|llvm)\.[a-z_]+' "$1" | sort | uniq -c | sort -rn | head -8 | sed 's/^/    /'; }

echo "== input: $INPUT"
cat "$INPUT"

echo
echo "== reference: flash-decompose-attention (unfused, materialises Lq x Lk scores)"
"$OPT" "$INPUT" --flash-decompose-attention > "$WORK/decomposed.mlir"
count "$WORK/decomposed.mlir"
grep -oE 'tensor<[0-9x]+x256x256xf32>' "$WORK/decomposed.mlir" | sort -u | sed 's/^/    score buffer: /'
