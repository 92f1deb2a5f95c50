#!/usr/bin/env bash
# session 27, run d: (1) mlaref-head (207be99, as committed) against mlaref-p11, a timing probe whose
# cluster merge computes every output and lse but stores none (...-v29-probe-merge.patch, its second
# part), the 8 bench shapes alternated, two passes, fast-wgmma-a8w8; (2) gpu_run.sh's fastbench step
# on mlaref-head (every fast recipe, 200 launches, the seeds' Triton kernels beside it)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-p11
grep -E "^==|^bs=" $OUT/bench_alt.txt | awk '/^==/{print; next}{print $1, $6}'
BIN=mlaref-head bash "$(dirname "$0")/h200-2026-12-03-v28-script-s26c.sh"
