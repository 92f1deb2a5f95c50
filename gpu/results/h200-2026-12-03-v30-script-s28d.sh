#!/usr/bin/env bash
# session 28, run d: mlaref-head = 207be99; mlaref-new = mlaref-c2own3 = run c's c2own2 (clusters of 2
# merging all of a thread's items at once, the block's own partial by a plain shared load) only in the
# wgmma kernel (384 threads: 3 items), k_attn and the 256-thread k_attn_ws as in head
# (...-v30-merge-items-own3.patch; run c measured fast-a8w8, whose k_attn_ws has 256 threads (4 items), 2.4 us slower with c2own2 at bs=64, kv=8192).
# (1) s19b's checks of c2own3: every cell of every suite as launched, the edge and bf16 cells also with
# the other kernel forced; (2) alternated, two passes each: fast-wgmma-a8w8 head, c2own3; fast-a8w8 head,
# c2own3; (3) memcheck and racecheck on s19b's cluster cells (c2own3)
# (Steps 1 and 3 as run were written out here; ...-v30-script-gate.sh has them, unchanged.)
set -u
G="$(dirname "$0")/h200-2026-12-03-v30-script-gate.sh"
bash "$G" checks
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2own3
mv $OUT/bench_alt.txt $OUT/bench_alt_wg.txt
ALT_ARGS="--recipe fast-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2own3
mv $OUT/bench_alt.txt $OUT/bench_alt_a8w8.txt
bash "$G" san 120
