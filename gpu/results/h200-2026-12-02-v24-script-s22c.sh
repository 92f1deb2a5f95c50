#!/usr/bin/env bash
# session 22, device run c: B (run a's), D (run b's: the outputs' division by fast_div.h in the lone
# split's store and in both merges) and E (D with the merges dividing by the IEEE division again, their
# bf16 codes still by cvt.rn.bf16x2), alternated, twice, bench gpu --reps 100, into bench_alt.txt
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for pass in 1 2; do for b in mlaref-B mlaref-D mlaref-E; do
  date -u; echo "== pass $pass: $b" | tee -a $OUT/bench_alt.txt
  $PWD/.gpu-bin/$b bench gpu --reps 100 > $OUT/bench_one.txt 2>&1; cat $OUT/bench_one.txt >> $OUT/bench_alt.txt
  grep -E "geomean" $OUT/bench_one.txt | cut -c1-60
done; done
rm -f $OUT/bench_one.txt
date -u
