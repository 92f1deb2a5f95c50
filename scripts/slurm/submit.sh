#!/usr/bin/env bash
# A sharded mlaref report on Slurm: an array of N shards, then the merge after it whatever the
# shards' outcome (OUT_DIR/merged; its exit status in OUT_DIR/merged.status). Prints the two job
# ids ("ARRAY MERGE").
#   scripts/slurm/submit.sh OUT_DIR SUITE N [REPORT OPTION...] [-- MERGE OPTION...]
# e.g. scripts/slurm/submit.sh /shared/nightly/$(date +%F) nightly 8 -- --baseline LAST/summary.json
# Environment: MLAREF, the mlaref binary every node runs (default: mlaref on PATH);
# MLAREF_PARTITION, the partition (default: Slurm's); MLAREF_GPU_PARTITION, a GPU partition: the
# shards run there with a GPU each (--gres=gpu:1) and the report's GPU leg required
# (--gpu require); without one the shards run on CPUs (--gpu off: a shard's columns must not depend
# on its node). OUT_DIR must be on a file system every node sees, and new or empty: a run's shards
# never meet an earlier run's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 3 ] || ! [[ $3 =~ ^[1-9][0-9]*$ ]] || [ "$3" -gt 64 ]; then
  echo "submit.sh: usage: submit.sh OUT_DIR SUITE N [REPORT OPTION...] (N shards, 1..64)" >&2
  exit 2
fi
out=$1 suite=$2 n=$3
shift 3
opts=() merge_opts=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
[ $# -gt 0 ] && shift && merge_opts=("$@")
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
  echo "submit.sh: $out is not empty: give a new folder for each run" >&2
  exit 2
fi
mkdir -p "$out"
part=() gpu=(--gpu off)
[ -n "${MLAREF_PARTITION:-}" ] && part=(--partition "$MLAREF_PARTITION")
if [ -n "${MLAREF_GPU_PARTITION:-}" ]; then
  part=(--partition "$MLAREF_GPU_PARTITION" --gres gpu:1)
  gpu=(--gpu require)
fi
# ${a[@]+"${a[@]}"}: an empty array under set -u on every bash
array=$(sbatch --parsable --export=ALL --array=0-$((n - 1)) ${part[@]+"${part[@]}"} \
  --output "$out/slurm-%A_%a.out" "$here/report-array.sbatch" "$out" "$suite" "${gpu[@]}" \
  ${opts[@]+"${opts[@]}"})
array=${array%%;*}
merge=$(sbatch --parsable --export=ALL --dependency=afterany:"$array" \
  ${MLAREF_PARTITION:+--partition "$MLAREF_PARTITION"} --output "$out/slurm-merge-%j.out" \
  "$here/report-merge.sbatch" "$out" ${merge_opts[@]+"${merge_opts[@]}"})
echo "${array} ${merge%%;*}"
