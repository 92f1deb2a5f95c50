#!/usr/bin/env bash
# session 22: what runs a, b and d did after their own steps, with .gpu-bin/mlaref-new in place:
# session 21's run g checks (s19b with the lin variants; memcheck and racecheck), with NOTES=1 the
# racecheck reports' first lines appended to notes.txt (runs b and d), then gpu_run.sh's fastbench
# step (its gpu_run.log and peers.log not brought back: a device run returns 8 files at most)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
EDGE_VS="auto ws merge table lin lin2" SAN_VS="MLAREF_FAST_LIN=1 MLAREF_FAST_WS=1,MLAREF_FAST_LIN=2" \
  bash "$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
if [ "${NOTES:-0}" = 1 ]; then
  for f in /tmp/mlaref-fast/san.racecheck.*.log; do
    grep -q "RACECHECK SUMMARY: 0 hazards" "$f" && continue
    echo "== $f"; grep -E "Error|Race reported|at .*0x|in .*k_|SUMMARY" "$f" | head -24
  done >> $OUT/notes.txt 2>&1
fi
MLAREF_GPU_STEPS=fastbench MLAREF_GPU_CLI=$PWD/.gpu-bin/mlaref-new bash scripts/gpu_run.sh > $OUT/gpu_run_fastbench.log 2>&1
echo "fastbench: status $? $(tail -1 $OUT/gpu_run_fastbench.log)"
grep -E "^bs=|geomean|targets \(issue 8, every" $OUT/bench_gpu.txt | cut -c1-160
grep -E "^bs=256" $OUT/bench_gpu_sustained.txt | cut -c1-150
rm -f $OUT/gpu_run.log $OUT/peers.log
date -u
