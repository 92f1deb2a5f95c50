#!/usr/bin/env bash
# session 26: the 8 bench shapes alternated, two passes, fast-wgmma-a8w8, mlaref-head against
# mlaref-new (.gpu-bin), into $OUT/bench_alt.txt, each shape's median printed; runs a and b began
# with it (as run, each script had these lines written out)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-100
date -u
