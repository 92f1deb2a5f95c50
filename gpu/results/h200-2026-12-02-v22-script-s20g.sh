#!/usr/bin/env bash
# session 20, seventh run: the copy pattern in the plan floor at the long-split shapes (s20f: the
# probe's contiguous 16-byte chunks, 512 bytes a warp instruction, took 3 us off the plan floor at
# bs=256, kv=1024): MLR_SKEL_V 0 (k_attn's pattern: 4 threads a row, a warp's instruction 8 rows of
# 64 bytes) against 1, alternated twice, the investigation build (mlaref-x)
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref-x
for pass in 1 2; do
  for v in 0 1; do
    echo "== pass $pass: MLR_SKEL_V=$v"
    MLR_SKEL_V=$v $M bench gpu --shape bs=32,kv=8192,seed=5415 --shape bs=64,kv=8192,seed=1360 --shape bs=256,kv=8192,seed=9826 --shape bs=256,kv=1024,seed=9823 --shape bs=64,kv=1024,seed=1357 --recipe fast-wgmma-a8w8 --reps 200 2>&1 | grep -E "^bs|plan floor geomean" | cut -c1-330
  done
done 2>&1 | tee $OUT/skel_copy.txt
