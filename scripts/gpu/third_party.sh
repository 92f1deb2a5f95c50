#!/usr/bin/env bash
# Other people's kernels held to their recipes (scripts/gpu_run.sh, step thirdparty):
#   scripts/gpu/third_party.sh CLI PEERS DIR
# CLI: an mlaref (with its libraries on LD_LIBRARY_PATH); PEERS: a copy of the peers' folder (its
# third_party/ with AITER, FlashMLA and the CUTLASS headers, and the seeds' Triton kernels), kept
# in an ignored folder such as .peers/; DIR: a scratch folder (FlashMLA's build is kept in
# DIR/build and reused). Generates the edge, probe and bench suites, the test suite's bs=4 and
# bs=32 cells and random shapes (ragged, paged, q_len 1..4, 16, 20, 64 and 128 heads, fp8 and bf16
# KV), runs AITER's Triton decode (both stages it has), FlashMLA's dense bf16 and fp8 decode and the
# seeds' kernels on each cell they take, and on the probe suite AITER and FlashMLA with planted bugs
# (scripts/gpu/third_party_run.py), then holds every output that has a recipe to it bit for bit
# and to the default rules, and every planted bug to being caught (scripts/third_party_check.py).
# MLAREF_TP_SUITES picks the suites (default: edge probe bench). Exit 1 on a failed check.
set -uo pipefail
CLI=$1 PEERS=$2 D=$3
mkdir -p "$D/in" "$D/out" "$D/build"
for s in ${MLAREF_TP_SUITES:-edge probe bench}; do
  "$CLI" gen --suite "$s" --out "$D/in/$s" >/dev/null || { echo "third_party: gen failed"; exit 1; }
done
mkdir -p "$D/in/test" "$D/in/rand"
"$CLI" gen --shape bs=4,kv=1024,seed=4220 --out "$D/in/test/bs4_kv1k.safetensors" >/dev/null &&
  "$CLI" gen --shape bs=32,kv=1024,seed=5412 --out "$D/in/test/bs32_kv1k.safetensors" >/dev/null ||
  exit 1
i=0
for sp in bs=8,kv=2000,heads=128,page=64,seed=21 lens=100:513:2049,page=16,seed=22 \
  bs=4,kv=777,q=3,seed=23 bs=2,kv=4096,page=64,heads=128,q=2,seed=24 \
  lens=64:65:127:128:129:1000,page=64,seed=25 bs=3,kv=1500,heads=64,seed=26 \
  bs=4,kv=3000,q=4,page=64,seed=27 bs=16,kv=1024,heads=128,seed=28 \
  bs=3,kv=700,page=16,fmt=bf16,seed=29 lens=5:300:1100,fmt=bf16,heads=20,seed=30; do
  i=$((i + 1))
  "$CLI" gen --shape "$sp" --out "$D/in/rand/r$i.safetensors" >/dev/null || exit 1
done
python3 scripts/gpu/third_party_run.py "$PEERS/third_party" "$D/build" "$D/out" \
  "$D"/in/*/*.safetensors || { echo "third_party: a kernel failed to run"; exit 1; }
python3 scripts/third_party_check.py "$CLI" "$D/in" "$D/out"
