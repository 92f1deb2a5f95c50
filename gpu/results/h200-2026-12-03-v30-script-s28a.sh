#!/usr/bin/env bash
# session 28, run a: mlaref-head = 207be99; mlaref-new = mlaref-c2 = the cluster merge's loop for clusters
# of 2 with all of a thread's items' partials loaded at once (merge_items<2, 4>); mlaref-c2own = the same
# with the block's own partial read by a plain shared load; mlaref-p12 = timing probe of the merge's
# weights half (...-v30-probe-weights.patch: no loads, max, exp2 or sums; wrong results, bench only).
# (1) s19b's checks of c2: every cell of every suite as launched, the edge and bf16 cells also with the
# other kernel forced; (2) the 8 bench shapes alternated, two passes, fast-wgmma-a8w8: head, c2, c2own,
# p12; (3) memcheck and racecheck on s19b's cluster cells (c2)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
EDGE_VS="auto ws" SUITE_VS=auto SAN_BASE= SAN_VS= bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -E "checks:|FAIL|exit [^0]"
cp $OUT/fast_check.txt $OUT/fast_check_auto_ws.txt
date -u
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2 mlaref-c2own mlaref-p12
grep -E "^==|^bs=" $OUT/bench_alt.txt | awk '/^==/{print; next}{print $1, $6}'
EDGE_VS=none SUITE_VS=none timeout 170 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" > /dev/null 2>&1
echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" $OUT/fast_sanitize.txt
date -u
