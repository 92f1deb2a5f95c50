#!/usr/bin/env bash
# The probe suite on the GPU kernels (scripts/gpu_run.sh, step probe):
#   scripts/gpu/probe_check.sh CLI FAULTS_CLI DIR
# CLI: an mlaref built with GPU code; FAULTS_CLI: one built with -DMLAREF_GPU_FAULTS=ON (the fast
# kernel's planted faults, gpu/fast/host.cu, `gpu run --variant fault=N`); DIR: a scratch
# folder. On every probe cell each
# kernel runs: the exact kernel (triton-fp8-split and aiter-a8w8-ps, fp32-seq on bf16 KV), held
# bit for bit to the model and to the default rules; the fast kernel (its recipes for the cell's
# KV format), held to the default rules. A cell a kernel refuses (the exact kernel: more than 16
# heads; fp8 Q, scales apart from kv_scale, an sm_scale: `gpu run` exits 2) is skipped, not
# counted. Then each planted fault must fail the default rules on at least one cell; and the seeds'
# Triton kernels, where .peers/ holds them, pass on the cell they take. Prints a line a run; exit 1
# on a false alarm, an error or a fault no cell catches.
set -uo pipefail
CLI=$1 FCLI=$2 D=$3
status=0
rm -rf "$D" && mkdir -p "$D"
"$CLI" gen --suite probe --out "$D/in" >/dev/null || { echo "probe: gen failed"; exit 1; }

# verdict CLI KERNEL RECIPE FILE [GPU RUN OPTION...] [-- RULE...]: the kernel's run held by
# check: pass, FAIL, error or skipped (with the kernel's reason)
verdict() {
  local cli=$1 k=$2 r=$3 f=$4 opts=() rules=()
  shift 4
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ $# -gt 0 ] && shift && rules=("$@")
  "$cli" gpu run --kernel "$k" "${opts[@]}" --recipe "$r" --inputs "$f" --out "$D/o.safetensors" \
    > "$D/run.log" 2>&1
  case $? in
    0) ;;
    2) echo "skipped ($(tail -1 "$D/run.log" | sed 's/^mlaref gpu run: //'))"; return ;;
    *) echo "error: $(tail -1 "$D/run.log")"; return ;;
  esac
  if "$cli" check --inputs "$f" --output "$D/o.safetensors" --recipe "$r" "${rules[@]}" \
    > "$D/check.log" 2>&1; then echo pass; else echo "FAIL: $(grep -m1 FAIL "$D/check.log")"; fi
}

# the planted faults, by their variant number (gpu/fast/host.cu)
faults="drop-last causal-late no-kv-scale page-off-by-one"
declare -A caught number=([drop-last]=1 [causal-late]=2 [no-kv-scale]=3 [page-off-by-one]=4)
for x in $faults; do caught[$x]=0; done
for f in "$D"/in/*.safetensors; do
  c=$(basename "$f" .safetensors)
  case $c in
    bf16kv) ex="fp32-seq"; fr="fast-a16w16 fast-a8w16" ;;
    fnuz) ex="triton-fp8-split aiter-a8w8-ps"; fr="fast-a16w8 fast-a8w8" ;;
    *) ex="triton-fp8-split aiter-a8w8-ps"; fr="fast-a16w8 fast-a8w8 fast-wgmma-a8w8" ;;
  esac
  for r in $ex; do
    v=$(verdict "$CLI" exact "$r" "$f" -- --rule exact --rule fa3 --rule structure)
    echo "$c exact $r: $v"
    case $v in pass | skipped*) ;; *) status=1 ;; esac
  done
  for r in $fr; do
    v=$(verdict "$CLI" fast "$r" "$f")
    echo "$c fast $r: $v"
    case $v in pass) ;; skipped*) continue ;; *) status=1 ;; esac
    for x in $faults; do
      w=$(verdict "$FCLI" fast "$r" "$f" --variant "fault=${number[$x]}")
      echo "$c fast $r, planted $x: $w"
      case $w in FAIL*) caught[$x]=$((caught[$x] + 1)) ;; esac
    done
  done
done
for x in $faults; do
  echo "planted fault $x: caught on ${caught[$x]} runs"
  [ "${caught[$x]}" -gt 0 ] || status=1
done
# the seeds' Triton kernels (.peers/, copied from ../shared/peers) on the one probe cell their
# contract takes (uniform lengths, page 1, q_len 1, 16 heads, OCP e4m3: splits), held to the
# default rules under their recipes (triton-fp8-single; triton-fp8-split with their split count)
if [ -f .peers/seed_triton_kernels.py ]; then
  python3 scripts/gpu/seed_triton_outputs.py "$D/seeds" "$D/in/splits.safetensors" >/dev/null ||
    { echo "seeds: their kernels failed to run"; status=1; }
  for o in "$D"/seeds/splits.*.safetensors; do
    [ -e "$o" ] || continue
    k=$(basename "$o" .safetensors); k=${k##*.}
    if [ "$k" = single ]; then a=(--recipe triton-fp8-single)
    else a=(--recipe triton-fp8-split --set "split.count=${k#split}"); fi
    if "$CLI" check --inputs "$D/in/splits.safetensors" --output "$o" "${a[@]}" \
      > "$D/check.log" 2>&1; then echo "splits seeds $k: pass"
    else echo "splits seeds $k: FAIL: $(grep -m1 FAIL "$D/check.log")"; status=1; fi
  done
else
  echo "seeds: skipped, no .peers/seed_triton_kernels.py (copy ../shared/peers/)"
fi
exit $status
