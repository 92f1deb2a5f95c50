#!/usr/bin/env bash
# session 15: the landed kernels' bench (fastbench) and paged shapes alternated against mlaref-base (HEAD 067e5b1)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin MLAREF_GPU_CLI=$PWD/.gpu-bin/mlaref
MLAREF_GPU_STEPS="fastbench" MLAREF_GPU_BIN=/tmp/gb OUT=$OUT bash scripts/gpu_run.sh > $OUT/fastbench.log 2>&1; echo "fastbench rc=$?"
for k in 1 2; do
for B in mlaref-base mlaref; do
  echo "== $B bench paged"; .gpu-bin/$B bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 --recipe fast-a16w8 --shape bs=32,kv=8192,seed=1 --shape bs=32,kv=8192,page=16,seed=1 --shape bs=64,kv=8192,page=64,seed=1 --shape bs=256,kv=1024,page=16,seed=1 --shape bs=64,kv=1024,page=3,seed=1 --reps 100 2>&1 | grep -E "fast-" | cut -c1-160
done
for B in mlaref-base mlaref; do
  echo "== $B bench"; .gpu-bin/$B bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 --reps 100 2>&1 | grep -E "fast-|floor" | cut -c1-160
done
done
