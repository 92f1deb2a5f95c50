#!/usr/bin/env bash
# What the kernel adapter adds to a report: `mlaref report --suite SUITE --recipe R` with and
# without one kernel that is the model itself (`mlaref run --recipe R`), against checking the same
# outputs from files (`mlaref check` a cell, the outputs made beforehand by the same command).
# Prints both reports' wall times, the kernel's own run time (summary.json, summed over cells),
# the checks' wall time, and the adapter's share: (with - without - kernel) / checks - 1 (target:
# at most +10%). REPS (default 3): each time is the best of that many runs.
# Usage: scripts/bench_kernel_adapter.sh [SUITE (edge)] [RECIPE (fp32-seq)] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-edge} recipe=${2:-fp32-seq} build=${3:-build/default}
M=$PWD/$build/mlaref
[ -x "$M" ] || { echo "bench_kernel_adapter: $M is missing: build first" >&2; exit 2; }
D=$(mktemp -d "${TMPDIR:-/tmp}/mlaref-bench-XXXXXX")
trap 'rm -rf "$D"' EXIT
now() { date +%s.%N; }
"$M" gen --suite "$suite" --out "$D/in" >/dev/null
mkdir -p "$D/out"
for f in "$D"/in/*.safetensors; do
  "$M" run --recipe "$recipe" --inputs "$f" --out "$D/out/$(basename "$f")" >/dev/null
done
checks() {
  for f in "$D"/in/*.safetensors; do
    "$M" check --inputs "$f" --output "$D/out/$(basename "$f")" --recipe "$recipe" >/dev/null
  done
}
base() { "$M" report --suite "$suite" --recipe "$recipe" --gpu off --out "$D/base" >/dev/null; }
with() {
  "$M" report --suite "$suite" --recipe "$recipe" --gpu off --out "$D/rep" \
    --kernel m="$M run --recipe $recipe --inputs {inputs} --out {out}" \
    --kernel-recipe m="$recipe" >/dev/null
}
best() { # best of REPS wall times of a function, in seconds
  local b=
  for _ in $(seq "$REPS"); do
    local s e
    s=$(now)
    "$1"
    e=$(now)
    b=$(/usr/bin/python3 -c "import sys; d = float(sys.argv[2]) - float(sys.argv[1]); \
print(min(d, float(sys.argv[3])) if sys.argv[3] else d)" "$s" "$e" "$b")
  done
  echo "$b"
}
REPS=${REPS:-3}
tc=$(best checks)
tb=$(best base)
tw=$(best with)
kernel=$(/usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
print(sum(c['kernel']['seconds'] for c in d['cells'] if c.get('kernel')))" "$D/rep/summary.json")
cells=$(ls "$D"/in/*.safetensors | wc -l)
/usr/bin/python3 - "$tc" "$tb" "$tw" "$kernel" "$cells" "$suite" "$recipe" "$REPS" <<'EOF'
import sys
checks, base, report, kernel = map(float, sys.argv[1:5])
cells, suite, recipe, reps = sys.argv[5:]
share = (report - base - kernel) / checks - 1
print(f"suite {suite} ({cells} cells), recipe {recipe}, kernel = mlaref run --recipe {recipe}, "
      f"best of {reps}")
print(f"  report without the kernel:     {base:8.2f} s")
print(f"  report with the kernel:        {report:8.2f} s")
print(f"  the kernel's own runs:         {kernel:8.2f} s")
print(f"  check from files, a cell each: {checks:8.2f} s")
print(f"  adapter's share: (with - without - kernel) / checks - 1 = {share:+.1%} (target <= +10%)")
EOF
