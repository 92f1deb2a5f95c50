#!/usr/bin/env bash
# The test suite: configure and build the default preset, then run the CTest labels unit,
# exhaustive, golden, discrimination and gpu (GPU tests skip themselves, with a message, where no
# GPU is present). `scripts/test.sh --all` adds the label slow (the no-false-alarm runs on the
# larger bench shapes, about 15 minutes more on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default
if [ "${1:-}" = --all ]; then ctest --preset all; else ctest --preset default; fi
