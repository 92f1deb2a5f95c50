#!/usr/bin/env bash
# session 29: cells whose splits the waves rule changes, checked bit for bit: for each shape given
# (SPEC, e.g. bs=140,kv=4096) and each recipe in $CELL_RS (fast-wgmma-a8w8 fast-a8w8 unless set),
# .gpu-bin/mlaref-new's fast kernel (gpu run) against `mlaref run` of the same recipe, o and lse
# with the exact rule; the split count and the kernels named; one line a cell on stdout.
# (Run e had these lines written out; it calls this now.)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
N=$PWD/.gpu-bin/mlaref-new D=/tmp/mlaref-waves
mkdir -p $D
for spec in "$@"; do
  f=$D/$spec.safetensors
  $N gen --shape $spec,seed=29 --out $f > /dev/null || { echo "$spec: gen FAIL"; continue; }
  for r in ${CELL_RS:-fast-wgmma-a8w8 fast-a8w8}; do
    $N gpu run --kernel fast --recipe $r --inputs $f --out $D/o.safetensors > $D/run.log 2>&1 || { echo "$spec $r: gpu run FAIL: $(tail -1 $D/run.log)"; continue; }
    $N run --recipe $r --inputs $f --out $D/m.safetensors > $D/model.log 2>&1 || { echo "$spec $r: run FAIL"; continue; }
    res=
    for t in o lse; do $N compare $D/o.safetensors $D/m.safetensors --tensor $t --rule exact > $D/cmp.log 2>&1; res="$res $t exit $?: $(grep '^rule' $D/cmp.log | sed -E 's/ +/ /g');"; done
    echo "$spec $r: $(grep -oE 'up to [0-9]+ splits' $D/model.log); $(grep -oE '\(k_[^)]*\)*' $D/run.log | head -1);$res"
  done
done
