#!/usr/bin/env bash
# session 18: the mutant again with the CLI's exit codes as landed (a reader's failed check: exit 1), and a second bench gpu beside run 3's peers
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
.gpu-bin/mlaref-mut bench gpu --shape bs=4,kv=1024,seed=4217 --recipe fast-a8w8 --reps 100 > $OUT/mutant.txt 2>&1; echo "mutant exit $?" >> $OUT/mutant.txt
.gpu-bin/mlaref bench gpu --peers .gpu-bin/peers-s18.json --reps 200 > $OUT/bench_gpu_2.txt 2>&1; echo "exit $?" >> $OUT/bench_gpu_2.txt
