#!/usr/bin/env bash
# session 28, run d: mlaref-head = 207be99; mlaref-new = mlaref-c2own3 = run c's c2own2 (clusters of 2
# merging all of a thread's items at once, the block's own partial by a plain shared load) only in the
# wgmma kernel (384 threads: 3 items), k_attn and the 256-thread k_attn_ws as in head
# (...-v30-merge-items-own3.patch; run c measured c2own2's 4-item k_attn 2.4 us slower at bs=64, kv=8192).
# (1) s19b's checks of c2own3: every cell of every suite as launched, the edge and bf16 cells also with
# the other kernel forced; (2) alternated, two passes each: fast-wgmma-a8w8 head, c2own3; fast-a8w8 head,
# c2own3; (3) memcheck and racecheck on s19b's cluster cells (c2own3)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
EDGE_VS="auto ws" SUITE_VS=auto SAN_BASE= SAN_VS= bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" | grep -E "checks:|FAIL|exit [^0]"
cp $OUT/fast_check.txt $OUT/fast_check_auto_ws.txt
date -u
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2own3
mv $OUT/bench_alt.txt $OUT/bench_alt_wg.txt
ALT_ARGS="--recipe fast-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2own3
mv $OUT/bench_alt.txt $OUT/bench_alt_a8w8.txt
EDGE_VS=none SUITE_VS=none timeout 120 bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh" > /dev/null 2>&1
echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" $OUT/fast_sanitize.txt
date -u
