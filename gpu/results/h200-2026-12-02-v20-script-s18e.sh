#!/usr/bin/env bash
# session 18, the committed build: an empty-KV shape and a small one (the read floor of no KV is a launch's), then the bench shapes again
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref
$M bench gpu --shape bs=1,kv=0,seed=1 --shape bs=4,kv=1024,seed=4217 --recipe fast-a8w8 --reps 100 > $OUT/empty.txt 2>&1; echo "exit $?" >> $OUT/empty.txt
$M bench gpu --peers .gpu-bin/peers-s18.json --reps 200 > $OUT/bench_gpu_3.txt 2>&1; echo "exit $?" >> $OUT/bench_gpu_3.txt
