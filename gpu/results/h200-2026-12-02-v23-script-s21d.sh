#!/usr/bin/env bash
# session 21, device run d: gpu_run.sh's fastbench step (the seeds' peers, bench gpu with the read and
# plan floors, the sustained run, the plan floor's other paths) with the build of the code committed
# (.gpu-bin/mlaref-new: run b's kernels, comments changed since, PTX identical), twice; of the second
# pass only bench_gpu.txt comes back (the device run returns at most 8 files).
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for pass in 1 2; do
  mkdir -p $OUT/p$pass
  MLAREF_GPU_STEPS=fastbench MLAREF_GPU_CLI=$PWD/.gpu-bin/mlaref-new OUT=$OUT/p$pass bash scripts/gpu_run.sh > $OUT/p$pass/gpu_run_fastbench.log 2>&1
  echo "pass $pass: status $? $(tail -1 $OUT/p$pass/gpu_run_fastbench.log)"
  grep -E "geomean|targets \(issue 8, every" $OUT/p$pass/bench_gpu.txt | cut -c1-200
  grep -E "^bs=256" $OUT/p$pass/bench_gpu_sustained.txt | cut -c1-150
done
(cd $OUT/p2 && rm -f peers.json peers.log bench_gpu_sustained.txt bench_gpu_plans.txt gpu_run_fastbench.log)
date -u
