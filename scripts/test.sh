#!/usr/bin/env bash
# The test suite: configure and build the default preset, then run every CTest label but slow
# (GPU tests skip themselves, with a message, where no GPU is present). `scripts/test.sh --all`
# adds the label slow (the no-false-alarm runs and the bound on the larger bench shapes, about an
# hour more on 2 cores: BENCHMARKS.md, the test suite).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default
if [ "${1:-}" = --all ]; then ctest --preset all; else ctest --preset default; fi
