#!/usr/bin/env bash
# session 22, device run a: (1) the committed build (.gpu-bin/mlaref, 8a0c673) against A (lin_copy's
# table made by the loading threads only; host: the kernels' names from attn_kernel's choice) and B
# (A and the cluster merge's row sums by shuffles in the weights' pass, one barrier fewer),
# alternated, twice, bench gpu --reps 100, into one file; (2) B (.gpu-bin/mlaref-new) checked as
# session 21's run g checks it (s19b with the lin variants; memcheck and racecheck); (3) gpu_run.sh's
# fastbench step with B (its gpu_run.log, peers.log not brought back: 8 files at most).
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for pass in 1 2; do for b in mlaref mlaref-A mlaref-B; do
  date -u; echo "== pass $pass: $b" | tee -a $OUT/bench_alt.txt
  $PWD/.gpu-bin/$b bench gpu --reps 100 > $OUT/bench_one.txt 2>&1; cat $OUT/bench_one.txt >> $OUT/bench_alt.txt
  grep -E "^bs=|geomean" $OUT/bench_one.txt | cut -c1-150
done; done
rm -f $OUT/bench_one.txt
cp .gpu-bin/mlaref-B .gpu-bin/mlaref-new
bash "$(dirname "$0")/h200-2026-12-02-v24-script-s22-gate.sh" # (the same commands, written out in this file when it ran)
