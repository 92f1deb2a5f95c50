#!/usr/bin/env bash
# session 23, device run c: is the committed build (H, 0a6837e: only the launched attention kernel's
# shared-memory limit set) slower than session 22's E (fe52ca6: all 13 instantiations' limits set)?
# Runs a and b measured bs=4 kv=8192 (fast-wgmma-a8w8) at 22.7 to 22.9 us against 20.35 in session 22.
# Alternated twice, bench gpu --reps 100: H; E; H2 (H with the 13 calls restored); H under
# CUDA_MODULE_LOADING=EAGER (every kernel of the module loaded at start: the same kernel code, placed
# as when all were loaded by the 13 calls)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-H mlaref-E mlaref-H2 eager
