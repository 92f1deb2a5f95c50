#!/usr/bin/env bash
# session 20, second run: the plan floor after its fixes (a token of one split in a plan with
# clusters takes part in its cluster's barriers; four threads a row and swizzled chunks, as k_attn
# copies; the rows' counts loaded across the cluster in one round): the edge shapes, the 8 bench
# shapes, the k_merge path forced, session 19's probe beside it.
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=.gpu-bin/mlaref
E=""
for s in bs=1,kv=1,seed=1 bs=1,kv=0,seed=2 bs=2,kv=33,seed=3 bs=3,kv=1000,seed=4 bs=2,kv=100,q=4,seed=5 bs=1,kv=3,q=4,seed=6 \
         bs=3,kv=1000,page=16,seed=9 lens=1:64:65:300,page=64,seed=10 bs=2,kv=500,fmt=e4m3fnuz,seed=11 lens=7:100,page=16,fmt=e4m3fnuz,seed=12; do E="$E --shape $s"; done
$M bench gpu $E --reps 100 > $OUT/bench_edge.txt 2>&1; echo "edge rc=$?" >> $OUT/bench_edge.txt
$M bench gpu > $OUT/bench_gpu.txt 2>&1; echo "bench rc=$?" >> $OUT/bench_gpu.txt
MLAREF_FAST_CLUSTER=0 $M bench gpu --shape bs=4,kv=1024,seed=4217 --shape bs=64,kv=1024,seed=1357 --reps 100 > $OUT/bench_kmerge.txt 2>&1; echo "kmerge rc=$?" >> $OUT/bench_kmerge.txt
nvcc -O3 -std=c++17 -arch=sm_90 gpu/probes/split_floor.cu -o /tmp/split_floor && for S in 8 4; do /tmp/split_floor 4 1024 $S merge; done > $OUT/split_floor.txt 2>&1
