#!/usr/bin/env bash
# session 20, device run i: run h again (the same commands) with mlaref-new built from the second version
# of copy_rows (a chunk's row and column worked out in a loop; run h's unrolled them and spilled:
# h200-2026-12-02-v22-copy-rows.patch)
bash "$(dirname "$0")/h200-2026-12-02-v22-script-s20h.sh"
