set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin; SM=/tmp/sm; rm -rf $SM; mkdir -p $SM
$B/mlaref-I gen --suite edge --out $SM >/dev/null
$B/mlaref-I gen --shape bs=140,kv=300,seed=6 --out $SM/b140.safetensors >/dev/null
for c in bs3_kv1000 ragged b140 bs2_kv33; do f=$SM/$c.safetensors
  for b in I new; do for per in 0 1; do
    MLAREF_FAST_PERSIST=$per timeout 60 $B/mlaref-$b gpu run --kernel fast --recipe fast-wgmma-a8w8 --inputs $f --out $SM/o.$c.$b.$per.safetensors > $SM/run.log 2>&1; echo "run $c $b $per: $? $(grep -oE "k_attn[^ ]*( persistent\))?" $SM/run.log)"
    $B/mlaref-I check --inputs $f --output $SM/o.$c.$b.$per.safetensors --recipe fast-wgmma-a8w8 --rule exact 2>&1 | grep -E "rule|first|differ|element" | head -4
  done; done
  $B/mlaref-I compare $SM/o.$c.I.0.safetensors $SM/o.$c.new.0.safetensors --rule exact 2>&1 | head -6
done
