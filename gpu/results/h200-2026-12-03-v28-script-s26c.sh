#!/usr/bin/env bash
# session 26, device run c: gpu_run.sh's fastbench step (every fast recipe, 200 launches, the seeds'
# Triton kernels beside it) with .gpu-bin/mlaref-head, the build of d05dc41 (as committed); run f:
# BIN=mlaref-new, the build of 407a3b7
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
MLAREF_GPU_STEPS=fastbench MLAREF_GPU_CLI=$PWD/.gpu-bin/${BIN:-mlaref-head} bash scripts/gpu_run.sh > $OUT/gpu_run_fastbench.log 2>&1
echo "fastbench: status $? $(tail -1 $OUT/gpu_run_fastbench.log)"
grep -E "^bs=|geomean|targets \(issue 8, every" $OUT/bench_gpu.txt | cut -c1-160
grep -E "^bs=256" $OUT/bench_gpu_sustained.txt | cut -c1-150
rm -f $OUT/gpu_run.log
date -u
