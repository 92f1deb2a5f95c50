#!/usr/bin/env bash
# session 25, device run a: the wgmma kernel's dry passes (fast_ws.h, warm_start; MLAREF_FAST_WARM).
# .gpu-bin/mlaref-head is the committed build (231b05e), mlaref-new the working tree with the dry
# passes (off unless MLAREF_FAST_WARM sets them). (1) the SASS: each wgmma kernel's matrix and barrier
# instructions in both builds (the dry pass must be the loop's own code, not a copy); (2) s19b's exact checks with the warm variant on
# every edge, bf16, test and bench cell (edge and bf16 also as launched), and memcheck / racecheck with it;
# (3) the 8 bench shapes alternated, two passes: head, new with WARM=0 (the committed kernels' work), 1 (the
# logit warps' pass), 2 (the PV warps'), 3 (both).
# (Run a, 09:28 UTC, with the first version of the dry passes, on tile 0's slots as they were copied and
# written, not kept: its racecheck reported hazards on every wgmma cell. As run, the alternation named the
# builds head and new, which are not files, and timed nothing; the names are corrected below.)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin
date -u
bash "$(dirname "$0")/h200-2026-12-03-v27-script-sass.sh" head new
EDGE_VS="auto warm" SUITE_VS=warm SAN_BASE= SAN_VS="MLAREF_FAST_WARM=3" bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new:MLAREF_FAST_WARM=0 \
  mlaref-new:MLAREF_FAST_WARM=1 mlaref-new:MLAREF_FAST_WARM=2 mlaref-new:MLAREF_FAST_WARM=3
date -u
