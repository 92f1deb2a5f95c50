#!/usr/bin/env bash
# session 31, run a (.gpu-bin/mlaref-new = the build of 419628b, as committed; the kernels and recipes
# of session 30's run b). part "checks": the gate's checks (every recipe, every suite cell as
# launched, the edge and bf16 cells with the other kernel forced), then the q_len > 1 pace: three
# grids of the same 132 blocks of 64 (32) tiles that differ only in how many blocks read each KV row
# (q_len 1: one block a batch; q_len 2 and 4: two and four blocks a batch, the same rows), both fp8
# recipes. part "bench": gpu_run.sh's fastbench step (every fast recipe, 200 launches, the seeds'
# Triton kernels beside it), then memcheck and racecheck (the gate's san, 150 s).
set -u
R=$(dirname "$0")
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=.gpu-bin/mlaref-new
case ${1:-} in
  checks)
    bash $R/h200-2026-12-03-v30-script-gate.sh checks
    $M bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 $(for s in bs=132,kv=8192 bs=66,q=2,kv=8192 bs=33,q=4,kv=8192 \
      bs=132,kv=4096 bs=66,q=2,kv=4096 bs=33,q=4,kv=4096; do echo --shape $s,seed=7; done) --reps 100 > $OUT/bench_qpace.txt 2>&1
    grep -E "^bs=" $OUT/bench_qpace.txt | cut -c1-150
    date -u ;;
  bench)
    BIN=mlaref-new bash $R/h200-2026-12-03-v28-script-s26c.sh
    bash $R/h200-2026-12-03-v30-script-gate.sh san 150 ;;
  *) echo "usage: $0 checks | bench" >&2; exit 2 ;;
esac
