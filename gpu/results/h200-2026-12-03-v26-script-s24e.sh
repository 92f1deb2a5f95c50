#!/usr/bin/env bash
# session 24, device run f (NOT RUN: six calls between 07:52 and 08:34 UTC got no machine: three starts refused, three not tried): the lean persistent kernel (.gpu-bin/mlaref-lean, 5106ed8 with
# h200-2026-12-03-v26-persistent-lean.patch: the token walk as two integers a role) checked exact on
# the cells that take it (MLAREF_FAST_PERSIST=1 and 2; OCP KV only: the wgmma recipe refuses the
# others), then alternated as run e against .gpu-bin/mlaref-I (5485e3a), two passes
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin; SM=/tmp/mlaref-smoke; rm -rf $SM; mkdir -p $SM
date -u
$B/mlaref-I gen --suite edge --out $SM >/dev/null
for spec in bs=256,kv=1024,seed=5 bs=140,kv=300,seed=6 lens=2:1:129:700:5:33:256,q=2,seed=7; do
  $B/mlaref-I gen --shape $spec --out $SM/${spec%%,seed*}.safetensors >/dev/null; done
for f in $SM/*.safetensors; do case $f in *bf16* | *fnuz*) continue ;; esac; for per in 1 2; do
  MLAREF_FAST_PERSIST=$per timeout 60 $B/mlaref-lean gpu run --kernel fast --recipe fast-wgmma-a8w8 --inputs $f --out $SM/o.safetensors > $SM/run.log 2>&1; rc=$?
  [ $rc -eq 0 ] && { $B/mlaref-I check --inputs $f --output $SM/o.safetensors --recipe fast-wgmma-a8w8 --rule exact > $SM/check.log 2>&1; rc=$?; }
  echo "exact $(basename $f) PERSIST=$per: exit $rc $(grep -oE "k_attn[^ ]*( persistent\))?" $SM/run.log) $(grep -E "^rule" $SM/check.log | tr -s ' ')"
done; done
ALT_ARGS="--shape bs=256,kv=1024,seed=5 --shape bs=256,kv=8192,seed=9826 --shape bs=200,kv=1024,seed=4 --shape bs=133,kv=1024,seed=3 --recipe fast-wgmma-a8w8" \
  bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-I mlaref-lean:MLAREF_FAST_PERSIST=1 mlaref-lean:MLAREF_FAST_PERSIST=0
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-110
