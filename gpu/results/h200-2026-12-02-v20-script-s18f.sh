#!/usr/bin/env bash
# session 18: the fast kernel's fixed cost. (1) the launch floor's k_nop with the attention kernel's dynamic shared memory and threads
# (mlaref-nop: investigation build, MLAREF_NOP_SMEM / MLAREF_NOP_THREADS); (2) shapes with no KV (the kernel's work without tiles)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for k in 1 2; do
for cfg in "0 256" "0 384" "49152 256" "116000 256" "231744 256" "231744 384"; do set -- $cfg
  echo "nop smem=$1 threads=$2: $(MLAREF_NOP_SMEM=$1 MLAREF_NOP_THREADS=$2 .gpu-bin/mlaref-nop bench gpu --shape bs=1,kv=0,seed=1 --recipe fast-a8w8 --reps 100 2>&1 | grep 'launch floor' | sed 's/.*201): //')"
done; done
S="--shape bs=1,kv=0,seed=1 --shape bs=4,kv=0,seed=2 --shape bs=32,kv=0,seed=3 --shape bs=132,kv=0,seed=4 --shape bs=4,kv=128,seed=5 --shape bs=4,kv=1024,seed=4217"
.gpu-bin/mlaref bench gpu $S --reps 100 2>&1 | cut -c1-175
MLAREF_FAST_WS=1 .gpu-bin/mlaref bench gpu $S --recipe fast-a8w8 --reps 100 2>&1 | grep "fast-a8w8 " | cut -c1-175 | sed 's/^/WS=1 /'
.gpu-bin/mlaref bench gpu $S --flush clean --reps 100 2>&1 | grep "fast-" | cut -c1-175 | sed 's/^/clean /'
