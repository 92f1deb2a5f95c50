#!/usr/bin/env bash
# session 19, device run e: a trace of k_attn's blocks with points inside the store and the cluster
# merge (mlaref-tr: gpu/results/h200-2026-12-02-v21-trace-merge.patch on 2402120), fast-a8w8, 100
# launches, the last one's points printed (block 0 / median / max over blocks, us from the first entry)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
T=.gpu-bin/mlaref-tr
date -u
for sh in bs=4,kv=1024,seed=4217 bs=4,kv=128,seed=5 bs=64,kv=1024,seed=1357 bs=4,kv=1024,seed=4217; do
  echo "== $sh fast-a8w8"
  MLAREF_FAST_TRACE=1 MLAREF_FAST_TRACE_PRINT=1 $T bench gpu --shape $sh --recipe fast-a8w8 --reps 100 2>$OUT/tr.txt | grep "fast-" | cut -c1-120
  grep "^trace" $OUT/tr.txt | tail -1 | tr ';' '\n'
done
