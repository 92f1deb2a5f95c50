#!/usr/bin/env bash
# How close the emulator's triton-fp8-single / triton-fp8-split recipes come to the seeds' Triton
# kernels run on a GPU (scripts/gpu/seed_triton_outputs.py, called by scripts/gpu_run.sh).
#   scripts/peer_compare.sh INPUTS_DIR PEER_OUTPUTS_DIR
# For every INPUTS_DIR/X.safetensors with PEER_OUTPUTS_DIR/X.single|splitN.safetensors: runs the
# model (build/default/mlaref) and prints the bit-identical counts and ulp histograms of o (and of
# the split partials and their lse).
set -euo pipefail
cd "$(dirname "$0")/.."
in=$1 peer=$2 tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$in"/*.safetensors; do
  x=$(basename "$f" .safetensors)
  for p in "$peer/$x".*.safetensors; do
    [ -e "$p" ] || continue
    kind=$(basename "$p" .safetensors); kind=${kind##*.}
    if [ "$kind" = single ]; then args=(--recipe triton-fp8-single)
    else args=(--recipe triton-fp8-split --set "split.count=${kind#split}" --partials); fi
    build/default/mlaref run "${args[@]}" --inputs "$f" --out "$tmp/o.safetensors" >/dev/null
    echo "== $x $kind"
    python3 scripts/peer_diff.py "$tmp/o.safetensors" "$p"
  done
done
