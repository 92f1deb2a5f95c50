#!/usr/bin/env bash
# prepared in session 29, rewritten and run in session 30 (run a's sweep): data for the waves rule's
# overhead away from kv=8192 and with q_len > 1 (the rule counted batches; the kernel runs a block
# per query token and split). Per group of 8 shapes (bench gpu takes at most 16 shapes and 4
# recipes a call): fixed split counts n = 1..4 (recipe files from `recipe show fast-wgmma-a8w8`,
# split.rule = fixed) in one call, then the recipe itself (the waves rule's counts, split.per =
# batch) and, for the q_len > 1 group, split.per = token (session 30's key). One pass (run c's two
# passes agreed within 1%), bench gpu --reps 100, .gpu-bin/mlaref-new. Recipe files in /tmp/rec
# ($OUT keeps at most 8 files). KVS (default "2048 4096 8192") picks the q_len = 1 groups' KV
# lengths and QSH=0 leaves out the q_len > 1 group, so the sweep can be cut across calls of the
# device's 10 minutes.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref-new R=/tmp/rec
mkdir -p $R
for n in 1 2 3 4; do
  $M recipe show fast-wgmma-a8w8 | sed "s/^split.rule = .*/split.rule = fixed/; s/^split.count = .*/split.count = $n/" | grep -v "^# " > $R/wg-fixed$n.recipe
done
$M recipe show fast-wgmma-a8w8 | sed 's/^split.per = .*/split.per = token/' | grep -v "^# " > $R/wg-token.recipe
FIXED="--recipe $R/wg-fixed1.recipe --recipe $R/wg-fixed2.recipe --recipe $R/wg-fixed3.recipe --recipe $R/wg-fixed4.recipe"
group() { # name, the second call's recipes, shapes...
  local name=$1 own=$2; shift 2
  local sh=; for s in "$@"; do sh="$sh --shape $s,seed=7"; done
  echo "== $name: fixed 1..4" >> $OUT/bench_sweep.txt
  $M bench gpu $FIXED $sh --reps 100 >> $OUT/bench_sweep.txt 2>&1
  echo "== $name: own" >> $OUT/bench_sweep.txt
  $M bench gpu $own $sh --reps 100 >> $OUT/bench_sweep.txt 2>&1
  date -u
}
for kv in ${KVS-2048 4096 8192}; do
  group kv$kv "--recipe fast-wgmma-a8w8" $(for bs in 72 88 104 120 136 152 176 216; do echo bs=$bs,kv=$kv; done)
done
[ "${QSH:-1}" = 0 ] || group q "--recipe fast-wgmma-a8w8 --recipe $R/wg-token.recipe" bs=33,q=4,kv=8192 bs=48,q=2,kv=8192 \
  bs=66,q=2,kv=4096 bs=20,q=4,kv=8192 bs=16,q=4,kv=8192 bs=64,q=2,kv=8192 bs=8,q=4,kv=4096 bs=128,q=2,kv=4096
grep -E "^== |^bs=" $OUT/bench_sweep.txt | awk '/^==/{print; next}{print $1, $2, $3, $6}'
