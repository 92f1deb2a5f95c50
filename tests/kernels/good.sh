#!/bin/sh
# A correct kernel of any recipe: the model itself.
#   usage: good.sh MLAREF RECIPE INPUTS OUT
exec "$1" run --recipe "$2" --inputs "$3" --out "$4" >/dev/null
