#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (lit + Python) via ctest.
# FLASH_SANITIZE=1: the same suite, plus a minute of fuzzing, in the ASan +
# UBSan build (./build-sanitize).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${FLASH_SANITIZE:-0}" == 1 ]]; then
  BUILD="${FLASH_BUILD_DIR:-$ROOT/build-sanitize}"
else
  BUILD="${FLASH_BUILD_DIR:-$ROOT/build}"
fi
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)"
