#!/usr/bin/env bash
# session 21, device run f: three copy modes (.gpu-bin/mlaref-new): the wgmma kernel's copy_lin at
# 2 to 16 tiles (LIN = 1, as committed), lin_copy (LIN = 2: the swizzle on the source side, a table a
# thread) in every k_attn_ws from 17 tiles; against the committed build (.gpu-bin/mlaref, 033fbe8),
# every recipe, alternated, twice
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for pass in 1 2; do for b in mlaref mlaref-new; do
  $PWD/.gpu-bin/$b bench gpu --reps 100 > $OUT/bench_${b}_$pass.txt 2>&1 || echo "$b: bench exit $?"
  grep -E "^bs=|geomean" $OUT/bench_${b}_$pass.txt | sed "s/^/$pass $b: /" | cut -c1-150
done; done
date -u
