#!/usr/bin/env bash
# session 20, fifth run: why the plan floor at bs=4, kv=1024 is above session 19's probe (split_floor,
# its merge mode: 6.6 us at 4 splits, 7.1 at 8): the plan floor's launch without programmatic
# dependent launch (MLR_SKEL_NOPDL) and with the probe's 184,320 bytes of dynamic shared memory
# (MLR_SKEL_SMEM), an investigation build (mlaref-x: ...-v22-skel-launch.patch); the probe beside.
export LD_LIBRARY_PATH=$PWD/.gpu-bin
M=$PWD/.gpu-bin/mlaref-x
R=/tmp/plans; mkdir -p $R
for S in 4 8; do $M recipe show fast-a8w8 | grep -v "^#" | sed -e "s/^split.rule = .*/split.rule = fixed/" -e "s/^split.count = .*/split.count = $S/" > $R/a8w8-s$S.recipe; done
nvcc -O3 -std=c++17 -arch=sm_90 probe-old/split_floor.cu -o /tmp/split_floor
for pass in 1 2; do
  for v in "" "MLR_SKEL_NOPDL=1" "MLR_SKEL_SMEM=184320" "MLR_SKEL_NOPDL=1 MLR_SKEL_SMEM=184320"; do
    echo "== pass $pass: ${v:-launch as committed}"
    env $v $M bench gpu --shape bs=4,kv=1024,seed=4217 --recipe $R/a8w8-s4.recipe --recipe $R/a8w8-s8.recipe --reps 200 2>&1 | grep -E "^bs" | sed "s#$R/##g" | cut -c1-170
  done
  for S in 4 8; do /tmp/split_floor 4 1024 $S merge 200; done
done 2>&1 | tee $OUT/skel_launch.txt
