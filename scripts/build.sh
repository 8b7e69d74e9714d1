#!/usr/bin/env bash
# Configures and builds flash-mlir in ./build against Debian's LLVM/MLIR 22.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FLASH_BUILD_DIR:-$ROOT/build}"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DPython3_EXECUTABLE=/usr/bin/python3 "${LAUNCHER[@]}"
fi
cmake --build "$BUILD" -j "$(nproc)"
