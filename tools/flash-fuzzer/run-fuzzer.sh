#!/usr/bin/env bash
# Seeds a corpus from the lit inputs and runs the fuzzer on it.
# usage: run-fuzzer.sh FUZZER WORK_DIR SECONDS [libFuzzer options...]
# The corpus grows in WORK_DIR/corpus; crashes land in WORK_DIR/artifacts.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
fuzzer=$1 work=$2 seconds=$3
shift 3
/usr/bin/python3 "$HERE/make-corpus.py" "$ROOT" "$work/seeds"
mkdir -p "$work/corpus" "$work/artifacts"
# The build links the shared ASan runtime, which must come first (see
# CMakeLists.txt for the options).
export LD_PRELOAD="${LD_PRELOAD:-$(clang++-22 -print-file-name=libclang_rt.asan-x86_64.so)}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allow_user_poisoning=0}"
exec "$fuzzer" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
  -dict="$HERE/flash.dict" -artifact_prefix="$work/artifacts/" \
  -print_final_stats=1 "$@" "$work/corpus" "$work/seeds"
