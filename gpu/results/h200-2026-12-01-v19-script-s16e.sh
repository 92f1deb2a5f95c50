#!/usr/bin/env bash
# session 16: the cost of cold code: the attention kernel run on token 0 with garbage KV between the flush and the timed launch (MLAREF_CODEWARM=1, an investigation build) against the same build without
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
for k in 1 2; do for e in MLAREF_CODEWARM=0 MLAREF_CODEWARM=1; do
  echo "== $e bench"; env $e .gpu-bin/mlaref-cw bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 --reps 100 2>&1 | grep -E "fast-|floor" | cut -c1-160
done; done
