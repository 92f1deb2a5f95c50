#!/usr/bin/env bash
# session 15: which change slowed the small unpaged shapes: base (HEAD), A (kv_ref only), pad (HEAD, fparams 32 bytes larger), mlaref (all three)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
echo "== cvt_probe"; .gpu-bin/cvt_probe
S="--shape bs=4,kv=1024,seed=4217 --shape bs=4,kv=8192,seed=4220 --shape bs=32,kv=1024,seed=5412 --shape bs=64,kv=1024,seed=1357 --shape bs=32,kv=8192,page=16,seed=1"
for k in 1 2; do
for B in mlaref-base mlaref-A mlaref-pad mlaref; do
  echo "== $B bench"; .gpu-bin/$B bench gpu --recipe fast-wgmma-a8w8 $S --reps 100 2>&1 | grep -E "fast-|floor" | cut -c1-160
done
done
