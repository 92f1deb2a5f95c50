#!/usr/bin/env bash
# session 21, device run b: the second version of the contiguous copies (k_attn_ws<0, 1, 1, 1>, the
# wgmma kernel only, unpaged splits of 2 to 16 tiles; the other kernels' PTX unchanged), built as
# .gpu-bin/mlaref-new: checked as session 19's run b checks (every cell and variant, plus the lin
# variant: MLAREF_FAST_LIN=1 on the edge and bf16 cells; memcheck and racecheck with it too), then
# its speed against the committed build, alternated, twice, and with MLAREF_FAST_LIN=1 once; the
# plan floor's other paths (a ragged paged batch, k_merge forced, a ragged unpaged batch with lin).
set -u
EDGE_VS="auto ws merge table lin" SAN_VS=MLAREF_FAST_LIN=1 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for pass in 1 2; do for b in mlaref mlaref-new; do
  date -u; echo "== pass $pass: $b"
  $PWD/.gpu-bin/$b bench gpu --reps 100 > $OUT/bench_${b}_$pass.txt 2>&1 || echo "bench exit $?"
  grep -E "^bs=|geomean" $OUT/bench_${b}_$pass.txt | cut -c1-150
done; done
date -u; echo "== mlaref-new, MLAREF_FAST_LIN=1"
MLAREF_FAST_LIN=1 $PWD/.gpu-bin/mlaref-new bench gpu --reps 100 --recipe fast-wgmma-a8w8 > $OUT/bench_mlaref-new_lin1.txt 2>&1 || echo "bench exit $?"
grep -E "^bs=|geomean" $OUT/bench_mlaref-new_lin1.txt | cut -c1-150
echo "== plan floor's other paths"
{ $PWD/.gpu-bin/mlaref-new bench gpu --shape lens=1:64:65:300,page=64,seed=10 --shape bs=3,kv=1000,page=16,seed=9 --reps 100 &&
  MLAREF_FAST_CLUSTER=0 $PWD/.gpu-bin/mlaref-new bench gpu --shape bs=4,kv=1024,seed=4217 --shape bs=64,kv=1024,seed=1357 --reps 100 &&
  MLAREF_FAST_LIN=1 $PWD/.gpu-bin/mlaref-new bench gpu --shape lens=1:300:700:2000:5000,seed=11 --shape lens=0:1:129:4000,seed=12 --recipe fast-wgmma-a8w8 --reps 100; } > $OUT/bench_plans.txt 2>&1; echo "plans exit $?"
grep -E "^(bs|lens)=" $OUT/bench_plans.txt | cut -c1-150
date -u
