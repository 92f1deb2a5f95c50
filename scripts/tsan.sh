#!/usr/bin/env bash
# ThreadSanitizer on the OpenMP paths. Builds mlaref with clang 15, -fsanitize=thread
# and clang's OpenMP runtime (libomp) into build/tsan, with the Archer tool loaded
# (OMP_TOOL_LIBRARIES), which tells TSan about OpenMP's barriers, locks and tasks. GCC's libgomp is
# not used here: TSan cannot see its synchronisation, and every parallel region would need a
# suppression. TSAN_OPTIONS=ignore_noninstrumented_modules=1, as Archer asks: the OpenMP runtime
# itself is not instrumented (its own accesses are not ours to check). No suppression file.
# First a planted race (tests/tsan/race_probe.c) must be reported; then every multi-threaded path
# runs with 1, 2, 4 and 16 threads: gen, run (every built-in and the fast recipes, with partials),
# oracle, budget, golden --digests, policy-check. Exit 0: the probe caught, mlaref clean;
# 1: a report (printed); 2: setup.
set -uo pipefail
cd "$(dirname "$0")/.."
CC=${TSAN_CC:-clang-15}
command -v "$CC" >/dev/null || {
  echo "tsan: $CC not found (scripts/setup.sh installs clang-15 and libomp-15-dev)"
  exit 2
}
ARCHER=$("$CC" -print-file-name=libarcher.so)
[ -f "$ARCHER" ] || ARCHER=/usr/lib/llvm-15/lib/libarcher.so
[ -f "$ARCHER" ] || {
  echo "tsan: libarcher.so not found (package libomp-15-dev)"
  exit 2
}
export OMP_TOOL_LIBRARIES=$ARCHER
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1"
B=build/tsan
mkdir -p "$B"
"$CC" -g -O1 -fsanitize=thread -fopenmp tests/tsan/race_probe.c -o "$B/race_probe" || exit 2
"$B/race_probe" >/dev/null 2>"$B/probe.log"
if [ $? -ne 66 ] || ! grep -q "data race" "$B/probe.log"; then
  echo "tsan: the planted race was not reported: this run could not see a race"
  exit 2
fi
echo "tsan: the planted race in tests/tsan/race_probe.c is reported"
CC=$CC cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLAREF_SANITIZE=thread \
  -DMLAREF_TESTS=OFF -DMLAREF_GPU=OFF >/dev/null || exit 2
cmake --build "$B" -j"$(nproc)" --target mlaref 2>&1 | grep -E "error" && exit 2
M=$B/mlaref D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail=0 n=0
t() { # label, command...: a TSan report (exit 66) or any other failure fails the run
  local label=$1; shift
  n=$((n + 1))
  "$@" >"$D/out" 2>"$D/err"
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "tsan: $label: exit $rc$([ $rc -eq 66 ] && echo ' (a ThreadSanitizer report)')"
    sed -n '1,60p' "$D/err"
    fail=1
  fi
}
for th in 1 2 4 16; do
  export OMP_NUM_THREADS=$th
  t "gen ($th threads)" "$M" gen --shape lens=1:70:300:33:129,q=2,page=16,seed=5,bf16kv=1 \
    --out "$D/in.safetensors"
  for r in triton-fp8-single triton-fp8-split aiter-a8w8-ps aiter-a16w8-ps aiter-bf16-np \
           torch-bmm-bf16 aiter-test-ref fp32-seq fast-a16w8 fast-a8w8; do
    t "run $r ($th threads)" "$M" run --recipe $r --inputs "$D/in.safetensors" \
      --out "$D/o.safetensors" --threads $th --partials
  done
  t "oracle ($th threads)" "$M" oracle --inputs "$D/in.safetensors" --out "$D/t.safetensors"
  t "budget ($th threads)" "$M" budget --inputs "$D/in.safetensors" --recipe aiter-a8w8-ps \
    --threads $th --rows 64
  t "golden --digests ($th threads)" "$M" golden --suite edge --recipe triton-fp8-split \
    --digests "$D/d.tsv"
  # a threshold no cell reaches: exit 0 unless something breaks (its verdicts are not the point
  # here)
  t "policy-check ($th threads)" "$M" policy-check --policy static:absmax=4 \
    --shape bs=2,kv=200,seed=3 --threads $th --threshold 1e30
done
[ $fail -eq 0 ] && echo "tsan: $n runs of mlaref's OpenMP paths (1, 2, 4, 16 threads): no report"
exit $fail
