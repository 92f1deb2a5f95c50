#!/usr/bin/env bash
# session 23, device run a: (1) the committed code (0a6837e: the launch sets its own attention kernel's
# shared-memory limit) through session 22's gate and fastbench step; (2) the bf16_3 racecheck report
# of sessions 9 to 22 again with a -lineinfo build of the same source (.gpu-bin/mlaref-L), its full
# report (source lines); (3) the two-wave shapes: bench gpu at bs around the SM count (132), kv 1024
# and 8192, fast-wgmma-a8w8, the read and plan floors beside; (2) and (3) appended to notes.txt
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
NOTES=1 bash "$(dirname "$0")/h200-2026-12-02-v24-script-s22-gate.sh"
FD=/tmp/mlaref-fast
for i in 1 2 3; do
  MLAREF_FAST_WS=1 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 .gpu-bin/mlaref-L gpu run --kernel fast \
    --recipe fast-a8w16 --set q.scale=dynamic --inputs $FD/bf16/bf16_3.safetensors --out $FD/rc.$i.safetensors > $FD/rc.$i.log 2>&1
  echo "== racecheck -lineinfo, bf16_3 fast-a8w16 MLAREF_FAST_WS=1, pass $i: exit $?"
  grep -v -E "Saved host backtrace|Host Frame|^=========\s*$" $FD/rc.$i.log | head -60
done >> $OUT/notes.txt 2>&1
echo "== waves $(date -u)" >> $OUT/notes.txt
sh=; for b in 128 132 133 200 256 264; do sh="$sh --shape bs=$b,kv=1024"; done
for b in 128 132 256; do sh="$sh --shape bs=$b,kv=8192"; done
.gpu-bin/mlaref-new bench gpu --recipe fast-wgmma-a8w8 --reps 100 $sh >> $OUT/notes.txt 2>&1
echo "waves: exit $?" >> $OUT/notes.txt
tail -30 $OUT/notes.txt | cut -c1-170
date -u
