#!/usr/bin/env bash
# session 30, run a: the committed CLI (split.overhead = 18) and the new key split.per (the waves
# rule counting a split's blocks as query tokens, the fast kernel's grid) checked on the device.
#   checks: the gate's checks (s19b: every recipe, every cell of every suite as launched, the edge
#           and bf16 cells with the other kernel forced) of .gpu-bin/mlaref-new, whose fast recipes
#           count batches (the committed counts); then cells bit for bit against `mlaref run`: the
#           two where overheads 12 and 18 differ or the rule moves most (bs=140 kv=4096, bs=67
#           kv=8192) with the recipe, and four q_len > 1 cells with fast-wgmma-a8w8 set to
#           split.per = token (a recipe file: the kernel runs the counts the file gives).
#   sweep:  h200-2026-12-03-v31-script-sweep.sh (fixed counts 1 to 4, the recipe's counts, and at
#           q_len > 1 the split.per = token counts).
set -u
R=$(dirname "$0")
export LD_LIBRARY_PATH=$PWD/.gpu-bin
mkdir -p /tmp/rec
.gpu-bin/mlaref-new recipe show fast-wgmma-a8w8 | sed 's/^split.per = .*/split.per = token/' | grep -v "^# " > /tmp/rec/wg-token.recipe
case ${1:-} in
  checks)
    bash $R/h200-2026-12-03-v30-script-gate.sh checks
    CELL_RS=fast-wgmma-a8w8 bash $R/h200-2026-12-03-v31-script-cells.sh bs=140,kv=4096 bs=67,kv=8192 | tee $OUT/waves_cells.txt
    CELL_RS=/tmp/rec/wg-token.recipe bash $R/h200-2026-12-03-v31-script-cells.sh bs=20,q=4,kv=8192 bs=33,q=4,kv=8192 \
      bs=66,q=2,kv=4096 lens=300:5000:70:8192:3:2048,q=3 | tee -a $OUT/waves_cells.txt
    date -u ;;
  sweep) bash $R/h200-2026-12-03-v31-script-sweep.sh ;; # KVS, QSH: as the sweep script says
  more) # run b: fixed counts 5 to 8 at kv=8192 (run a's sweep stopped at 4; bs=72 and 136 were best at 3)
    M=.gpu-bin/mlaref-new F=
    for n in 5 6 7 8; do
      $M recipe show fast-wgmma-a8w8 | sed "s/^split.rule = .*/split.rule = fixed/; s/^split.count = .*/split.count = $n/" | grep -v "^# " > /tmp/rec/wg-fixed$n.recipe
      F="$F --recipe /tmp/rec/wg-fixed$n.recipe"
    done
    $M bench gpu $F $(for bs in 72 88 104 120 136 152 176 216; do echo --shape bs=$bs,kv=8192,seed=7; done) --reps 100 > $OUT/bench_more.txt 2>&1
    grep -E "^bs=" $OUT/bench_more.txt | awk '{print $1, $3, $6}'
    date -u ;;
  *) echo "usage: $0 checks | sweep | more" >&2; exit 2 ;;
esac
