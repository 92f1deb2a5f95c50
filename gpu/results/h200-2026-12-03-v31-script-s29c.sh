#!/usr/bin/env bash
# session 29, run c: the split rule away from the bench shapes. AITER's rule with 128 "CUs" gives
# bs >= 65 one or two splits, so bs = 133..200 run 2 waves of blocks with the second one part full,
# and bs=96 1.45 waves. Does a split count chosen for whole waves pay there? Fixed split counts
# (recipe files from `recipe show fast-wgmma-a8w8`, split.rule = fixed, split.count = n) against the
# recipe, the committed build (mlaref-head = 207be99), two passes, bench gpu --reps 100.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref-head R=$OUT/rec
mkdir -p $R
for n in 1 2 3 4 8; do
  $M recipe show fast-wgmma-a8w8 | sed "s/^split.rule = .*/split.rule = fixed/; s/^split.count = .*/split.count = $n/" | grep -v "^# " > $R/wg-fixed$n.recipe
done
S="--shape bs=96,kv=8192,seed=7 --shape bs=133,kv=8192,seed=7 --shape bs=160,kv=8192,seed=7 --shape bs=200,kv=8192,seed=7 --shape bs=133,kv=1024,seed=7 --shape bs=160,kv=1024,seed=7"
for pass in 1 2; do
  for r in fast-wgmma-a8w8 $R/wg-fixed1.recipe $R/wg-fixed2.recipe $R/wg-fixed3.recipe $R/wg-fixed4.recipe $R/wg-fixed8.recipe; do
    echo "== pass $pass: $r" >> $OUT/bench_waves.txt
    $M bench gpu --recipe $r $S --reps 100 >> $OUT/bench_waves.txt 2>&1
  done
  date -u
done
grep -E "^== |^bs=" $OUT/bench_waves.txt | awk '/^==/{print; next}{print $1, $3, $4, $6, $11, $12}'
