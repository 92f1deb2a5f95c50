#!/usr/bin/env bash
# session 26, device run a: .gpu-bin/mlaref-head is 73bb842; mlaref-new adds k_merge's lse by a fifth
# warp's first lane (the row's sum and its binary64 log beside the columns' terms and stores; it was
# thread 0's last step) and the lse helpers folded (merged_lse, store_lone_lse). (1) the 8 bench
# shapes alternated, two passes, fast-wgmma-a8w8; (2) session 22's gate without its fastbench step:
# s19b's checks (every recipe, every edge, test, bench and bf16 cell; edge and bf16 with the ws,
# merge, table, lin and lin2 variants), then memcheck and racecheck with the lin variants added.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
bash "$(dirname "$0")/h200-2026-12-03-v28-script-altwg.sh"
EDGE_VS="auto ws merge table lin lin2" SAN_VS="MLAREF_FAST_LIN=1 MLAREF_FAST_WS=1,MLAREF_FAST_LIN=2" \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -vE "^(memcheck|racecheck) .*exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" | tail -24
date -u
