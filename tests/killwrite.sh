#!/usr/bin/env bash
# Nothing lost on a crash: every writer of mlaref (gen's inputs, run's outputs, oracle's
# truth, golden's digest manifest) is killed with SIGKILL at random points while
# it replaces an existing file. Each time the file must be the old one, intact, or the new one,
# complete (SHA-256 of the whole file); never a mix, never missing. The writers go through a
# temporary file, fsync and rename (fixtures/io: mlr_atomic_file); a kill leaves at most that
# temporary file (PATH.tmp.XXXXXX) behind, which the test counts and removes.
#   tests/killwrite.sh MLAREF [KILLS]      KILLS a writer (default 12)
# Exit 0: every file old or new; 1: a mix or a missing file (named); 2: usage or a setup failure.
set -uo pipefail
M=${1:?usage: tests/killwrite.sh MLAREF [KILLS]}
K=${2:-12}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
digest() { sha256sum "$1" 2>/dev/null | cut -c1-64; }
fail=0 total=0 olds=0 news=0 left=0
# writer NAME OLD_CMD NEW_CMD FILE: OLD_CMD and NEW_CMD write FILE with different contents
writer() {
  local name=$1 old=$2 new=$3 f=$4
  eval "$new" >/dev/null 2>&1 || { echo "killwrite: $name: the new write failed"; exit 2; }
  local dn; dn=$(digest "$f")
  local t0 t1; t0=$(date +%s%N); eval "$new" >/dev/null 2>&1; t1=$(date +%s%N)
  local us=$(( (t1 - t0) / 1000 ))
  eval "$old" >/dev/null 2>&1 || { echo "killwrite: $name: the old write failed"; exit 2; }
  local do_; do_=$(digest "$f")
  [ "$do_" != "$dn" ] || {
    echo "killwrite: $name: old and new contents are the same; the test would prove nothing"
    exit 2
  }
  for _ in $(seq 1 "$K"); do
    eval "$old" >/dev/null 2>&1
    ( eval "exec $new" >/dev/null 2>&1 ) & local pid=$!
    sleep "$(awk -v us="$us" -v r="$RANDOM" 'BEGIN { printf "%.6f", us * 1.2 * r / 32768 / 1e6 }')"
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    local d; d=$(digest "$f")
    total=$((total + 1))
    if [ "$d" = "$do_" ]; then olds=$((olds + 1))
    elif [ "$d" = "$dn" ]; then news=$((news + 1))
    else
      echo "killwrite: $name: $f is neither the old nor the new file after a kill (${d:-missing})"
      fail=1
    fi
    for tmp in "$f".tmp.*; do [ -e "$tmp" ] && { left=$((left + 1)); rm -f "$tmp"; }; done
  done
  echo "killwrite: $name: $K kills, the writer taking $((us / 1000)) ms"
}
S1="bs=16,kv=4096,seed=1,bf16kv=1" S2="bs=16,kv=4096,seed=2,bf16kv=1"
"$M" gen --shape "$S1" --out "$D/in1.safetensors" >/dev/null &&
  "$M" gen --shape "$S2" --out "$D/in2.safetensors" >/dev/null || exit 2
writer gen "'$M' gen --shape '$S1' --out '$D/g.safetensors'" \
           "'$M' gen --shape '$S2' --out '$D/g.safetensors'" "$D/g.safetensors"
writer run \
  "'$M' run --recipe fp32-seq --inputs '$D/in1.safetensors' --out '$D/o.safetensors' --partials" \
  "'$M' run --recipe fp32-seq --inputs '$D/in2.safetensors' --out '$D/o.safetensors' --partials" \
  "$D/o.safetensors"
writer oracle "'$M' oracle --inputs '$D/in1.safetensors' --out '$D/t.safetensors'" \
  "'$M' oracle --inputs '$D/in2.safetensors' --out '$D/t.safetensors'" "$D/t.safetensors"
writer "golden --digests" "'$M' golden --suite edge --recipe fp32-seq --digests '$D/d.tsv'" \
  "'$M' golden --suite edge --recipe aiter-a8w8-ps --digests '$D/d.tsv'" "$D/d.tsv"
echo "killwrite: $total kills: $olds left the old file, $news the new one," \
  "$((total - olds - news)) neither; $left temporary files left behind (removed)"
exit $fail
