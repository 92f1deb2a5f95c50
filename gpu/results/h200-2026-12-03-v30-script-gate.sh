#!/usr/bin/env bash
# session 28: the gate each candidate of runs a to d passed, in two halves around its timing (as run,
# each of s28a to s28d had these lines written out; they call this now). checks: s19b's checks of
# .gpu-bin/mlaref-new, every cell of every suite as launched, the edge and bf16 cells also with the
# other kernel forced, kept as $OUT/fast_check_auto_ws.txt; san [SECONDS]: memcheck and racecheck on
# s19b's cluster cells, stopped after SECONDS (170 unless given), and their count.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
S19B="$(dirname "$0")/h200-2026-12-02-v21-script-s19b.sh"
case ${1:-} in
  checks)
    date -u
    EDGE_VS="auto ws" SUITE_VS=auto SAN_BASE= SAN_VS= bash "$S19B" | grep -E "checks:|FAIL|exit [^0]"
    cp $OUT/fast_check.txt $OUT/fast_check_auto_ws.txt
    date -u ;;
  san)
    EDGE_VS=none SUITE_VS=none timeout ${2:-170} bash "$S19B" > /dev/null 2>&1
    echo "sanitizer runs: $(grep -c . $OUT/fast_sanitize.txt), clean: $(grep -cE 'exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)' $OUT/fast_sanitize.txt)"
    grep -vE "exit 0 .*(ERROR SUMMARY: 0|RACECHECK SUMMARY: 0)" $OUT/fast_sanitize.txt
    date -u ;;
  *) echo "usage: $0 checks | san [SECONDS]" >&2; exit 2 ;;
esac
