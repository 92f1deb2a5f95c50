#!/usr/bin/env bash
# session 28, run b: mlaref-head = 207be99; mlaref-new = mlaref-own = the cluster merge's loop reading the
# block's own partial by a plain shared load (...-v30-merge-own.patch; the other splits' through the
# cluster as before); mlaref-c2own = run a's merge_items with that load.
# (1) s19b's checks of own: every cell of every suite as launched, the edge and bf16 cells also with the
# other kernel forced; (2) the 8 bench shapes alternated, three passes, fast-wgmma-a8w8: head, own, c2own;
# (3) memcheck and racecheck on s19b's cluster cells (own)
# (Steps 1 and 3 as run were written out here; ...-v30-script-gate.sh has them, unchanged.)
set -u
G="$(dirname "$0")/h200-2026-12-03-v30-script-gate.sh"
bash "$G" checks
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-own mlaref-c2own
mv $OUT/bench_alt.txt $OUT/bench_alt12.txt
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-own mlaref-head
grep -E "^==|^bs=" $OUT/bench_alt12.txt $OUT/bench_alt.txt | awk '/==/{print; next}{print $1, $6}'
bash "$G" san 170
