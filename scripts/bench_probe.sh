#!/usr/bin/env bash
# The probe suite's cost for one kernel: `mlaref gen --suite probe`, then for every cell the kernel
# (here the model of triton-fp8-split, `mlaref run`, standing in for a kernel) and `mlaref check`
# with the default rules (cells the recipe does not run are skipped). Prints the seconds of each
# stage and the total (target: under 60 s on 2 cores); exit 1 when a check fails or the total is
# over 60 s.
# Usage: scripts/bench_probe.sh [BUILD_DIR] [RECIPE]   (default build/default, triton-fp8-split)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
recipe=${2:-triton-fp8-split}
M=$build/mlaref
[ -x "$M" ] || { echo "bench_probe: $M is missing: build first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
now() { date +%s.%N; }
calc() { awk "BEGIN { print $* }"; }
t0=$(now)
"$M" gen --suite probe --out "$dir/in" >/dev/null
t1=$(now)
run=0 check=0 failed=0 skipped=0
for f in "$dir"/in/*.safetensors; do
  c=$(basename "$f" .safetensors)
  a=$(now)
  rc=0
  "$M" run --recipe "$recipe" --inputs "$f" --out "$dir/$c.out.safetensors" >/dev/null \
    2>"$dir/err" || rc=$?
  b=$(now)
  if [ "$rc" = 2 ]; then # a cell the recipe does not run (bf16 KV for an fp8-KV recipe)
    skipped=$((skipped + 1))
    continue
  fi
  [ "$rc" = 0 ] || { cat "$dir/err" >&2; exit 1; }
  "$M" check --inputs "$f" --output "$dir/$c.out.safetensors" --recipe "$recipe" >/dev/null ||
    { echo "bench_probe: cell $c: the check fails" >&2; failed=1; }
  e=$(now)
  run=$(calc "$run + $b - $a")
  check=$(calc "$check + $e - $b")
done
total=$(calc "$(now) - $t0")
printf 'probe suite, recipe %s, %s cells (%s the recipe does not run), %s threads\n' "$recipe" \
  "$(ls "$dir"/in/*.safetensors | wc -l)" "$skipped" "$(nproc)"
printf 'gen %.2f s, kernel (mlaref run) %.2f s, check %.2f s, total %.2f s (target 60 s)\n' \
  "$(calc "$t1 - $t0")" "$run" "$check" "$total"
[ "$failed" = 0 ] && [ "$(calc "$total < 60")" = 1 ]
