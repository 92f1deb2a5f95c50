#!/usr/bin/env bash
# session 18: a block's result stored twice by the same code (mlaref-tr2: gpu/results/h200-2026-12-02-v20-trace-twice.patch):
# the second pass runs warm (its instructions fetched, its data in cache): cold code or arithmetic latency?
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
T=.gpu-bin/mlaref-tr2
for sh in bs=1,kv=0,seed=1 bs=4,kv=128,seed=5 bs=4,kv=1024,seed=4217 bs=32,kv=1024,seed=5412 bs=256,kv=1024,seed=9823; do
  for r in fast-a8w8; do
    echo "== $sh $r"
    MLAREF_FAST_TRACE=1 MLAREF_FAST_TRACE_PRINT=1 $T bench gpu --shape $sh --recipe $r --reps 100 2>$OUT/tr.txt | grep "fast-" | cut -c1-120
    grep "^trace" $OUT/tr.txt | tail -2
  done
done
