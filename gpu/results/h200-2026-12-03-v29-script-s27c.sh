#!/usr/bin/env bash
# session 27, run c: mlaref-head = 207be99; mlaref-new = the cluster merge's first partial loads
# issued with the weights' loads (one round trip through the cluster, not two); mlaref-p8..p10 =
# timing probes of the cluster merge (wrong results by design, bench only; ...-v29-probe-merge.patch:
# 8 its two barriers only, 9 no lse, 10 hardware exp2 and reciprocal in place of the exact ones).
# (1) s19b's checks of the candidate: every cell of every suite as launched, the edge and bf16 cells
# also with k_attn_ws / k_attn forced; (2) the 8 bench shapes alternated, two passes, fast-wgmma-a8w8:
# head, new, p8..p10; (3) memcheck and racecheck on s19b's cluster cells (both kernels)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
EDGE_VS="auto ws" SUITE_VS=auto SAN_BASE= SAN_VS= bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -E "checks:|FAIL|exit [^0]"
cp $OUT/fast_check.txt $OUT/fast_check_auto_ws.txt
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new mlaref-p8 mlaref-p9 mlaref-p10
grep -E "^==|^bs=" $OUT/bench_alt.txt | awk '/^==/{print; next}{print $1, $6}'
EDGE_VS=none SUITE_VS=none timeout 170 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" > /dev/null 2>&1
echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" $OUT/fast_sanitize.txt
date -u
