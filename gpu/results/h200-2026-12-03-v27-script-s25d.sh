#!/usr/bin/env bash
# session 25, device run d: a lone split's lse by the wgmma kernel's logit warps (while the PV warps
# store its outputs; its binary64 log was the last step of their path), and the cluster merge's lse by
# each block's last 16 threads (the fewest merge steps) instead of threads 0 .. 15. .gpu-bin/mlaref-new
# is that build, mlaref-head 231b05e. (1) s19b's checks, every recipe, every edge, test, bench
# and bf16 cell as launched, the edge and bf16 cells also with k_merge; memcheck and racecheck as
# launched (cut to fit the session's last device time); (2) the 8 bench shapes alternated, two passes.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
EDGE_VS="auto merge" SAN_BASE=MLAREF_FAST_WS=0 \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -vE "^(memcheck|racecheck) .*exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" | tail -20
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-100
date -u
