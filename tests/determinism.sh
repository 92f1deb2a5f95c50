#!/usr/bin/env bash
# Determinism under threads and load: the same command with 1..16 threads, first on an
# idle machine and then beside a CPU load (one busy process a core, plus one), writes the same
# bytes: the inputs (gen, OpenMP), the model with split partials (run --threads) for three
# recipes of different dot and merge kinds, and the certified truth (oracle, OpenMP). Compared by
# SHA-256 of the files. Exit 0 when every digest matches the first, 1 naming the first that
# does not, 2 on a usage error.
#   tests/determinism.sh MLAREF
set -uo pipefail
M=${1:?usage: tests/determinism.sh MLAREF}
D=$(mktemp -d)
LOAD=()
cleanup() { for p in "${LOAD[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$D"; }
trap cleanup EXIT
SPEC="lens=1:70:300:33:129,q=2,page=16,seed=5,bf16kv=1"
digest() { sha256sum "$1" | cut -c1-64; }
declare -A want
fail=0
check() { # name file: the first digest of a name is the reference
  local d; d=$(digest "$2")
  if [ -z "${want[$1]:-}" ]; then want[$1]=$d
  elif [ "${want[$1]}" != "$d" ]; then
    echo "determinism: $1 differs ($3): ${want[$1]:0:16} then ${d:0:16}"; fail=1
  fi
}
pass() { # label
  for n in $(seq 1 16); do
    OMP_NUM_THREADS=$n "$M" gen --shape "$SPEC" --out "$D/in.safetensors" >/dev/null ||
      { echo "determinism: gen failed"; exit 2; }
    check gen "$D/in.safetensors" "$1, $n threads"
    for r in aiter-a8w8-ps triton-fp8-split fp32-seq; do
      "$M" run --recipe $r --inputs "$D/in.safetensors" --out "$D/out.safetensors" --threads $n \
        --partials >/dev/null || { echo "determinism: run $r failed"; exit 2; }
      check "run $r" "$D/out.safetensors" "$1, $n threads"
    done
    OMP_NUM_THREADS=$n "$M" oracle --inputs "$D/in.safetensors" --out "$D/truth.safetensors" \
      >/dev/null || { echo "determinism: oracle failed"; exit 2; }
    check oracle "$D/truth.safetensors" "$1, $n threads"
  done
}
pass idle
for _ in $(seq 0 "$(nproc)"); do (while :; do :; done) & LOAD+=($!); done
pass "under load"
[ $fail -eq 0 ] && echo "determinism: gen, run (3 recipes) and oracle give the same bytes with" \
  "1..16 threads, idle and under load ($(( $(nproc) + 1 )) busy processes)"
exit $fail
