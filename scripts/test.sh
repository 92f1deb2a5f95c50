#!/usr/bin/env bash
# The whole test suite: configure and build the default preset, then run every CTest label
# (unit, exhaustive, golden, gpu, slow). GPU tests skip themselves, with a message, where no
# GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default
