#!/bin/sh
# A kernel that declines the cells of three batches (exit status 77, the reason on stderr) and is
# the model on the others.
#   usage: skip.sh MLAREF RECIPE CELL INPUTS OUT
case "$3" in
bs3_*)
  echo "skip.sh: looking at $3" >&2
  echo "skip.sh: no kernel for 3 batches" >&2
  exit 77
  ;;
esac
exec "$1" run --recipe "$2" --inputs "$4" --out "$5" >/dev/null
