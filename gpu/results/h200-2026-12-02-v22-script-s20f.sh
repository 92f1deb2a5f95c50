#!/usr/bin/env bash
# session 20, sixth run: what in the plan floor's body makes it 0.8 to 1.4 us slower than session 19's
# probe at bs=4, kv=1024 (launch and shared memory ruled out by s20e): an investigation build
# (mlaref-x: ...-v22-skel-variants.patch), MLR_SKEL_V bit 0 the probe's copy pattern (contiguous
# 16-byte chunks, 512 bytes a warp), bit 1 one wait for a split's (at most two) tiles, bit 2 no
# round of row-count loads in the merge; alternated, twice.
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref-x
R=/tmp/plans; mkdir -p $R
for S in 4 8; do $M recipe show fast-a8w8 | grep -v "^#" | sed -e "s/^split.rule = .*/split.rule = fixed/" -e "s/^split.count = .*/split.count = $S/" > $R/a8w8-s$S.recipe; done
for pass in 1 2; do
  for v in 0 1 2 4 7; do
    echo "== pass $pass: MLR_SKEL_V=$v"
    MLR_SKEL_V=$v $M bench gpu --shape bs=4,kv=1024,seed=4217 --shape bs=256,kv=1024,seed=9823 --recipe $R/a8w8-s4.recipe --recipe $R/a8w8-s8.recipe --recipe fast-a8w8 --reps 200 2>&1 | grep -E "^bs|rc=|fast kernel:" | sed "s#$R/##g" | cut -c1-170
  done
done 2>&1 | tee $OUT/skel_variants.txt
