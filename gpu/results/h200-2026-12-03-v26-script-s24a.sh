#!/usr/bin/env bash
# session 24, device run a: the persistent kernel (.gpu-bin/mlaref-new) first on the cells that take
# it, each under a time limit (a hang stops the run here), then s19b's checks with the per variant
# (MLAREF_FAST_PERSIST=2) and memcheck / racecheck with it, the bench shapes alternated against
# .gpu-bin/mlaref-I (the committed build, 5485e3a), and gpu_run.sh's fastbench step
# (Runs a, 06:36 UTC, and d, 07:06 UTC. MLAREF_FAST_PERSIST and s19b's per variant exist only with
# h200-2026-12-03-v26-persistent.patch applied, which did not land. Both runs stopped after the smoke
# step: the smoke counted the recipe's refusal of the bf16 and FNUZ cells as failures.)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin
S=$(dirname "$0")
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SM=/tmp/mlaref-smoke; rm -rf $SM; mkdir -p $SM
{ ok=1
  $B/mlaref-new gen --suite edge --out $SM >/dev/null
  for spec in bs=256,kv=1024,seed=5 bs=140,kv=300,seed=6 lens=2:1:129:700:5:33:256,q=2,seed=7; do
    $B/mlaref-new gen --shape $spec --out $SM/${spec%%,seed*}.safetensors >/dev/null; done
  for f in $SM/*.safetensors; do for per in 1 2; do
    MLAREF_FAST_PERSIST=$per timeout 60 $B/mlaref-new gpu run --kernel fast --recipe fast-wgmma-a8w8 --inputs $f --out $SM/o.safetensors > $SM/run.log 2>&1
    rc=$?; [ $rc -eq 0 ] && { $B/mlaref-new check --inputs $f --output $SM/o.safetensors --recipe fast-wgmma-a8w8 --rule exact > $SM/check.log 2>&1; rc=$?; }
    echo "smoke $(basename $f) PERSIST=$per: exit $rc $(grep -oE "k_attn[^ ]*( persistent\))?" $SM/run.log) $(tail -1 $SM/run.log | grep -v "^gpu run" | cut -c1-120) $(grep -E "^rule" $SM/check.log | tr '\n' ' ' | cut -c1-100)"
    [ $rc -eq 0 ] || ok=0
  done; done
  timeout 120 $B/mlaref-new bench gpu --shape bs=256,kv=1024,seed=5 --shape bs=140,kv=300,seed=6 --reps 100 | grep -E "^bs=|kernels|persistent" | cut -c1-200 || ok=0
  echo "smoke ok=$ok"; } > $OUT/notes.txt 2>&1
cat $OUT/notes.txt
grep -q "smoke ok=1" $OUT/notes.txt || { date -u; exit 1; }
EDGE_VS="auto ws merge table lin lin2 per" SAN_VS="MLAREF_FAST_LIN=1 MLAREF_FAST_WS=1,MLAREF_FAST_LIN=2 MLAREF_FAST_PERSIST=2" \
  bash $S/h200-2026-12-02-v21-script-s19b.sh | grep -vE "^(memcheck|racecheck) .*exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" | tail -30
bash $S/h200-2026-12-02-v25-script-alt.sh mlaref-I mlaref-new
MLAREF_GPU_STEPS=fastbench MLAREF_GPU_CLI=$B/mlaref-new bash scripts/gpu_run.sh > $OUT/gpu_run_fastbench.log 2>&1
echo "fastbench: status $? $(tail -1 $OUT/gpu_run_fastbench.log)"
grep -E "^bs=|geomean|targets \(issue 8, every" $OUT/bench_gpu.txt | cut -c1-160
grep -E "^bs=256" $OUT/bench_gpu_sustained.txt | cut -c1-150
rm -f $OUT/gpu_run.log $OUT/peers.log $OUT/gpu_run_fastbench.log
date -u
