#!/usr/bin/env bash
# session 19, device run a: the split-K skeleton's floor (gpu/probes/split_floor.cu) at bs=4, kv=1024 (an earlier version of gpu/probes/split_floor.cu; it then copied at most 128 rows a block (106,496 bytes of shared memory, 180,224 now), and its first
# run (split-floor-first.txt) filled the partial by a byte at (37 i) mod the rows' bytes, an integer
# division a value; the second (split-floor.txt) as now)
set -u
nvcc -O3 -std=c++17 -arch=sm_90 gpu/probes/split_floor.cu -o /tmp/split_floor || exit 1
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  for pass in 1 2; do
    for S in 8 16; do
      for mode in read part merge; do /tmp/split_floor 4 1024 $S $mode 100; done
    done
    for S in 8 16; do /tmp/split_floor 4 1024 $S merge 100; done
  done
  /tmp/split_floor 4 512 8 merge 100; /tmp/split_floor 4 512 4 merge 100; /tmp/split_floor 4 256 2 merge 100
  /tmp/split_floor 4 128 1 part 100; /tmp/split_floor 4 128 1 read 100
  /tmp/split_floor 64 1024 8 merge 100; /tmp/split_floor 64 1024 8 read 100
} 2>&1 | tee "$OUT/split_floor.txt"
