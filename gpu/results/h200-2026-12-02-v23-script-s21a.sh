#!/usr/bin/env bash
# session 21, device run a: contiguous-chunk copies (copy_lin) for unpaged splits of 2 to 4 tiles
# (.gpu-bin/mlaref-new, the working tree: the first version, a runtime branch in k_attn, k_attn_ws and
# k_skel on p.lin_lo .. p.lin_hi tiles; not landed) against the committed build (.gpu-bin/mlaref, eab93b2),
# alternated, twice; then mlaref-new with MLAREF_FAST_LIN=1 (every unpaged split copied that way,
# with copy_lin's cheaper chunk address: an xor of the chunk index) once.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for pass in 1 2; do for b in mlaref mlaref-new; do
  date -u; echo "== pass $pass: $b"
  $PWD/.gpu-bin/$b bench gpu --reps 100 > $OUT/bench_${b}_$pass.txt 2>&1
  grep -E "^bs=|geomean" $OUT/bench_${b}_$pass.txt | cut -c1-150
done; done
date -u; echo "== mlaref-new, MLAREF_FAST_LIN=1"
MLAREF_FAST_LIN=1 $PWD/.gpu-bin/mlaref-new bench gpu --reps 100 > $OUT/bench_mlaref-new_lin1.txt 2>&1
grep -E "^bs=|geomean" $OUT/bench_mlaref-new_lin1.txt | cut -c1-150
date -u
