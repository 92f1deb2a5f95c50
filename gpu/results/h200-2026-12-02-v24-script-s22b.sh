#!/usr/bin/env bash
# session 22, device run b: (1) the committed build (.gpu-bin/mlaref, 8a0c673), B (run a's: lin_copy's
# table by the loaders only, the cluster merge's row sums by shuffles) and D (B and the outputs'
# division by fast_div.h: one IEEE division a row, then mlr__div_by; the merges' bf16 codes by
# cvt.rn.bf16x2), alternated, twice, bench gpu --reps 100, into bench_alt.txt; (2) gpu/probes/
# cvt_probe.cu with the division check (built here: .gpu-bin/cvt_probe) into notes.txt; (3) D
# (.gpu-bin/mlaref-new) checked as run a checked B, the racecheck reports' first lines into notes.txt;
# (4) gpu_run.sh's fastbench step with D (its gpu_run.log, peers.log and peers.json not brought back).
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
{ echo "== cvt_probe"; .gpu-bin/cvt_probe; echo "cvt_probe: exit $?"; } 2>&1 | tee $OUT/notes.txt
for pass in 1 2; do for b in mlaref mlaref-B mlaref-D; do
  date -u; echo "== pass $pass: $b" | tee -a $OUT/bench_alt.txt
  $PWD/.gpu-bin/$b bench gpu --reps 100 > $OUT/bench_one.txt 2>&1; cat $OUT/bench_one.txt >> $OUT/bench_alt.txt
  grep -E "^bs=|geomean" $OUT/bench_one.txt | grep -E "wgmma|geomean" | cut -c1-110
done; done
rm -f $OUT/bench_one.txt
cp .gpu-bin/mlaref-D .gpu-bin/mlaref-new
NOTES=1 bash "$(dirname "$0")/h200-2026-12-02-v24-script-s22-gate.sh" # (the same commands, written out in this file when it ran)
