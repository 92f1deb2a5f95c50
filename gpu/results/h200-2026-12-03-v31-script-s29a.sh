#!/usr/bin/env bash
# session 29, run a (prepared in session 28 as ...-v30-script-layout.sh, run as it was written, then
# `...-v30-script-gate.sh checks` on mlaref-new = c2own5 in the same call): is fast-a8w8's +2 us at bs=64, kv=8192 with c2own3 (run d) code
# layout alone? mlaref-head = 207be99; mlaref-c2own3 = ...-v30-merge-items-own3.patch; mlaref-p13 =
# ...-v30-probe-layout.patch (c2own3's code compiled in, never run: head's behaviour with c2own3's code
# size); mlaref-c2own5 = c2own3 with the clusters-of-2 loop in a noinline function of its own
# (...-v30-merge-items-own5.patch: cluster_merge_'s body keeps its size). Timing only (p13 computes what
# head computes, but is not a candidate; c2own5 needs the gate before it can land): fast-a8w8 and
# fast-wgmma-a8w8, each alternated four passes (two calls of the alternation, the order reversed).
set -u
ALT="$(dirname "$0")/h200-2026-12-02-v25-script-alt.sh"
for r in fast-a8w8 fast-wgmma-a8w8; do
  ALT_ARGS="--recipe $r" bash "$ALT" mlaref-head mlaref-c2own3 mlaref-p13 mlaref-c2own5 && mv $OUT/bench_alt.txt $OUT/bench_alt_$r-1.txt
  ALT_ARGS="--recipe $r" bash "$ALT" mlaref-c2own5 mlaref-p13 mlaref-c2own3 mlaref-head && mv $OUT/bench_alt.txt $OUT/bench_alt_$r-2.txt
done
grep -E "^==|^bs=64" $OUT/bench_alt_*.txt | awk '/==/{print; next}{print $1, $6}'
