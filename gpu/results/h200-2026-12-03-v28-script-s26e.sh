#!/usr/bin/env bash
# session 26, device run e: run d's candidate (.gpu-bin/mlaref-new) under memcheck and racecheck on
# s19b's sanitizer cells with k_merge forced (MLAREF_FAST_CLUSTER=0), both kernels (MLAREF_FAST_WS 0, 1);
# and s19b's checks with k_merge forced on every cell of every suite (the auto cells ran in run d)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
EDGE_VS=merge SUITE_VS=merge SAN_BASE="MLAREF_FAST_CLUSTER=0,MLAREF_FAST_WS=0 MLAREF_FAST_CLUSTER=0,MLAREF_FAST_WS=1" \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -E "^(memcheck|racecheck)|checks:" | grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)"
echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
date -u
