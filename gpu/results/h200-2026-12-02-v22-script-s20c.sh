#!/usr/bin/env bash
# session 20, third run: gpu_run.sh's fastbench step as committed (the seeds' peers, bench gpu with
# the read floor and the plan floor, the sustained run, the plan floor's other paths), twice
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref
date -u
for pass in 1 2; do
  mkdir -p $OUT/p$pass
  MLAREF_GPU_STEPS=fastbench MLAREF_GPU_CLI=$M OUT=$OUT/p$pass bash scripts/gpu_run.sh > $OUT/p$pass/gpu_run_fastbench.log 2>&1; echo "gpu_run fastbench pass $pass exit $?" | tee -a $OUT/p$pass/gpu_run_fastbench.log
done
date -u
