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
for b in head new; do
  cuobjdump -sass $B/mlaref-$b > /tmp/sass.$b.txt 2>&1 || echo "cuobjdump $b failed"
  awk '/Function : /{f=$3} /\/\*[0-9a-f]+\*\/ /{n[f" all"]++; for(i=1;i<=NF;i++) if ($i ~ /^(QGMMA|HGMMA|HMMA|BAR|WARPSYNC|BRA|LDSM|STS|EXIT)/) {split($i,a,"."); n[f" "a[1]]++; break}}
       END{for(k in n) print k, n[k]}' /tmp/sass.$b.txt | grep "k_attn_wsILi0ELi1ELi1" | sed 's/_ZN39_GLOBAL__N__[0-9a-f_]*fast_cu_[0-9a-f]*//' | sort > $OUT/sass_$b.txt
done
paste $OUT/sass_head.txt $OUT/sass_new.txt | awk '{print $1, $2, $3, $6}'
ONLY_R=fast-wgmma-a8w8 EDGE_VS="auto merge table lin lin2 warm" SUITE_VS="auto warm" SAN_BASE= SAN_VS="MLAREF_FAST_WARM=0 MLAREF_FAST_WARM=3" \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new:MLAREF_FAST_WARM=0 \
  mlaref-new:MLAREF_FAST_WARM=1 mlaref-new:MLAREF_FAST_WARM=2 mlaref-new:MLAREF_FAST_WARM=3
grep -E "^==|^bs=" $OUT/bench_alt.txt | cut -c1-100
date -u
