#!/usr/bin/env bash
# session 21, device run c: one-tile splits (bs=4, kv=1024: 8 splits of 128 rows) with and without the
# contiguous copies (MLAREF_FAST_LIN=1; the launch's rule takes them from 2 tiles), alternated 6 times,
# fast-wgmma-a8w8, mlaref-new (run b's build)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for k in 1 2 3 4 5 6; do for lin in default 1; do
  env $([ $lin = 1 ] && echo MLAREF_FAST_LIN=1) $PWD/.gpu-bin/mlaref-new bench gpu --shape bs=4,kv=1024,seed=4217 --shape bs=2,kv=1024,seed=77 \
    --recipe fast-wgmma-a8w8 --reps 200 2>&1 | grep -E "^bs=" | sed "s/^/$k lin=$lin: /" | cut -c1-140
done; done | tee $OUT/one_tile.txt
