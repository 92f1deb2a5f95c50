#!/usr/bin/env bash
# session 24, device run c: which change broke the multi-tile cells (run b): .gpu-bin/mlaref-I (5485e3a),
# -new (the persistent kernel), -X1 (5485e3a with SM_FLAG = 448 only), -X3 (new without the
# persistent plan: 48 attribute calls, no occupancy query), each on two cells, checked exact
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin; SM=/tmp/sm; rm -rf $SM; mkdir -p $SM
$B/mlaref-I gen --suite edge --out $SM >/dev/null
$B/mlaref-I gen --shape bs=140,kv=300,seed=6 --out $SM/b140.safetensors >/dev/null
for c in b140 bs3_kv1000; do f=$SM/$c.safetensors
  for b in I new X1 X3; do
    MLAREF_FAST_PERSIST=0 timeout 60 $B/mlaref-$b gpu run --kernel fast --recipe fast-wgmma-a8w8 --inputs $f --out $SM/o.$c.$b.safetensors > $SM/run.log 2>&1
    echo "$c $b: run $? $($B/mlaref-I check --inputs $f --output $SM/o.$c.$b.safetensors --recipe fast-wgmma-a8w8 --rule exact 2>&1 | grep -E "^rule")"
  done
done
