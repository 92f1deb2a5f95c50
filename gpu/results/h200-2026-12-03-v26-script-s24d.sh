#!/usr/bin/env bash
# session 24, device run d: the persistent kernel against the non-persistent one, alternated, two
# passes, bench gpu --reps 100 on the two-wave shapes (and one one-wave shape): .gpu-bin/mlaref-I
# (5485e3a), -new with MLAREF_FAST_PERSIST=1 (the persistent kernel, a block an SM) and =0 (the
# same build launching a block a token), into $OUT/bench_alt.txt
# (Run e, 07:08 UTC; MLAREF_FAST_PERSIST exists only with h200-2026-12-03-v26-persistent.patch. As
# run, the alternation written out; h200-2026-12-02-v25-script-alt.sh now takes BIN:VAR=VALUE and
# ALT_ARGS for it, as s24e calls it.)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin
SH="--shape bs=256,kv=1024,seed=5 --shape bs=256,kv=8192,seed=9826 --shape bs=200,kv=1024,seed=4 --shape bs=133,kv=1024,seed=3 --shape bs=64,kv=1024,seed=1357"
date -u
for pass in 1 2; do for b in I new:1 new:0; do
  echo "== pass $pass: $b" >> $OUT/bench_alt.txt
  MLAREF_FAST_PERSIST=${b#*:} $B/mlaref-${b%%:*} bench gpu $SH --recipe fast-wgmma-a8w8 --reps 100 >> $OUT/bench_alt.txt 2>&1
done; done
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-120
date -u
