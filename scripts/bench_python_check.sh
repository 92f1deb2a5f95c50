#!/usr/bin/env bash
# mlaref.check from Python against `mlaref check`: bs=64, kv=4096 inputs from `mlaref gen`, the
# check timed inside one Python process from torch tensors (after import) and as the command on
# the same inputs file; prints both and their ratio (target: within 1.2x). Exit status 0 within
# the target, 1 beyond it. Usage: scripts/bench_python_check.sh [BUILD_DIR] [-- BENCH OPTIONS]
# (BUILD_DIR default build/default; options: python3 -m mlaref.bench --help).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/default
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ "${1:-}" = "--" ] && shift
if [ ! -f "$build/python/mlaref/libmlaref.so" ]; then
  echo "bench_python_check: $build/python/mlaref/libmlaref.so is missing: build first" \
    "(cmake --preset default && cmake --build --preset default)" >&2
  exit 2
fi
PYTHONPATH="$build/python" exec /usr/bin/python3 -m mlaref.bench --mlaref "$build/mlaref" "$@"
