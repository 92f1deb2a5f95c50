#!/usr/bin/env bash
# session 18 (the committed build): gpu_run.sh's fastbench step (the seeds' peers, bench gpu with the read floor, the sustained run),
# the bench shapes with --flush clean, and the mutant (the readers' last-words loop a word short: bench gpu must fail)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref
MLAREF_GPU_STEPS=fastbench MLAREF_GPU_CLI=$M bash scripts/gpu_run.sh > $OUT/gpu_run_fastbench.log 2>&1; echo "gpu_run fastbench exit $?" | tee -a $OUT/gpu_run_fastbench.log
$M bench gpu --flush clean --reps 200 > $OUT/bench_gpu_clean.txt 2>&1; echo "clean exit $?" >> $OUT/bench_gpu_clean.txt
.gpu-bin/mlaref-mut bench gpu --shape bs=4,kv=1024,seed=4217 --recipe fast-a8w8 --reps 100 > $OUT/mutant.txt 2>&1; echo "mutant exit $?" >> $OUT/mutant.txt
.gpu-bin/mlaref-mut bench gpu --shape bs=32,kv=8192,seed=5415 --recipe fast-a8w8 --reps 100 >> $OUT/mutant.txt 2>&1; echo "mutant exit $?" >> $OUT/mutant.txt
