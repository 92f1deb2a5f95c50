#!/usr/bin/env bash
# session 28, run a: mlaref-head = 207be99; mlaref-new = mlaref-c2 = the cluster merge's loop for clusters
# of 2 with all of a thread's items' partials loaded at once (merge_items<2, 4>); mlaref-c2own = the same
# with the block's own partial read by a plain shared load; mlaref-p12 = timing probe of the merge's
# weights half (...-v30-probe-weights.patch: no loads, max, exp2 or sums; wrong results, bench only).
# (1) s19b's checks of c2: every cell of every suite as launched, the edge and bf16 cells also with the
# other kernel forced; (2) the 8 bench shapes alternated, two passes, fast-wgmma-a8w8: head, c2, c2own,
# p12; (3) memcheck and racecheck on s19b's cluster cells (c2)
# (Steps 1 and 3 as run were written out here; ...-v30-script-gate.sh has them, unchanged.)
set -u
G="$(dirname "$0")/h200-2026-12-03-v30-script-gate.sh"
bash "$G" checks
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2 mlaref-c2own mlaref-p12
grep -E "^==|^bs=" $OUT/bench_alt.txt | awk '/^==/{print; next}{print $1, $6}'
bash "$G" san 170
