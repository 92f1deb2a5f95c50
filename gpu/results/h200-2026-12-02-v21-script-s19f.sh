#!/usr/bin/env bash
# session 19, device run f: the split-K skeleton's merge through distributed shared memory (merge)
# against the same merge with the partials through the L2 (gmerge), gpu/probes/split_floor.cu
set -u
nvcc -O3 -std=c++17 -arch=sm_90 -Werror=all-warnings gpu/probes/split_floor.cu -o /tmp/split_floor || exit 1
{
  date -u
  for pass in 1 2; do
    for S in 4 8 16; do for mode in part merge gmerge; do /tmp/split_floor 4 1024 $S $mode 200; done; done
    for mode in part merge gmerge; do /tmp/split_floor 64 1024 2 $mode 200; done
    for mode in part merge gmerge; do /tmp/split_floor 64 512 2 $mode 200; done
  done
  date -u
} 2>&1 | tee "$OUT/split_floor_gmerge.txt"
