#!/usr/bin/env bash
# session 16: why does fast-a8w8 at bs=4, kv=8192 (k_attn + k_merge, no cluster) move by 2 us between builds that differ only in the cluster merge's code? ncu warp states, both builds
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
D=/tmp/q; mkdir -p $D
NCU=/usr/local/cuda/bin/ncu
.gpu-bin/mlaref gen --shape bs=4,kv=8192,seed=4220 --out $D/b4.safetensors >/dev/null
for B in mlaref-s15 mlaref; do
  echo "=== $B"
  $NCU --kernel-name regex:k_attn --launch-count 1 --section WarpStateStats --section SpeedOfLight \
    .gpu-bin/$B gpu run --kernel fast --recipe fast-a8w8 --inputs $D/b4.safetensors --out $D/o.safetensors 2>&1 | grep -v "^==PROF==" | grep -E "k_attn|Duration|Stall|Warp Cycles" | head -40
  $NCU --kernel-name regex:k_attn --launch-count 1 --metrics smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warp_latency_issue_stalled_no_instruction.ratio,smsp__inst_executed.sum,smsp__cycles_active.avg,gpu__time_duration.sum \
    .gpu-bin/$B gpu run --kernel fast --recipe fast-a8w8 --inputs $D/b4.safetensors --out $D/o.safetensors 2>&1 | grep -v "^==PROF==" | tail -8
done
