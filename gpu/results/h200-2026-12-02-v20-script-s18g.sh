#!/usr/bin/env bash
# session 18: where a lone block's fixed cost goes (mlaref-tr: investigation build, gpu/results/h200-2026-12-02-v20-trace.patch:
# %globaltimer stamps of thread 0 in k_attn; MLAREF_NOFLUSH=1: the timed launches without the L2 flush)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
T=.gpu-bin/mlaref-tr
for sh in bs=1,kv=0,seed=1 bs=4,kv=128,seed=5 bs=132,kv=0,seed=4 bs=4,kv=1024,seed=4217 bs=32,kv=1024,seed=5412; do
  for r in fast-a8w8 fast-a16w8; do
    echo "== $sh $r"
    MLAREF_FAST_TRACE=1 MLAREF_FAST_TRACE_PRINT=1 $T bench gpu --shape $sh --recipe $r --reps 100 2>$OUT/tr.txt | grep "fast-" | cut -c1-120
    grep "^trace" $OUT/tr.txt | tail -2
  done
done
echo "== no flush (timing only)"
for k in 1 2; do for e in MLAREF_NOFLUSH_OFF=1 MLAREF_NOFLUSH=1; do
  echo "$e: $(env $e $T bench gpu --shape bs=1,kv=0,seed=1 --shape bs=4,kv=128,seed=5 --shape bs=4,kv=1024,seed=4217 --shape bs=32,kv=1024,seed=5412 --recipe fast-a8w8 --recipe fast-wgmma-a8w8 --reps 100 2>&1 | grep 'fast-' | awk '{print $1, $2, $6}' | tr '\n' ';')"
done; done
