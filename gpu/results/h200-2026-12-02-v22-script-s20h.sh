#!/usr/bin/env bash
# session 20, device run h: the unpaged KV copies as contiguous 16-byte chunks (copy_rows, k_attn and
# k_attn_ws), built as .gpu-bin/mlaref-new: checked by session 19's run b (the same commands: gpu_run.sh's
# fast-step checks, every cell and variant, 6 at a time; memcheck and racecheck on the cluster cells),
# then its speed against the committed build.
set -u
bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
# speed: the committed build (mlaref, f9ba43a) against this one (mlaref-new), alternated, twice
for pass in 1 2; do for b in mlaref mlaref-new; do
  echo "== pass $pass: $b"
  $PWD/.gpu-bin/$b bench gpu --reps 100 2>&1 | tee $OUT/bench_${b}_$pass.txt | grep -E "^bs=|geomean" | cut -c1-150
done; done
date -u
