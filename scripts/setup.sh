#!/usr/bin/env bash
# Installs the Debian packages flash-mlir builds and tests with. Idempotent:
# only missing packages are installed, and nothing but apt is used.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ git
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libzstd-dev zlib1g-dev libcurl4-openssl-dev libedit-dev
  libomp-dev
  clang-22 libclang-rt-22-dev libfuzzer-22-dev
  python3 python3-numpy python3-pytest python3-torch
  python3-venv python3-pip python3-setuptools python3-wheel python3-build
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
