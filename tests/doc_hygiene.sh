#!/usr/bin/env bash
# The repository reads as a product, and stays that way. Fails, naming each offending place, when
#   - a tracked text file holds a diary entry: a numbered account of past work ("[S]ession 12")
#     or an issue number ("[I]ssue 7", "[I]ssue #7"); history belongs in git;
#   - README.md passes 20 KB or BENCHMARKS.md 15 KB (reference material goes to docs/);
#   - a source line (C, CUDA, shell, Python, CMake, JSON) passes 120 characters (.clang-format
#     wraps at 100; only what it cannot break, such as a long string literal, may go further);
#   - gpu/fast reads an environment variable (its variants are options passed by the caller).
# Usage: tests/doc_hygiene.sh [SOURCE_DIR]. Data files (tests/data, the fuzz corpora, the goldens)
# are not text written by hand and are not read.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files)
else # a source tree without git: every file but the build trees
  files=$(find . -type f -not -path './build/*' -not -path './.git/*' | sed 's|^\./||')
fi
files=$(printf '%s\n' "$files" | grep -vE '^(tests/data|tests/fuzz/corpus|fixtures/goldens)/')
text=$(printf '%s\n' "$files" |
  grep -E '\.(md|c|h|cu|cuh|sh|py|cmake|json|tsv|txt|yml|yaml)$|(^|/)(run|LICENSE|\.clang-format)$')
src=$(printf '%s\n' "$text" |
  grep -E '\.(c|h|cu|cuh|sh|py|cmake|json)$|CMakeLists\.txt$|^\.ci/run$')
bad=0
fail() { echo "doc_hygiene: $*"; bad=$((bad + 1)); }

# diary entries: the patterns are spelt with a bracket so that this file does not match itself
while IFS= read -r hit; do
  [ -n "$hit" ] && fail "$hit: a diary entry (past work by number); history lives in git"
done < <(printf '%s\n' "$text" |
  xargs -d '\n' grep -nE '\b[Ss]ession [0-9]+|\b[Ii]ssues? #?[0-9]+' 2>/dev/null)

size() { wc -c <"$1" 2>/dev/null || echo 0; }
[ "$(size README.md)" -le 20480 ] || fail "README.md is $(size README.md) bytes (at most 20480)"
[ "$(size BENCHMARKS.md)" -le 15360 ] ||
  fail "BENCHMARKS.md is $(size BENCHMARKS.md) bytes (at most 15360)"

long=$(while IFS= read -r f; do
  [ -f "$f" ] &&
    awk -v f="$f" 'length > 120 { printf "%s:%d: %d characters (at most 120)\n", f, FNR, length }' "$f"
done <<<"$src")
while IFS= read -r hit; do
  [ -n "$hit" ] && fail "$hit"
done <<<"$long"

while IFS= read -r hit; do
  [ -n "$hit" ] && fail "$hit: gpu/fast reads the environment (take an option from the caller)"
done < <(grep -rnE '\b(secure_)?getenv *\(' gpu/fast 2>/dev/null)

if [ "$bad" -gt 0 ]; then
  echo "doc_hygiene: $bad problem(s)"
  exit 1
fi
echo "doc_hygiene: $(printf '%s\n' "$text" | wc -l) text files clean"
