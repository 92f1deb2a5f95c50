#!/usr/bin/env bash
# session 27, run e: mlaref-head = 207be99; mlaref-new = ...-v29-merge-warm.patch: k_attn_ws's logit
# warps run the cluster merge's code dry (no barrier, no store, own shared memory only) before the
# block barrier (e), so that its instructions are fetched while the PV warps finish; MLAREF_FAST_MERGEWARM=0
# turns that off in the same build. (1) the 8 bench shapes alternated, two passes, fast-wgmma-a8w8;
# (2) s19b's checks of the candidate: every cell of every suite as launched (110 s at most);
# (3) memcheck and racecheck on the cluster cells, k_attn_ws (35 s at most): the device time left
# (294 s with the start) allowed no more
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-new
grep -E "^==|^bs=" $OUT/bench_alt.txt | awk '/^==/{printf "\n%s ", $0; next}{printf "%s ", $6}'; echo
EDGE_VS=auto SUITE_VS=auto SAN_BASE= SAN_VS= timeout 110 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -E "checks:|FAIL|exit [^0]"
cp $OUT/fast_check.txt $OUT/fast_check_auto.txt
EDGE_VS=none SUITE_VS=none SAN_BASE="MLAREF_FAST_WS=1" SAN_VS= timeout 35 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" > /dev/null 2>&1
echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" $OUT/fast_sanitize.txt
date -u
