#!/usr/bin/env bash
# session 23, device run b: G (.gpu-bin/mlaref-new: k_attn_ws's final m and l handed to the PV warps by a
# named barrier, BAR_ML, arrive / sync, in place of the block barrier (e) that the two roles met at
# different __syncthreads) through session 21's gate (s19b with the lin variants: every edge, test,
# bench and bf16 cell exact, memcheck and racecheck); then racecheck on the bf16_3 cell with
# k_attn_ws forced, -lineinfo builds of the committed code (mlaref-L) and of G (mlaref-GL), three
# passes each, and the committed code on single-batch bf16 cells of 3 and 4 tiles; then the
# committed build (mlaref-H) and G alternated, bench gpu --reps 100, twice (bench_alt.txt)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
EDGE_VS="auto ws merge table lin lin2" SAN_VS="MLAREF_FAST_LIN=1 MLAREF_FAST_WS=1,MLAREF_FAST_LIN=2" \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
FD=/tmp/mlaref-fast
rc() { # binary, cell file, label
  MLAREF_FAST_WS=1 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 8 .gpu-bin/$1 gpu run --kernel fast \
    --recipe fast-a8w16 --set q.scale=dynamic --inputs $2 --out $FD/rc.safetensors > $FD/rc.log 2>&1
  echo "== racecheck $1 $3 (MLAREF_FAST_WS=1): exit $? $(grep -E 'RACECHECK SUMMARY' $FD/rc.log)"
  grep -E "hazard detected|Write Thread|Read Thread" $FD/rc.log | head -3
}
{
  for i in 1 2 3; do rc mlaref-L $FD/bf16/bf16_3.safetensors "bf16_3 pass $i"; rc mlaref-GL $FD/bf16/bf16_3.safetensors "bf16_3 pass $i"; done
  for kv in 129 193; do
    .gpu-bin/mlaref-H gen --shape bs=1,kv=$kv,fmt=bf16,seed=7 --out $FD/one_$kv.safetensors > /dev/null
    rc mlaref-L $FD/one_$kv.safetensors "bs=1,kv=$kv,fmt=bf16"
  done
} >> $OUT/notes.txt 2>&1
grep -E "^== racecheck" $OUT/notes.txt | cut -c1-150
date -u
bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-H mlaref-new
