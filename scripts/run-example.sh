#!/usr/bin/env bash
# The main job: set up, build, then take an example IR file (attention as a
# frontend writes it) through the whole pipeline and show what each stage did.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FLASH_BUILD_DIR:-$ROOT/build}"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh" >/dev/null
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
exec /usr/bin/python3 "$ROOT/examples/run_example.py" "$BUILD/bin/flash-opt" "$@"
