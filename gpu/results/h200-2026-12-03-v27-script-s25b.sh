#!/usr/bin/env bash
# session 25, device run b: the dry passes' second version (reads only what nothing writes at the
# time: the logit warps' on tile 1's slots before (q), the PV warps' on tile 2's, issued after it; none
# in the lin_copy kernel). As s25a: (1) the SASS counts of both builds' wgmma kernels; (2) the exact
# checks of the wgmma recipe (the other kernels' PTX is 231b05e's, the parameter block's size kept),
# every edge and bf16 cell as launched, with k_merge, with the table and k_qprep, with copy_lin and
# lin_copy forced, with the dry passes, and every test and bench cell as launched and with the dry
# passes; memcheck and racecheck as launched and with them; (3) the 8 bench shapes alternated.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
B=$PWD/.gpu-bin
date -u
bash "$(dirname "$0")/h200-2026-12-03-v27-script-sass.sh" head new
ONLY_R=fast-wgmma-a8w8 EDGE_VS="auto merge table lin lin2 warm" SUITE_VS="auto warm" SAN_BASE= SAN_VS="MLAREF_FAST_WARM=0 MLAREF_FAST_WARM=3" \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new:MLAREF_FAST_WARM=0 \
  mlaref-new:MLAREF_FAST_WARM=1 mlaref-new:MLAREF_FAST_WARM=2 mlaref-new:MLAREF_FAST_WARM=3
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-100
date -u
