#!/usr/bin/env bash
# session 18: the read floor (mlr_gpu_fast_read_floor) beside the fast kernel: the bench shapes with the seeds' peers,
# the same with --flush clean, and a sweep of split lengths (bs=32: 1..32 tiles a block) and batch sizes at kv=8192
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee $OUT/gpu.txt
(cd .peers && OUT="$OUT" timeout 300 python3 seed_peers.py > "$OUT/peers.log" 2>&1) || { echo "seed_peers.py failed:"; tail -5 "$OUT/peers.log"; }
P=; [ -f "$OUT/peers.json" ] && P="--peers $OUT/peers.json"
$M bench gpu $P --reps 200 2>&1 | tee $OUT/bench_gpu.txt
$M bench gpu --flush clean --recipe fast-wgmma-a8w8 --reps 200 2>&1 | tee $OUT/bench_gpu_clean.txt
S=""; for kv in 512 1024 2048 4096 8192 16384; do S="$S --shape bs=32,kv=$kv,seed=$kv"; done
for bs in 4 8 16 64 128; do S="$S --shape bs=$bs,kv=8192,seed=$bs"; done
$M bench gpu $S --recipe fast-wgmma-a8w8 --reps 200 2>&1 | tee $OUT/sweep.txt
