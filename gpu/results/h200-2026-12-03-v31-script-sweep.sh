#!/usr/bin/env bash
# prepared in session 29, not yet run: data for the waves rule's overhead away from kv=8192 and with
# q_len > 1 (the rule counts batches; the kernel runs a block per query token and split). Fixed split
# counts n = 1..4 (recipe files from `recipe show fast-wgmma-a8w8`, split.rule = fixed), one pass
# (run c's two passes agreed within 1%), bench gpu --reps 100, .gpu-bin/mlaref-new; then the same
# shapes with the recipe itself (the waves rule's own counts). About 5 min of device time.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref-new R=$OUT/rec
mkdir -p $R
for n in 1 2 3 4; do
  $M recipe show fast-wgmma-a8w8 | sed "s/^split.rule = .*/split.rule = fixed/; s/^split.count = .*/split.count = $n/" | grep -v "^# " > $R/wg-fixed$n.recipe
done
S=; for kv in 2048 4096 8192; do for bs in 72 88 104 120 136 152 176 216; do S="$S --shape bs=$bs,kv=$kv,seed=7"; done; done
for sh in bs=33,q=4,kv=8192 bs=48,q=2,kv=8192 bs=66,q=2,kv=4096 bs=20,q=4,kv=8192; do S="$S --shape $sh,seed=7"; done
for r in $R/wg-fixed1.recipe $R/wg-fixed2.recipe $R/wg-fixed3.recipe $R/wg-fixed4.recipe fast-wgmma-a8w8; do
  echo "== $r" >> $OUT/bench_sweep.txt
  $M bench gpu --recipe $r $S --reps 100 >> $OUT/bench_sweep.txt 2>&1
  date -u
done
grep -E "^== |^bs=" $OUT/bench_sweep.txt | awk '/^==/{print; next}{print $1, $3, $6, $11}'
