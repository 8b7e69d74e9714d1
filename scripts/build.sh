#!/usr/bin/env bash
# Configures and builds flash-mlir in ./build against Debian's LLVM/MLIR 22.
# FLASH_SANITIZE=1: the ASan + UBSan configuration (clang-22) in
# ./build-sanitize instead, with the libFuzzer target.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG=(-DCMAKE_BUILD_TYPE=Release)
if [[ "${FLASH_SANITIZE:-0}" == 1 ]]; then
  BUILD="${FLASH_BUILD_DIR:-$ROOT/build-sanitize}"
  CONFIG+=(-DFLASH_SANITIZE=ON -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22)
else
  BUILD="${FLASH_BUILD_DIR:-$ROOT/build}"
fi
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" "${CONFIG[@]}" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DPython3_EXECUTABLE=/usr/bin/python3 "${LAUNCHER[@]}"
fi
cmake --build "$BUILD" -j "$(nproc)"
