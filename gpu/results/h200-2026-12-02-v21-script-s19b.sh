#!/usr/bin/env bash
# session 19, device run b: the cluster merge's change (prefetched partials, one barrier, hardware bf16,
# padded rows) checked as gpu_run.sh's fast step checks (check --rule exact --rule budget --rule fa3 and
# the lse bit for bit against mlaref run), every cell of the edge, test and bench suites and the bf16
# set, the same variants, run 6 at a time to fit one call; then racecheck and memcheck on the
# cells whose splits merge in their cluster. (Session 21: EDGE_VS and SAN_VS add variants, lin:
# MLAREF_FAST_LIN=1, the wgmma kernel's contiguous copies, lin2: MLAREF_FAST_WS=1 MLAREF_FAST_LIN=2,
# and a SAN_VS entry may join settings with commas; unset, the commands are session 19's. Session 25:
# warm: MLAREF_FAST_WARM=3, the wgmma kernel's dry passes; SUITE_VS, the test and bench suites' variants;
# SAN_BASE, the sanitizers' variants before SAN_VS; ONLY_R, the one recipe checked.)
# Session 26: xargs -r, so that empty SAN_BASE and SAN_VS run no sanitizer at all (it ran one empty job.)
# Session 27: the variant none (EDGE_VS=none SUITE_VS=none) runs no check, for a sanitizers-only call, and
# the checks' xargs -r too (run b's sanitizers-only call ran one empty check).
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
CLI=$PWD/.gpu-bin/mlaref-new
FD=/tmp/mlaref-fast; rm -rf $FD; mkdir -p $FD/bf16
date -u
k=0
for spec in bs=4,kv=1024,fmt=bf16,seed=41 bs=32,kv=1024,fmt=bf16,seed=42 lens=1:70:300:33:129,q=2,page=16,fmt=bf16,seed=43 \
            bs=2,kv=8192,fmt=bf16,seed=44 lens=0:1:33,fmt=bf16,seed=45; do
  k=$((k + 1)); $CLI gen --shape "$spec" --out "$FD/bf16/bf16_$k.safetensors" >/dev/null || echo "gen $spec failed"
done
for s in edge test bench; do mkdir -p $FD/$s && $CLI gen --suite $s --out $FD/$s >/dev/null || echo "gen $s failed"; done
jobs=$FD/jobs.txt; : > $jobs
for s in edge test bench bf16; do
  for f in $FD/$s/*.safetensors; do
    c=$(basename $f .safetensors)
    case "$s/$c" in bf16/* | */*bf16*) rs="fast-a16w16 fast-a8w16" ;; */*fnuz*) rs="fast-a16w8 fast-a8w8" ;; *) rs="fast-a16w8 fast-a8w8 fast-wgmma-a8w8" ;; esac
    vs=${SUITE_VS:-auto}; case $s in edge | bf16) vs="${EDGE_VS:-auto ws merge table}" ;; esac
    [ -n "${ONLY_R:-}" ] && rs=$(for r in $rs; do [ $r = $ONLY_R ] && echo $r; done)
    for v in $vs; do [ $v = none ] && continue; for r in $rs; do case $v in lin | warm) [ $r != fast-wgmma-a8w8 ] && continue ;; esac; echo "$s $c $r $v" >> $jobs; done; done
  done
done
one() {
  s=$1 c=$2 r=$3 v=$4; f=$FD/$s/$c.safetensors; id=$s.$c.$r.$v; o=$FD/out.$id.safetensors
  env=; [ $v = ws ] && env=MLAREF_FAST_WS=1; [ $v = ws ] && [ $r = fast-wgmma-a8w8 ] && env=MLAREF_FAST_WS=0
  [ $v = merge ] && env=MLAREF_FAST_CLUSTER=0
  [ $v = table ] && env="MLAREF_FAST_TOKTABLE=1 MLAREF_FAST_QDIV=1"
  [ $v = lin ] && env=MLAREF_FAST_LIN=1
  [ $v = lin2 ] && env="MLAREF_FAST_WS=1 MLAREF_FAST_LIN=2"
  [ $v = warm ] && env=MLAREF_FAST_WARM=3
  env $env $CLI gpu run --kernel fast --recipe $r --inputs $f --out $o > $FD/run.$id.log 2>&1 || { echo "$s/$c $r $v: FAIL: $(tail -1 $FD/run.$id.log)"; return; }
  $CLI check --inputs $f --output $o --recipe $r --rule exact --rule budget --rule fa3 > $FD/check.$id.log 2>&1; rc=$?
  $CLI run --recipe $r --inputs $f --out $FD/model.$id.safetensors > /dev/null 2>&1 &&
    $CLI compare $o $FD/model.$id.safetensors --tensor lse --rule exact >> $FD/check.$id.log 2>&1 || rc=1
  echo "$s/$c $r $v: exit $rc: $(grep -E "^rule|bit-identical" $FD/check.$id.log | sed -E 's/ +/ /g' | tr '\n' ';')"
  rm -f $o $FD/model.$id.safetensors
}
export -f one; export FD CLI
echo "$(wc -l < $jobs) runs"
xargs -r -P 6 -L 1 bash -c 'one "$@"' _ < $jobs > $OUT/fast_check.txt 2>&1
echo "fast kernel checks: $(grep -c ': exit 0:' $OUT/fast_check.txt) passed, $(grep -vc ': exit 0:' $OUT/fast_check.txt) not"
grep -v ": exit 0:" $OUT/fast_check.txt | head -20
date -u
# racecheck and memcheck where the splits merge in their cluster (the launch's choice, k_attn_ws and k_attn)
san() {
  tool=$1 v=$2 c=$3 r=$4
  env ${v//,/ } compute-sanitizer --tool $tool --error-exitcode 9 $CLI gpu run --kernel fast --recipe $r --set q.scale=dynamic \
    --inputs $FD/$c.safetensors --out $FD/san.$tool.$v.${c//\//_}.$r.safetensors > $FD/san.$tool.$v.${c//\//_}.$r.log 2>&1
  echo "$tool $c $r ($v): exit $? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $FD/san.$tool.$v.${c//\//_}.$r.log)"
}
export -f san
for tool in memcheck racecheck; do for v in ${SAN_BASE-MLAREF_FAST_WS=0 MLAREF_FAST_WS=1} ${SAN_VS:-}; do
  for c in edge/bs2_kv33 edge/q4_kv100 edge/ragged edge/page16 bf16/bf16_3; do
    r="fast-a8w8 fast-wgmma-a8w8"; case $c in bf16/*) r=fast-a8w16 ;; esac
    [ -n "${ONLY_R:-}" ] && { case " $r " in *" $ONLY_R "*) r=$ONLY_R ;; *) continue ;; esac; }
    for rr in $r; do echo "$tool $v $c $rr"; done
  done; done; done | xargs -r -P 6 -L 1 bash -c 'san "$@"' _ > $OUT/fast_sanitize.txt 2>&1
cat $OUT/fast_sanitize.txt
date -u
