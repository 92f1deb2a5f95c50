#!/usr/bin/env bash
# session 28, run b: mlaref-head = 207be99; mlaref-new = mlaref-own = the cluster merge's loop reading the
# block's own partial by a plain shared load (...-v30-merge-own.patch; the other splits' through the
# cluster as before); mlaref-c2own = run a's merge_items with that load.
# (1) s19b's checks of own: every cell of every suite as launched, the edge and bf16 cells also with the
# other kernel forced; (2) the 8 bench shapes alternated, three passes, fast-wgmma-a8w8: head, own, c2own;
# (3) memcheck and racecheck on s19b's cluster cells (own)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
EDGE_VS="auto ws" SUITE_VS=auto SAN_BASE= SAN_VS= bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -E "checks:|FAIL|exit [^0]"
cp $OUT/fast_check.txt $OUT/fast_check_auto_ws.txt
date -u
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-own mlaref-c2own
mv $OUT/bench_alt.txt $OUT/bench_alt12.txt
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-own mlaref-head
grep -E "^==|^bs=" $OUT/bench_alt12.txt $OUT/bench_alt.txt | awk '/==/{print; next}{print $1, $6}'
EDGE_VS=none SUITE_VS=none timeout 170 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" > /dev/null 2>&1
echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" $OUT/fast_sanitize.txt
date -u
