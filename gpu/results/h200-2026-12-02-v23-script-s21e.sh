#!/usr/bin/env bash
# session 21, device run e: copy_lin with the swizzle on the source side (lin_copy: a chunk's addresses
# a shift and a logic operation from a per-thread table; whole tiles without the zero-fill's
# predicates), .gpu-bin/mlaref-new, against the committed copy_lin (.gpu-bin/mlaref, 033fbe8):
# fast-wgmma-a8w8, the launch's rule (2 to 16 tiles) and MLAREF_FAST_LIN=1 (every split length),
# alternated, twice; the plan floor's check runs in each (the lin plan floor copies by lin_copy too)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for pass in 1 2; do for lin in rule 1; do for b in mlaref mlaref-new; do
  env $([ $lin = 1 ] && echo MLAREF_FAST_LIN=1) $PWD/.gpu-bin/$b bench gpu --recipe fast-wgmma-a8w8 --reps 100 > $OUT/bench_${b}_lin${lin}_$pass.txt 2>&1 || echo "$b lin=$lin: bench exit $?"
  grep -E "^bs=|geomean" $OUT/bench_${b}_lin${lin}_$pass.txt | sed "s/^/$pass $b lin=$lin: /" | cut -c1-160
done; done; done
date -u
