#!/usr/bin/env bash
# session 30, run b: the NVIDIA fast recipes with split.per = token (.gpu-bin/mlaref-new built from
# them; the kernels' code unchanged). The gate's checks (s19b: every recipe, every cell of every
# suite as launched, the edge and bf16 cells with the other kernel forced: the test suite's q_len = 2
# cells now take the token counts); q_len > 1 cells and a ragged one bit for bit against `mlaref run`
# with both fp8 recipes (cells.sh); the 8 bench shapes (default bench gpu: the counts there do not
# move); the q_len > 1 group of run a's sweep with the recipes themselves; memcheck and racecheck
# (the gate's san, 150 s).
set -u
R=$(dirname "$0")
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=.gpu-bin/mlaref-new
date -u
bash $R/h200-2026-12-03-v30-script-gate.sh checks
bash $R/h200-2026-12-03-v31-script-cells.sh bs=20,q=4,kv=8192 bs=33,q=4,kv=8192 bs=16,q=4,kv=8192 bs=8,q=3,kv=4096 \
  lens=300:5000:70:8192:3:2048,q=3 bs=140,kv=4096 | tee $OUT/waves_cells.txt
date -u
$M bench gpu --reps 100 > $OUT/bench_gpu.txt 2>&1
grep -E "^bs=|geomean" $OUT/bench_gpu.txt | cut -c1-150
$M bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 $(for s in bs=33,q=4,kv=8192 bs=48,q=2,kv=8192 bs=66,q=2,kv=4096 bs=20,q=4,kv=8192 \
  bs=16,q=4,kv=8192 bs=64,q=2,kv=8192 bs=8,q=4,kv=4096 bs=128,q=2,kv=4096; do echo --shape $s,seed=7; done) --reps 100 > $OUT/bench_q.txt 2>&1
grep -E "^bs=" $OUT/bench_q.txt | awk '{print $1, $2, $3, $6}'
date -u
bash $R/h200-2026-12-03-v30-script-gate.sh san 150
