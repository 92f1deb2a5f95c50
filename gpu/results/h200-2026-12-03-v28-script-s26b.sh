#!/usr/bin/env bash
# session 26, device run b: .gpu-bin/mlaref-head is d05dc41 (the lse helpers folded); mlaref-new adds
# run a's fifth k_merge warp (the row's sum and lse beside the columns) with __launch_bounds__(160, 4),
# 96 registers, so that 4 blocks fit an SM as with 128 threads (run a's 160 threads at 108 registers:
# 3 an SM, 396 < 512 blocks at bs=32, two waves). (1) the 8 bench shapes alternated, two passes,
# fast-wgmma-a8w8; (2) s19b's checks, every recipe, every edge, test, bench and bf16 cell as
# launched, the edge and bf16 cells also with k_merge forced; no sanitizers.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
bash "$(dirname "$0")/h200-2026-12-03-v28-script-altwg.sh"
EDGE_VS="auto merge" SAN_BASE= SAN_VS= bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | tail -8
date -u
