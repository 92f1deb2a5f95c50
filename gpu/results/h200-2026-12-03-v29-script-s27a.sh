#!/usr/bin/env bash
# session 27, run a: timing probes of the wgmma kernel's logit chains (wrong results by design,
# bench only; ...-v29-probe-chains.patch, MLR_PROBE = 1, 2, 3), alternated with the committed
# build (mlaref-new = e335eac): how much of a tile's time the second chain and the fragments take
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-new mlaref-p1 mlaref-p2 mlaref-p3
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-100
