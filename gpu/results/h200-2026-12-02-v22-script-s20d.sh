#!/usr/bin/env bash
# session 20, fourth run: other split plans at the bench shapes, the fast kernel and its plan floor
# side by side. The recipes are fast-wgmma-a8w8's and fast-a8w8's with split.rule = fixed,
# split.count = S, split.align = 64 (every other key the kernel's: it computes any split plan, the
# split keys not being among the ones its fit fixes), made here by `mlaref recipe show`.
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref
R=/tmp/plans; mkdir -p $R
for base in fast-wgmma-a8w8 fast-a8w8; do for S in 1 2 4 8 16 32 64; do
  $M recipe show $base | grep -v "^#" | sed -e "s/^split.rule = .*/split.rule = fixed/" -e "s/^split.count = .*/split.count = $S/" \
    -e "s/^split.align = .*/split.align = 64/" > $R/${base#fast-}-s$S.recipe
done; done
date -u
run() { # shape, then the split counts
  local shape=$1; shift
  for fam in wgmma-a8w8 a8w8; do
    local args=""; for S in "$@"; do args="$args --recipe $R/$fam-s$S.recipe"; done
    $M bench gpu --shape $shape $args --reps 200 2>&1 | grep -E "^(bs|shape)|^read floor|rc=" | sed "s#$R/##g"
  done
}
{
run bs=4,kv=1024,seed=4217 2 4 8 16
run bs=4,kv=8192,seed=4220 8 16 32 64
run bs=32,kv=1024,seed=5412 1 2 4 8
run bs=64,kv=1024,seed=1357 1 2 4
run bs=256,kv=1024,seed=9823 1 2
run bs=32,kv=8192,seed=5415 2 4 8
} | tee $OUT/plans.txt
date -u
