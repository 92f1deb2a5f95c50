#!/usr/bin/env bash
# Fuzzes one parser with libFuzzer (clang 15 and its runtime, Debian packages that scripts/setup.sh
# installs) for SECONDS (default 600), under ASan and UBSan, from the committed corpus
# tests/fuzz/corpus/TARGET; then merges what it found into that corpus (kept minimal by libFuzzer's
# -merge) and writes any crashing input to tests/fuzz/crashes/TARGET-*. CTest replays the corpus on
# every run (tests/fuzz/replay.c), with ASan and UBSan in the asan-ubsan preset.
#   scripts/fuzz.sh TARGET [SECONDS]     TARGET: recipe, safetensors, npy, shape, manifest, baseline
# Exit 0: no crash, hang or leak in the time; 1: libFuzzer stopped on one (its input is kept);
# 2: usage.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-}
secs=${2:-600}
IO="fixtures/io/tensor.c fixtures/io/safetensors.c fixtures/io/npy.c"
BASE="ref/base/status.c ref/base/parallel.c ref/base/sha256.c"
case "$t" in
  recipe)
    srcs="tests/fuzz/fuzz_recipe.c ref/recipe/recipe.c ref/base/status.c ref/base/sha256.c" ;;
  safetensors)
    srcs="tests/fuzz/fuzz_safetensors.c $IO fixtures/inputs/inputs.c $BASE ref/formats/formats.c"
    srcs="$srcs -ljansson" ;;
  npy) srcs="tests/fuzz/fuzz_npy.c $IO $BASE -ljansson" ;;
  shape)
    srcs="tests/fuzz/fuzz_shape.c fixtures/gen/gen.c fixtures/suites/suites.c"
    srcs="$srcs fixtures/inputs/inputs.c fixtures/rng/rng.c $IO $BASE ref/formats/formats.c"
    srcs="$srcs -ljansson" ;;
  manifest) srcs="tests/fuzz/fuzz_manifest.c fixtures/io/manifest.c ref/base/status.c" ;;
  baseline)
    srcs="tests/fuzz/fuzz_baseline.c reports/baseline.c fixtures/suites/suites.c"
    srcs="$srcs ref/budget/sources.c ref/base/status.c -ljansson" ;;
  *)
    echo "fuzz: unknown target '$t' (valid: recipe, safetensors, npy, shape, manifest, baseline);" \
      "usage: scripts/fuzz.sh TARGET [SECONDS]" >&2
    exit 2 ;;
esac
case "$secs" in
  ''|*[!0-9]*) echo "fuzz: SECONDS '$secs' is not a whole number of seconds" >&2; exit 2 ;;
esac
CC=${FUZZ_CC:-clang-15}
mkdir -p build/fuzz tests/fuzz/crashes
"$CC" -g -O1 -std=c11 -ffp-contract=off -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I. \
  $(printf -- '-I%s ' */include */*/include) \
  $srcs -lcrypto -lm -fopenmp -o "build/fuzz/fuzz_$t"
corpus=tests/fuzz/corpus/$t
found=$(mktemp -d)
trap 'rm -rf "$found" "$corpus.merged"' EXIT
rc=0
"build/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="tests/fuzz/crashes/$t-" "$found" "$corpus" || rc=1
mkdir -p "$corpus.merged"
"build/fuzz/fuzz_$t" -merge=1 "$corpus.merged" "$corpus" "$found" >/dev/null 2>&1
rm -rf "$corpus" && mv "$corpus.merged" "$corpus"
if [ $rc -eq 0 ]; then verdict='no crash, hang or leak'
else verdict='STOPPED on a failing input: tests/fuzz/crashes/'; fi
echo "fuzz: $t for ${secs} s: $(ls "$corpus" | wc -l) inputs in $corpus; $verdict"
exit $rc
