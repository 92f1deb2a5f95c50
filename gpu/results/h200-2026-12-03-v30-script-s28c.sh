#!/usr/bin/env bash
# session 28, run c: mlaref-head = 207be99; mlaref-new = mlaref-c2own2 = clusters of 2 merging all of a
# thread's items at once with the block's own partial by a plain shared load, larger clusters as in
# head (...-v30-merge-items-own2.patch); mlaref-c2own = run a's (the own load at every cluster size).
# (1) s19b's checks of c2own2: every cell of every suite as launched, the edge and bf16 cells also with
# the other kernel forced; (2) the 8 bench shapes alternated, fast-wgmma-a8w8: head, c2own2, c2own (two
# passes), c2own2, head (two passes); fast-a8w8 (k_attn): head, c2own2 (two passes);
# (3) memcheck and racecheck on s19b's cluster cells (c2own2)
# (Steps 1 and 3 as run were written out here; ...-v30-script-gate.sh has them, unchanged.)
set -u
G="$(dirname "$0")/h200-2026-12-03-v30-script-gate.sh"
bash "$G" checks
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2own2 mlaref-c2own
mv $OUT/bench_alt.txt $OUT/bench_alt12.txt
ALT_ARGS="--recipe fast-wgmma-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-c2own2 mlaref-head
mv $OUT/bench_alt.txt $OUT/bench_alt34.txt
ALT_ARGS="--recipe fast-a8w8" bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-head mlaref-c2own2
mv $OUT/bench_alt.txt $OUT/bench_alt_a8w8.txt
grep -E "^==|^bs=" $OUT/bench_alt12.txt $OUT/bench_alt34.txt $OUT/bench_alt_a8w8.txt | awk '/==/{print; next}{print $1, $6}'
bash "$G" san 170
