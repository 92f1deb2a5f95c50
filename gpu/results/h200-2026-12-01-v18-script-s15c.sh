#!/usr/bin/env bash
# session 15: C2 (kv_ref, tok_uniform, static Q by the reciprocal only, k_qprep otherwise; issue_tile's start calls rolled): exactness, speed against mlaref-base
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
D=/tmp/q; mkdir -p $D
echo "== cvt_probe"; .gpu-bin/cvt_probe
M=$PWD/.gpu-bin/mlaref
for spec in bs=2,kv=33,seed=3 lens=1:17:300:64:0:129,seed=7 bs=3,kv=1000,page=16,seed=9 lens=9:700:65,page=3,seed=39 bs=2,kv=100,q=4,seed=5 bs=4,kv=1024,seed=4217 bs=2,kv=500,fmt=e4m3fnuz,page=8,seed=11 lens=1:70:300:33:129,q=2,page=16,fmt=bf16,seed=43 bs=3,kv=700,q=3,page=64,seed=21; do
  $M gen --shape $spec --out $D/in.safetensors >/dev/null
  case $spec in *fnuz*) rs="fast-a8w8:static fast-a16w8:" ;; *bf16*) rs="fast-a16w16: fast-a8w16:static" ;; *) rs="fast-wgmma-a8w8:static fast-wgmma-a8w8:q.absmax=0.5 fast-a8w8:static fast-a8w8:q.absmax=40 fast-a8w8:dynamic fast-a16w8:" ;; esac
  for rr in $rs; do r=${rr%%:*}; sc=${rr#*:}; set=; case $sc in "") ;; q.*) set="--set $sc" ;; *) set="--set q.scale=$sc" ;; esac
  for v in "" MLAREF_FAST_TOKTABLE=1 MLAREF_FAST_QDIV=1 "MLAREF_FAST_WS=0" "MLAREF_FAST_WS=1 MLAREF_FAST_CLUSTER=0"; do
    env $v $M gpu run --kernel fast --recipe $r $set --inputs $D/in.safetensors --out $D/o.safetensors > $D/run.log 2>&1 || { echo "$spec $r $sc [$v] run FAIL"; tail -2 $D/run.log; continue; }
    r1=$($M check --inputs $D/in.safetensors --output $D/o.safetensors --recipe $r $set --rule exact 2>&1 | grep -E "^rule exact" | sed -E 's/ +/ /g')
    $M run --recipe $r $set --inputs $D/in.safetensors --out $D/m.safetensors >/dev/null 2>&1
    r2=$($M compare $D/o.safetensors $D/m.safetensors --tensor lse --rule exact 2>&1 | grep "^rule" | sed -E 's/ +/ /g')
    echo "$spec $r $sc [$v]: o: $r1; lse: $r2"
  done; done
done
for k in 1 2; do
for B in mlaref-base mlaref "MLAREF_FAST_TOKTABLE=1 mlaref" mlaref-C1; do
  b=${B##* }; e=; [ "$b" != "$B" ] && e=${B% *}
  echo "== $B bench"; env $e .gpu-bin/$b bench gpu --recipe fast-wgmma-a8w8 --reps 100 2>&1 | grep -E "fast-|floor" | cut -c1-160
done
done
for B in mlaref-base mlaref mlaref-C1; do
  echo "== $B bench paged"; .gpu-bin/$B bench gpu --recipe fast-wgmma-a8w8 --recipe fast-a8w8 --shape bs=32,kv=8192,seed=1 --shape bs=32,kv=8192,page=16,seed=1 --shape bs=64,kv=8192,page=64,seed=1 --shape bs=256,kv=1024,page=16,seed=1 --reps 100 2>&1 | grep -E "fast-" | cut -c1-160
done
