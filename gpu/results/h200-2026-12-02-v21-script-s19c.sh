#!/usr/bin/env bash
# session 19, device run c: the cluster merge's change against the build before it (mlaref-base),
# alternated: bench gpu, fast-wgmma-a8w8 and fast-a8w8, the 8 bench shapes, 100 launches each, twice each
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# the racecheck report on bf16_3 with k_attn_ws forced (known since session 9, timing-dependent): where, both builds, three times each
.gpu-bin/mlaref-new gen --shape lens=1:70:300:33:129,q=2,page=16,fmt=bf16,seed=43 --out /tmp/bf16_3.safetensors >/dev/null
for b in new base new base new base; do
  MLAREF_FAST_WS=1 compute-sanitizer --tool racecheck --print-level info --error-exitcode 9 .gpu-bin/mlaref-$b gpu run --kernel fast --recipe fast-a8w16 \
    --set q.scale=dynamic --inputs /tmp/bf16_3.safetensors --out /tmp/san.safetensors > /tmp/rc.log 2>&1
  echo "racecheck bf16_3 mlaref-$b (MLAREF_FAST_WS=1): exit $? $(grep -E "RACECHECK SUMMARY" /tmp/rc.log)"; cat /tmp/rc.log >> $OUT/racecheck_bf16_3.txt
done
for pass in 1 2; do
  for b in base new; do
    echo "== pass $pass: mlaref-$b"
    .gpu-bin/mlaref-$b bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 --reps 100 2>&1 | tee $OUT/bench_${b}_${pass}.txt | grep -E "^bs=|geomean"
  done
done
date -u
