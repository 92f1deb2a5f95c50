#!/usr/bin/env bash
# session 26, device run d: .gpu-bin/mlaref-head is d05dc41; mlaref-new loads each k_merge thread's
# own split's x and mass beside the partials, before the max (the mass was loaded after the max's
# barrier: an L2 round trip of its own). (1) the 8 bench shapes alternated, two passes,
# fast-wgmma-a8w8; (2) s19b's checks, every recipe, every edge, test, bench and bf16 cell as
# launched, the edge and bf16 cells also with k_merge forced; no sanitizers.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
bash "$(dirname "$0")/h200-2026-12-03-v28-script-altwg.sh"
EDGE_VS="auto merge" SAN_BASE= SAN_VS= bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | tail -8
date -u
