#!/usr/bin/env bash
# session 29, run e: the NVIDIA fast recipes on the waves split rule (mlaref-new: this session's build,
# split.rule = waves, split.cus = 132, split.overhead = 12; mlaref-head: 207be99, aiter_v1 with 128
# CUs; the kernels' code is the same). (1) s19b's checks of mlaref-new, every cell of every suite as
# launched; (2) cells whose splits the rule changes, fast-wgmma-a8w8 and fast-a8w8: the kernel's o
# and lse bit for bit against `mlaref run` of the same recipe; (3) bench gpu, head and new
# alternated, two passes: shapes off the bench list, then the 8 bench shapes (their plans unchanged).
# (As run, step (2)'s lines were written out here, with split.overhead = 12 in mlaref-new; ...-v31-script-cells.sh
# has them, unchanged.)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
R=$(dirname "$0")
date -u
EDGE_VS=auto SUITE_VS=auto SAN_BASE= SAN_VS= timeout 220 bash $R/h200-2026-12-02-v21-script-s19b.sh | grep -E "checks:|FAIL|exit [^0]"
cp $OUT/fast_check.txt $OUT/fast_check_auto.txt
bash $R/h200-2026-12-03-v31-script-cells.sh bs=67,kv=1024 bs=96,kv=2048 bs=140,kv=4096 bs=96,kv=8192 bs=133,kv=8192 | tee $OUT/waves_cells.txt
date -u
S=; for sh in bs=67,kv=8192 bs=96,kv=8192 bs=112,kv=8192 bs=133,kv=8192 bs=160,kv=8192 bs=184,kv=8192 bs=200,kv=8192 bs=232,kv=8192 \
              bs=140,kv=4096 bs=96,kv=2048 bs=67,kv=1024; do S="$S --shape $sh,seed=7"; done
ALT_ARGS="--recipe fast-wgmma-a8w8 $S" bash $R/h200-2026-12-02-v25-script-alt.sh mlaref-head mlaref-new && mv $OUT/bench_alt.txt $OUT/bench_alt_off.txt
ALT_ARGS="--recipe fast-wgmma-a8w8" bash $R/h200-2026-12-02-v25-script-alt.sh mlaref-head mlaref-new && mv $OUT/bench_alt.txt $OUT/bench_alt_bench.txt
grep -hE "^== |^bs=" $OUT/bench_alt_off.txt $OUT/bench_alt_bench.txt | awk '/^==/{print; next}{print $1, $3, $4, $6, $11, $12}'
