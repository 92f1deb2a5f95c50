#!/usr/bin/env bash
# session 19, device run d: the split-K skeleton (gpu/probes/split_floor.cu) at bs=4, kv=1024: 4, 8 and 16 splits, every mode, twice
set -u
nvcc -O3 -std=c++17 -arch=sm_90 gpu/probes/split_floor.cu -o /tmp/split_floor || exit 1
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  for pass in 1 2; do
    for S in 4 8 16; do
      for mode in read part merge ticket; do /tmp/split_floor 4 1024 $S $mode 100; done
    done
  done
  for S in 2 4 8; do /tmp/split_floor 4 512 $S merge 100; /tmp/split_floor 4 512 $S ticket 100; done
  date -u
} 2>&1 | tee "$OUT/split_floor_2.txt"
