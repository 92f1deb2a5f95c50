#!/usr/bin/env bash
# session 21, device run g: the three copy modes as committed (.gpu-bin/mlaref-new, run f's kernels;
# comments changed since, PTX identical), checked as session 19's run b checks plus the lin variants
# (MLAREF_FAST_LIN=1 for fast-wgmma-a8w8; MLAREF_FAST_WS=1 MLAREF_FAST_LIN=2 for every recipe, on the
# edge and bf16 cells; memcheck and racecheck with each), then gpu_run.sh's fastbench step once
# (its gpu_run.log and peers.log not brought back: the device run returns at most 8 files)
set -u
EDGE_VS="auto ws merge table lin lin2" SAN_VS="MLAREF_FAST_LIN=1 MLAREF_FAST_WS=1,MLAREF_FAST_LIN=2" \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
export LD_LIBRARY_PATH=$PWD/.gpu-bin
MLAREF_GPU_STEPS=fastbench MLAREF_GPU_CLI=$PWD/.gpu-bin/mlaref-new bash scripts/gpu_run.sh > $OUT/gpu_run_fastbench.log 2>&1
echo "fastbench: status $? $(tail -1 $OUT/gpu_run_fastbench.log)"
grep -E "^bs=|geomean|targets \(issue 8, every" $OUT/bench_gpu.txt | cut -c1-150
grep -E "^bs=256" $OUT/bench_gpu_sustained.txt | cut -c1-150
grep -E "^(bs|lens)=" $OUT/bench_gpu_plans.txt | cut -c1-150
rm -f $OUT/gpu_run.log $OUT/peers.log
date -u
