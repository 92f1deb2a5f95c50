#!/usr/bin/env bash
# session 22, device run e (an experiment, not landed): E (.gpu-bin/mlaref-E, the committed fe52ca6)
# against F (E with a lone split's two lse logs computed side by side after the stores, and the
# cluster merge's lse by the block's last 16 threads, which the merge loop leaves idle at 8 splits),
# alternated, twice, bench gpu --reps 100, into bench_alt.txt (no exactness gate: the session's device
# time was nearly spent; the change is gpu/results/h200-2026-12-02-v24-lse-pair.patch)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for pass in 1 2; do for b in mlaref-E mlaref-F; do
  echo "== pass $pass: $b" >> $OUT/bench_alt.txt
  $PWD/.gpu-bin/$b bench gpu --reps 100 >> $OUT/bench_alt.txt 2>&1
  grep -E "geomean" $OUT/bench_alt.txt | tail -3 | cut -c1-60
done; done
date -u
