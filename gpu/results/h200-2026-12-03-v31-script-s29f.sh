#!/usr/bin/env bash
# session 29, run f: the committed split.overhead = 18 (run e's mlaref-new had 12; the kernels' code is
# the same, only the counts the rule picks differ): s19b's checks of fast-wgmma-a8w8 on every cell
# of every suite as launched, then the cells where 12 and 18 pick differently or the rule moves
# most (bs=140 kv=4096: 1 split, bs=67 kv=8192: 3), bit for bit against `mlaref run`. Short: the
# session's device time left was 210 s.
set -u
R=$(dirname "$0")
date -u
ONLY_R=fast-wgmma-a8w8 EDGE_VS=auto SUITE_VS=auto SAN_BASE= SAN_VS= timeout 90 bash $R/h200-2026-12-02-v21-script-s19b.sh | grep -E "checks:|FAIL|exit [^0]"
CELL_RS=fast-wgmma-a8w8 bash $R/h200-2026-12-03-v31-script-cells.sh bs=140,kv=4096 bs=67,kv=8192 | tee $OUT/waves_cells.txt
date -u
