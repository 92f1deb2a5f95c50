#!/usr/bin/env bash
# session 25: the wgmma kernels' (k_attn_ws<0, 1, 1, LIN>) instruction counts in each build named
# (files .gpu-bin/mlaref-NAME), by opcode (the matrix units, ldmatrix, shared stores, barriers,
# branches) and in all, into $OUT/sass_NAME.txt, then side by side on stdout (runs a and b: the dry
# pass must be the loop's own code, not a copy). As run in a, the counts were written out in s25a
# and missed QGMMA (wgmma with fp8 operands) and the names' prefix was kept.
set -u
B=$PWD/.gpu-bin
for b in "$@"; do
  cuobjdump -sass $B/mlaref-$b > /tmp/sass.$b.txt 2>&1 || echo "cuobjdump $b failed"
  awk '/Function : /{f=$3} /\/\*[0-9a-f]+\*\/ /{n[f" all"]++; for(i=1;i<=NF;i++) if ($i ~ /^(QGMMA|HGMMA|HMMA|BAR|WARPSYNC|BRA|LDSM|STS|EXIT)/) {split($i,a,"."); n[f" "a[1]]++; break}}
       END{for(k in n) print k, n[k]}' /tmp/sass.$b.txt | grep "k_attn_wsILi0ELi1ELi1" | sed 's/_ZN39_GLOBAL__N__[0-9a-f_]*fast_cu_[0-9a-f]*//' | sort > $OUT/sass_$b.txt
done
paste $(for b in "$@"; do echo $OUT/sass_$b.txt; done) | awk '{printf "%s %s", $1, $2; for (i = 3; i <= NF; i += 3) printf " %s", $i; print ""}'
