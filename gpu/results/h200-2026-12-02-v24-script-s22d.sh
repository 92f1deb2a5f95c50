#!/usr/bin/env bash
# session 22, device run d: the code as committed (.gpu-bin/mlaref-new: run c's E, comments changed
# since, PTX identical) checked as run a checked B (s19b with the lin variants; memcheck and
# racecheck, the reports' first lines into notes.txt), gpu/probes/cvt_probe.cu (with the division
# check) into notes.txt, then gpu_run.sh's fastbench step (its gpu_run.log, peers.log, peers.json not
# brought back)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
{ echo "== cvt_probe"; .gpu-bin/cvt_probe; echo "cvt_probe: exit $?"; } 2>&1 | tee $OUT/notes.txt
NOTES=1 bash "$(dirname "$0")/h200-2026-12-02-v24-script-s22-gate.sh" # (the same commands, written out in this file when it ran; run d's grep of the reports took the Error, Race reported and SUMMARY lines only)
