#!/usr/bin/env bash
# session 25, device run c: session 24's persistent kernel with the logit warps' next-token look-up
# trimmed (...-v27-persistent-hoisted.patch: the next token's span looked up again at the switch
# instead of kept through the tile, Q's L2 prefetch in a rolled loop; ptxas: the copy_lin persistent
# kernel 148 registers, was 168; the lin_copy one still 168). .gpu-bin/mlaref-per is that build,
# mlaref-head 231b05e. (1) exact: every OCP edge cell and three more with MLAREF_FAST_PERSIST=1 and 2
# (check --rule exact, o and lse); (2) session 24's two-wave shapes alternated, two passes: head,
# per with PERSIST=1, per with PERSIST=0 (its kernels are the committed ones).
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin
date -u
SM=/tmp/mlaref-smoke; rm -rf $SM; mkdir -p $SM
$B/mlaref-per gen --suite edge --out $SM >/dev/null
for spec in bs=256,kv=1024,seed=5 bs=140,kv=300,seed=6 lens=2:1:129:700:5:33:256,q=2,seed=7; do
  $B/mlaref-per gen --shape $spec --out $SM/${spec%%,seed*}.safetensors >/dev/null; done
n=0; bad=0
for f in $SM/*.safetensors; do case $(basename $f) in *bf16* | *fnuz*) continue ;; esac
  for per in 1 2; do
    MLAREF_FAST_PERSIST=$per timeout 60 $B/mlaref-per gpu run --kernel fast --recipe fast-wgmma-a8w8 --inputs $f --out $SM/o.safetensors > $SM/run.log 2>&1
    rc=$?; [ $rc -eq 0 ] && { $B/mlaref-per check --inputs $f --output $SM/o.safetensors --recipe fast-wgmma-a8w8 --rule exact > $SM/check.log 2>&1; rc=$?; }
    [ $rc -eq 0 ] && { $B/mlaref-per run --recipe fast-wgmma-a8w8 --inputs $f --out $SM/m.safetensors > /dev/null 2>&1 &&
      $B/mlaref-per compare $SM/o.safetensors $SM/m.safetensors --tensor lse --rule exact >> $SM/check.log 2>&1; rc=$?; }
    n=$((n + 1)); [ $rc -eq 0 ] || bad=$((bad + 1))
    echo "$(basename $f) PERSIST=$per: exit $rc $(grep -oE "k_attn[^ ]*( persistent\))?" $SM/run.log | head -1) $(grep -E "^rule|bit-identical" $SM/check.log | sed -E 's/ +/ /g' | tr '\n' ';' | cut -c1-160)"
  done; done > $OUT/per_check.txt 2>&1
echo "persistent checks: $n run, $bad not exact"; grep -v ": exit 0" $OUT/per_check.txt | head
SH="--shape bs=256,kv=1024,seed=5 --shape bs=256,kv=8192,seed=9826 --shape bs=200,kv=1024,seed=4 --shape bs=133,kv=1024,seed=3 --shape bs=64,kv=1024,seed=1357"
ALT_ARGS="$SH --recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-per:MLAREF_FAST_PERSIST=1 mlaref-per:MLAREF_FAST_PERSIST=0
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-110
date -u
