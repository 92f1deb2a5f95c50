#!/usr/bin/env bash
# session 27, run b: mlaref-head = e335eac; mlaref-new = k_merge's max started from the thread's own
# split (x0) and its loop from d + 128 (the review's leftover); mlaref-p4..p7 = timing probes of the
# wgmma kernel's stages (wrong results by design, bench only; ...-v29-probe-stages.patch: 4 no PV
# products, 5 no cluster merge, 6 no logits' products, 7 neither product).
# (1) s19b's checks with k_merge forced on every cell of every suite (the candidate);
# (2) the 8 bench shapes alternated, two passes, fast-wgmma-a8w8: head, new, p4..p7;
# (3) memcheck and racecheck, k_merge forced, the wgmma kernel's launch (MLAREF_FAST_WS=1)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
EDGE_VS=merge SUITE_VS=merge SAN_BASE= SAN_VS= bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -E "checks:|FAIL|exit [^0]"
cp $OUT/fast_check.txt $OUT/fast_check_merge.txt
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new mlaref-p4 mlaref-p5 mlaref-p6 mlaref-p7
grep -E "^==|^bs=" $OUT/bench_alt.txt | awk '/^==/{print; next}{print $1, $6}'
EDGE_VS=none SUITE_VS=none SAN_BASE="MLAREF_FAST_CLUSTER=0,MLAREF_FAST_WS=1" SAN_VS= \
  timeout 200 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" > /dev/null 2>&1
echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" $OUT/fast_sanitize.txt
date -u
