#!/usr/bin/env bash
# session 23: the builds named in the arguments (files in .gpu-bin; "eager": mlaref-H under
# CUDA_MODULE_LOADING=EAGER) alternated, two passes, bench gpu --reps 100, into $OUT/bench_alt.txt;
# runs b, c and d end with it (as run, each script had this loop written out)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for pass in 1 2; do for b in "$@"; do
  echo "== pass $pass: $b" >> $OUT/bench_alt.txt
  if [ $b = eager ]; then CUDA_MODULE_LOADING=EAGER $PWD/.gpu-bin/mlaref-H bench gpu --reps 100 >> $OUT/bench_alt.txt 2>&1
  else $PWD/.gpu-bin/$b bench gpu --reps 100 >> $OUT/bench_alt.txt 2>&1; fi
  echo "$pass $b: $(grep -E "geomean" $OUT/bench_alt.txt | tail -3 | cut -c1-40 | tr '\n' ' ')"
done; done
date -u
