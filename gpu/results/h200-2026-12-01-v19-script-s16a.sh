#!/usr/bin/env bash
# session 16: the cluster merge by pushes (st.async): exactness on the edge suite and cluster sizes 2..8, speed against mlaref-s15
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
D=/tmp/q; mkdir -p $D/edge
M=$PWD/.gpu-bin/mlaref
$M gen --suite edge --out $D/edge >/dev/null
for kv in 200 300 500 640 700 850 1000; do $M gen --shape bs=3,kv=$kv,seed=$kv --out $D/edge/cl_$kv.safetensors >/dev/null; done
$M gen --shape lens=1:70:300:33:129,q=2,page=16,fmt=bf16,seed=43 --out $D/edge/clbf16_r.safetensors >/dev/null
$M gen --shape bs=3,kv=700,fmt=bf16,seed=7 --out $D/edge/clbf16_700.safetensors >/dev/null
$M gen --shape lens=9:700:65:1000,page=3,q=3,seed=39 --out $D/edge/cl_rag.safetensors >/dev/null
n=0; bad=0
for f in $D/edge/*.safetensors; do c=$(basename $f .safetensors)
  case $c in *bf16*) rs="fast-a16w16 fast-a8w16" ;; *fnuz*) rs="fast-a8w8 fast-a16w8" ;; *) rs="fast-wgmma-a8w8 fast-a8w8 fast-a16w8" ;; esac
  for r in $rs; do for v in "" "MLAREF_FAST_WS=1" "MLAREF_FAST_WS=0"; do
    n=$((n+1))
    env $v $M gpu run --kernel fast --recipe $r --inputs $f --out $D/o.safetensors > $D/run.log 2>&1 || { echo "$c $r [$v] run FAIL"; tail -2 $D/run.log; bad=$((bad+1)); continue; }
    r1=$($M check --inputs $f --output $D/o.safetensors --recipe $r --rule exact 2>&1 | grep -E "^rule exact" | sed -E 's/ +/ /g')
    $M run --recipe $r --inputs $f --out $D/m.safetensors >/dev/null 2>&1
    r2=$($M compare $D/o.safetensors $D/m.safetensors --tensor lse --rule exact 2>&1 | grep "^rule" | sed -E 's/ +/ /g')
    case "$r1" in "rule exact pass"*) ;; *) bad=$((bad+1));; esac
    case "$r2" in "rule exact pass"*) ;; *) bad=$((bad+1));; esac
    echo "$c $r [$v]: o: $r1; lse: $r2 | $(tail -1 $D/run.log | cut -c1-100)"
  done; done
done
echo "runs $n, failed $bad"
for k in 1 2; do for B in mlaref-s15 mlaref; do
  echo "== $B bench"; .gpu-bin/$B bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 --reps 100 2>&1 | grep -E "fast-|floor" | cut -c1-160
done; done
