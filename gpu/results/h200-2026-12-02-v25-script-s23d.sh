#!/usr/bin/env bash
# session 23, device run d: I (.gpu-bin/mlaref-new: the committed code with every attention kernel's
# shared-memory limit set again, enumerated through attn_kernel, which loads them all) through session
# 22's gate and fastbench step (NOTES=1: the racecheck reports' lines in notes.txt); then I, E (fe52ca6,
# session 22's measured build) and H (0a6837e) alternated twice, bench gpu --reps 100 (bench_alt.txt)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
date -u
NOTES=1 bash "$(dirname "$0")/h200-2026-12-02-v24-script-s22-gate.sh"
bash "$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh" mlaref-new mlaref-E mlaref-H
