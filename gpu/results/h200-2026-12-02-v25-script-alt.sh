#!/usr/bin/env bash
# session 23: the builds named in the arguments (files in .gpu-bin; "eager": mlaref-H under
# CUDA_MODULE_LOADING=EAGER) alternated, two passes, bench gpu --reps 100, into $OUT/bench_alt.txt;
# runs b, c and d end with it (as run, each script had this loop written out). Session 24: an
# argument BIN:VAR=VALUE runs BIN with that setting in its environment, and $ALT_ARGS (shapes,
# recipes) is added to bench gpu's arguments; without either, the commands are session 23's.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for pass in 1 2; do for b in "$@"; do
  echo "== pass $pass: $b" >> $OUT/bench_alt.txt
  setting=; case $b in *:*=*) setting=${b#*:} ;; esac
  if [ $b = eager ]; then CUDA_MODULE_LOADING=EAGER $PWD/.gpu-bin/mlaref-H bench gpu --reps 100 >> $OUT/bench_alt.txt 2>&1
  else env $setting $PWD/.gpu-bin/${b%%:*} bench gpu ${ALT_ARGS:-} --reps 100 >> $OUT/bench_alt.txt 2>&1; fi
  echo "$pass $b: $(grep -E "geomean" $OUT/bench_alt.txt | tail -3 | cut -c1-40 | tr '\n' ' ')"
done; done
date -u
