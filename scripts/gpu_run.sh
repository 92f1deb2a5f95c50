#!/usr/bin/env bash
# Builds the GPU code and runs every GPU test and benchmark on a machine with an NVIDIA GPU
# (nvcc, PyTorch), in one go; results go to $OUT (default ./gpu-out).
#   0. the exact kernel (gpu/exact) through the full CLI: $MLAREF_GPU_CLI if set (a CLI built with
#      -DMLAREF_GPU=CUDA elsewhere, e.g. on a CI machine, when this one lacks the -dev packages),
#      else built here with CMake (-DMLAREF_GPU=CUDA -DMLAREF_GPU_ENFORCE=ON) into build/gpu:
#      bit identity with the committed golden digests on every cell of the edge, test and bench
#      suites for every built-in recipe (golden --verify --gpu); compute-sanitizer memcheck and
#      racecheck on the edge suite (sanitize); the benchmark (bench, $OUT/bench_gpu_exact.txt).
#   0b. the fast kernel (gpu/fast), steps fast and fastbench: its hardware conversions against the
#      encoders (gpu/probes/cvt_probe.cu, $OUT/cvt_probe.txt); gpu run --kernel fast, then check
#      --rule exact --rule budget --rule fa3 and the lse against mlaref run's (compare --rule
#      exact), on every cell of the edge, test and bench suites (fp8 KV: fast-a16w8 and fast-a8w8,
#      OCP e4m3 also fast-wgmma-a8w8 and fast-wgmma-fp8; bf16 KV: fast-a16w16 and fast-a8w16), a
#      bf16-KV set of five shapes and a set of ten shapes of 20 to 128 heads ($OUT/fast_check.txt);
#      the edge, bf16 and heads cells also with each variant the plan would not take forced by gpu
#      run's --variant (mlr_gpu_fast_opts): ws=1 (k_attn_ws, which the plan takes for long splits
#      only; ws=0, k_attn, for fast-wgmma-a8w8), cluster=0 (k_merge, which the plan skips where 2..8
#      splits merge in their cluster), toktable=1,qdiv=1 (the token table read and static e4m3 Q
#      divided by k_qprep, where the plan would work out the one and multiply by the reciprocal for
#      the other), lin=1 (fast-wgmma-a8w8: copy_lin) and ws=1,lin=2 (lin_copy), k_attn_ws's
#      contiguous copies at every unpaged split length; compute-sanitizer memcheck and racecheck on
#      seven cells, each kernel variant, and memcheck on k_attn_rows reusing its tile buffers;
#      .peers/seed_peers.py (when copied from ../shared/peers) and other people's kernels
#      (scripts/gpu/third_party_bench.py, $OUT/third_party_bench.json, with .peers/third_party) and
#      bench gpu --peers beside them ($OUT/bench_gpu.txt, $OUT/peers.json; with the read floor,
#      whose readers check their sums: a reader that skips or repeats a word fails the step, and the
#      plan floor, the plan's skeleton with no attention arithmetic, whose row counts are checked);
#      the largest shape again after 3 s of warm-up, the time under sustained load
#      ($OUT/bench_gpu_sustained.txt); the plan floor on a ragged paged batch and with k_merge
#      forced, bench gpu --variant cluster=0 ($OUT/bench_gpu_plans.txt).
#   0c. the Python package (step python; $MLAREF_PYTHON, default build/default/python) on this
#      machine's torch: float8 dtypes on CUDA (scripts/gpu/python_float8_check.py,
#      $OUT/python_float8.txt) and tests/python where pytest is installed.
#   0d. the probe suite (step probe, scripts/gpu/probe_check.sh, $OUT/probe.txt): the exact and
#      fast kernels and the seeds' Triton kernels pass the default check on every probe cell they
#      run, and each fault planted in the fast kernel (`gpu run --variant fault=N`) fails it on one
#      at least; the planted faults need a CLI built with -DMLAREF_GPU_FAULTS=ON:
#      $MLAREF_GPU_FAULTS_CLI, else built here into build/gpu-faults.
#   0e. other people's kernels (step thirdparty, scripts/gpu/third_party.sh, $OUT/third_party.txt):
#      AITER's Triton decode, FlashMLA's dense decode and the seeds' kernels on suite and random
#      cells, held to their recipes bit for bit and to the default rules (peers in .peers/).
#   1. bit identity: digests of formats, pmath and rng over binary32 inputs on the GPU, against
#      tests/data/bits_digests.txt (made on the CPU) and against this machine's CPU (all 2^32);
#   2. PyTorch agreement of every conversion over all 2^32 binary32 inputs;
#   3. files mlaref writes load in PyTorch and numpy, and the task's quantize_fp8 run by PyTorch
#      on CUDA gives mlaref's kv codes and kv_scale (inputs in $MLAREF_GPU_DATA, default
#      .gpu-data: made here with build/default/mlaref if absent and the CLI is built);
#   4. the seeds' Triton kernels (a peer in .peers/, never part of the project) run on the inputs
#      in $MLAREF_GPU_DATA/emu; their outputs ($OUT/peer.tgz) are compared with the emulator by
#      scripts/peer_compare.sh on a machine with the full CLI.
#   5. the matrix-unit probes (gpu/probes/mma_probe.cu: mma.sync on 2^20 random and 2^14 targeted
#      inner products a class and operand format; gpu/probes/wgmma_probe.cu: wgmma with e4m3,
#      e5m2, fp16 (B K- and MN-major) and bf16 operands, 2^20 a class) against ref/mma's models
#      ($OUT/mma, $OUT/wgmma: the summaries and the vectors kept as test data).
#   6. the hardware exp2 (gpu/probes/ex2_table.cu): its tables (x <= 0, x > 0) rebuilt and
#      compared with ref/sfu's (SHA-256), the model checked on every float, 4096 samples
#      ($OUT/ex2_samples.txt, the source of tests/data/sfu/), ex2.approx.ftz.f32 against it on
#      every float >= -126 (k_attn_rows takes it there); the reciprocal's table likewise
#      (gpu/probes/sfu_probe.cu), with its reciprocal, log2, division and positive-x exp2 samples
#      ($OUT/*_samples.txt), and the log2's table likewise.
# MLAREF_GPU_STEPS (default: every step, $ALL_STEPS below) picks the steps (0 = exact, badinput
# (tests/bad_input.sh: the gpu cases of the bad-input table in docs/checking.md), sanitize and
# bench, 0b = fast and fastbench, 0c = python, 0d = probe, 0e = thirdparty, 1 = bits, 2 and 3 =
# torch, 4 = peers, 5 = mma,
# 6 = sfu); MLAREF_GPU_REPS the benchmark's runs. Without a GPU it exits 77 (CTest's "skipped"),
# unless MLAREF_REQUIRE_GPU=1 makes that a failure.
# `gpu_run.sh --build-only` builds the programs it runs (the GPU machine has no jansson, so the CLI
# there is the MLAREF_FORMATS_ONLY variant) and stops: CTest's gpu_run_build runs it on every
# machine, so a change that breaks that build fails before it reaches the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
FP="-ffp-contract=off -fno-fast-math -fexcess-precision=standard -fno-math-errno"
BIN=${MLAREF_GPU_BIN:-/tmp}
mkdir -p "$BIN" || { echo "gpu_run: cannot make $BIN" >&2; exit 1; }
# the root (internal headers by path) and every module's public include folder
INC="-I. $(printf -- '-I%s ' */include */*/include)"
build() {
  gcc -O3 -std=c11 $FP -fopenmp $INC -DMLAREF_VERSION='"gpu-run"' -DMLAREF_FORMATS_ONLY \
      cli/main.c cli/cli_util.c cli/cmd_formats.c cli/cmd_selfcheck.c cli/cmd_bench.c \
      ref/base/status.c ref/base/parallel.c ref/formats/formats.c fixtures/rng/rng.c \
      fixtures/io/outpath.c \
      -fno-trapping-math -lm -o "$BIN/mlaref" || return 1
  "$NVCC" -O3 -std=c++17 -arch=sm_90 -fmad=false -prec-div=true -prec-sqrt=true -ftz=false \
      -Xcompiler -ffp-contract=off,-fno-fast-math,-fno-math-errno,-fopenmp $INC \
      gpu/probes/bits_digest.cu -o "$BIN/bits_digest" -lgomp || return 1
  gcc -O2 -std=c11 $FP $INC -c ref/mma/mma.c -o "$BIN/mma.o" || return 1
  "$NVCC" -O2 -std=c++17 -arch=sm_90 -fmad=false -ftz=false -Werror=all-warnings $INC \
      gpu/probes/mma_probe.cu "$BIN/mma.o" -o "$BIN/mma_probe" || return 1
  "$NVCC" -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -fmad=false -ftz=false \
      -Werror=all-warnings $INC gpu/probes/wgmma_probe.cu "$BIN/mma.o" -o "$BIN/wgmma_probe" ||
    return 1
  build_cvt_probe || return 1
  # ref/sfu's table and the model's check
  "$NVCC" -O2 -std=c++17 -arch=sm_90 -ftz=false -Werror=all-warnings $INC gpu/probes/ex2_table.cu \
      -o "$BIN/ex2_table" || return 1
  "$NVCC" -O2 -std=c++17 -arch=sm_90 -ftz=false -Werror=all-warnings $INC gpu/probes/sfu_probe.cu \
      -o "$BIN/sfu_probe" || return 1
}
build_cvt_probe() {
  "$NVCC" -O2 -std=c++17 -arch=sm_90 -fmad=false -ftz=false -prec-div=true -Werror=all-warnings \
      $INC gpu/probes/cvt_probe.cu -o "$BIN/cvt_probe"
}
if [ "${1:-}" = --build-only ]; then
  build && echo "gpu_run: build only: $BIN/mlaref and $BIN/bits_digest built"
  exit $?
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  if [ "${MLAREF_REQUIRE_GPU:-0}" = 1 ]; then
    echo "gpu_run: no NVIDIA GPU found and MLAREF_REQUIRE_GPU=1" >&2
    exit 1
  fi
  echo "gpu_run: skipped: no NVIDIA GPU on this machine (nvidia-smi -L failed);" \
    "set MLAREF_REQUIRE_GPU=1 to make this an error"
  exit 77
fi
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
status=0
DATA=${MLAREF_GPU_DATA:-.gpu-data}
ALL_STEPS="exact badinput sanitize bench fast fastbench python probe thirdparty bits torch peers mma sfu"
STEPS=" ${MLAREF_GPU_STEPS:-$ALL_STEPS} "
step() {
  case "$STEPS" in *" $1 "*) return 0 ;; esac
  echo "== $1: not asked for (MLAREF_GPU_STEPS)"
  return 1
}
{
  echo "== machine"; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$NVCC" --version | tail -1
  CLI=${MLAREF_GPU_CLI:-}
  if { step exact || step badinput || step sanitize || step bench || step fast || step fastbench ||
    step probe; } >/dev/null && [ -z "$CLI" ]; then
    echo "== exact kernel: build"
    cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DMLAREF_TESTS=OFF -DMLAREF_GPU=CUDA \
      -DMLAREF_GPU_ENFORCE=ON >/dev/null &&
      cmake --build build/gpu -j "$(nproc)" --target mlaref >/dev/null && CLI=build/gpu/mlaref ||
      { echo "exact kernel: build failed"; exit 1; }
  fi
  if step exact; then
    "$CLI" gpu info || status=1
    echo "== exact kernel: bit identity with fixtures/goldens/digests.tsv" \
      "(edge, test, bench; every built-in)"
    for s in edge test bench; do
      "$CLI" golden --verify --gpu --suite "$s" 2>&1 | grep -v "^golden: [0-9]" || status=1
    done
  fi
  if step badinput; then
    echo "== the bad-input table (docs/checking.md) with a GPU present" \
      "(its gpu cases: fault hooks, head and grid limits)"
    bash tests/bad_input.sh "$CLI" | tee "$OUT/bad_input.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if step sanitize; then
    echo "== exact kernel: compute-sanitizer memcheck and racecheck on the edge suite"
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool --error-exitcode 9 "$CLI" golden --verify --gpu --suite edge \
        > "$OUT/sanitizer_$tool.txt" 2>&1
      rc=$?
      grep -E "golden verify|SUMMARY" "$OUT/sanitizer_$tool.txt"
      echo "$tool: exit $rc"; [ $rc -eq 0 ] || status=1
    done
  fi
  if step bench; then
    echo "== exact kernel: benchmark"
    "$CLI" bench gpu-exact --reps "${MLAREF_GPU_REPS:-5}" | tee "$OUT/bench_gpu_exact.txt" ||
      status=1
  fi
  if step fast; then
    echo "== fast kernel: its hardware conversions against the generic encoders" \
      "(gpu/probes/cvt_probe.cu)"
    build_cvt_probe && "$BIN/cvt_probe" | tee "$OUT/cvt_probe.txt" || status=1
    echo "== fast kernel (gpu/fast): check --rule exact --rule budget --rule fa3 on every cell" \
      "of the edge, test and bench suites and the bf16-KV set"
    FD=${MLAREF_FAST_DATA:-/tmp/mlaref-fast}
    rm -rf "$FD" && mkdir -p "$FD"
    # bf16 KV beyond the edge suite's one cell: one and several splits, ragged and paged with
    # q_len 2, kv_len 0/1/33, and many splits
    mkdir -p "$FD/bf16" && k=0
    for spec in bs=4,kv=1024,fmt=bf16,seed=41 bs=32,kv=1024,fmt=bf16,seed=42 \
                lens=1:70:300:33:129,q=2,page=16,fmt=bf16,seed=43 bs=2,kv=8192,fmt=bf16,seed=44 \
                lens=0:1:33,fmt=bf16,seed=45; do
      k=$((k + 1))
      "$CLI" gen --shape "$spec" --out "$FD/bf16/bf16_$k.safetensors" >/dev/null ||
        { echo "gen $spec failed"; status=1; }
    done
    # more than 16 heads (a block a group of 16): 20 to 128 heads, ragged, paged, q_len 2 and 3,
    # bf16 and e4m3fnuz KV; heads_11 has 16 splits of 4 tiles, so that k_attn_rows copies into
    # its tile buffers again; pages of 96 and 256 rows put some half tiles within a page (copied by
    # the tensor memory accelerator) and some across two (by cp.async)
    mkdir -p "$FD/heads" && k=0
    for spec in bs=8,kv=2000,heads=128,page=64,seed=21 bs=4,kv=777,q=3,heads=128,seed=23 \
                bs=2,kv=4096,page=64,heads=128,q=2,seed=24 bs=3,kv=1500,heads=64,seed=26 \
                lens=0:1:33:300,heads=20,page=16,seed=27 bs=16,kv=1024,heads=128,seed=28 \
                bs=2,kv=3000,heads=128,fmt=bf16,seed=29 \
                lens=1:70:300,q=2,heads=48,page=16,fmt=bf16,seed=30 \
                bs=4,kv=1000,heads=128,fmt=e4m3fnuz,seed=31 bs=1,kv=8192,heads=128,seed=32 \
                bs=4,kv=8192,heads=128,page=32,seed=42 bs=3,kv=2500,heads=128,page=96,seed=34 \
                bs=2,kv=5000,heads=64,q=2,page=256,seed=35; do
      k=$((k + 1))
      "$CLI" gen --shape "$spec" --out "$FD/heads/heads_$k$(case $spec in *bf16*) echo _bf16;;
        *fnuz*) echo _fnuz;; esac).safetensors" >/dev/null || { echo "gen $spec failed"; status=1; }
    done
    { nok=0; nfail=0
    for s in edge test bench bf16 heads; do
      [ "$s" = bf16 ] || [ "$s" = heads ] ||
        { mkdir -p "$FD/$s" && "$CLI" gen --suite "$s" --out "$FD/$s" >/dev/null || status=1; }
      for f in "$FD/$s"/*.safetensors; do
        c=$(basename "$f" .safetensors)
        # the recipes for the cell's KV format (the wgmma one multiplies OCP e4m3 codes only)
        case "$s/$c" in
          bf16/* | */*bf16*) rs="fast-a16w16 fast-a8w16" ;;
          */*fnuz*) rs="fast-a16w8 fast-a8w8" ;;
          *) rs="fast-a16w8 fast-a8w8 fast-wgmma-a8w8 fast-wgmma-fp8" ;;
        esac
        # the edge, bf16 and heads cells also with each variant the plan would not take, forced by
        # --variant: k_attn_ws (the plan takes it for long splits only; for fast-wgmma-a8w8
        # always, so "ws" forces k_attn there), k_merge (the plan merges 2..8 splits in the
        # cluster where they fit),
        # the fallbacks (the token table read where tok_uniform fits, static e4m3 Q divided by
        # k_qprep where the reciprocal fits) and k_attn_ws's contiguous copies at every split length
        # (the plan takes them for unpaged splits only, by length): copy_lin (lin=1, the wgmma
        # kernel's) and lin_copy (lin=2, with k_attn_ws forced); and the wgmma recipe's blocks of
        # 64 rows (k_attn_rows: the plan's at 64 or 128 heads with splits of 2 tiles or more), its
        # half tiles copied by the tensor memory accelerator where they can be and (rowscp) by
        # cp.async only; fast-wgmma-fp8 runs on k_attn_rows alone (its table and cp.async variants)
        vs=auto; case $s in edge | bf16 | heads) vs="auto ws merge table lin lin2 rows rowscp" ;; esac
        for v in $vs; do for r in $rs; do
          case $r/$v in
            fast-wgmma-fp8/auto | fast-wgmma-fp8/table | fast-wgmma-fp8/rowscp) ;;
            fast-wgmma-fp8/*) continue ;;
            */lin | */rows*) [ $r != fast-wgmma-a8w8 ] && continue ;;
          esac
          o="$FD/out.$s.$c.$r.safetensors"; lab="$s/$c $r"; fv=
          case $v in
            ws) fv=ws=1; lab="$lab (k_attn_ws)"
                [ $r = fast-wgmma-a8w8 ] && { fv=ws=0; lab="$s/$c $r (k_attn)"; } ;;
            merge) fv=cluster=0; lab="$lab (k_merge)" ;;
            table) fv=toktable=1,qdiv=1; lab="$lab (table, k_qprep)" ;;
            lin) fv=lin=1; lab="$lab (copy_lin)" ;;
            lin2) fv=ws=1,lin=2; lab="$lab (k_attn_ws, lin_copy)" ;;
            rows) fv=rows=1; lab="$lab (k_attn_rows)" ;;
            rowscp) fv=rows=1,tma=0; lab="$lab (k_attn_rows, cp.async)" ;;
          esac
          "$CLI" gpu run --kernel fast ${fv:+--variant "$fv"} --recipe $r --inputs "$f" --out "$o" \
            > "$FD/run.log" 2>&1
          rc=$?
          if [ $rc -ne 0 ]; then
            nfail=$((nfail + 1)); status=1; echo "$lab: FAIL: $(tail -1 "$FD/run.log")"; continue
          fi
          "$CLI" check --inputs "$f" --output "$o" --recipe $r --rule exact --rule budget \
            --rule fa3 > "$FD/check.log" 2>&1
          rc=$?
          # the lse too: the model's file (mlaref run) against the kernel's, bit for bit
          "$CLI" run --recipe $r --inputs "$f" --out "$FD/model.safetensors" > /dev/null 2>&1 &&
            "$CLI" compare "$o" "$FD/model.safetensors" --tensor lse --rule exact \
              >> "$FD/check.log" 2>&1 || rc=1
          vv=$(grep -E "^rule|bit-identical" "$FD/check.log" | sed -E 's/ +/ /g' | tr '\n' ';')
          if [ $rc -eq 0 ]; then
            nok=$((nok + 1))
          else
            nfail=$((nfail + 1)); status=1; cat "$FD/check.log"
          fi
          echo "$lab: exit $rc: $vv"
        done; done
      done
    done
    echo "fast kernel checks: $nok passed, $nfail failed"; } | tee "$OUT/fast_check.txt"
    grep -q ": exit [^0]\|FAIL" "$OUT/fast_check.txt" && status=1
    echo "== fast kernel: compute-sanitizer memcheck and racecheck on the edge suite"
    # sanitize TOOL RECIPE VARIANT CELL: gpu run under compute-sanitizer, the dynamic Q scale
    sanitize() {
      compute-sanitizer --tool "$1" --error-exitcode 9 "$CLI" gpu run --kernel fast --variant "$3" \
        --recipe "$2" --set q.scale=dynamic --inputs "$FD/$4.safetensors" \
        --out "$FD/san.safetensors" > "$FD/san.log" 2>&1
      rc=$?
      echo "$1 $4 ($2, $3): exit $rc $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$FD/san.log")"
      [ $rc -eq 0 ] || { status=1; tail -20 "$FD/san.log"; }
    }
    { for tool in memcheck racecheck; do for v in ws=0 ws=1 cluster=0 ws=1,lin=2; do
      for c in edge/bs1_kv0 edge/bs2_kv33 edge/q4_kv100 edge/ragged edge/page16 edge/fnuz_page16 \
               bf16/bf16_3; do
        r=fast-a8w8; case $c in bf16/*) r=fast-a8w16 ;; esac
        sanitize $tool $r $v $c
      done
    done; done
    # the wgmma recipes' kernels (k_attn_ws_wg, k_attn_wg, k_attn_rows; fast-wgmma-fp8's
    # k_attn_rows<p8>): the OCP edge cells with splits, paging and ragged batches
    for tool in memcheck racecheck; do
      for v in ws=1 ws=0 cluster=0 lin=1 lin=2 rows=1 rows=1,tma=0; do
      for c in edge/bs1_kv0 edge/bs2_kv33 edge/q4_kv100 edge/ragged edge/page16; do
        sanitize $tool fast-wgmma-a8w8 $v $c
      done
    done
    for v in rows=1 rows=1,tma=0; do
      for c in edge/bs1_kv0 edge/bs2_kv33 edge/q4_kv100 edge/ragged edge/page16; do
        sanitize $tool fast-wgmma-fp8 $v $c
      done
    done; done
    # k_attn_rows reusing its tile buffers: memcheck only, as racecheck reports the reuse whatever
    # the barrier (docs/gpu.md, Known reports); heads_1 with whole pages for the tensor map
    for c in heads/heads_11 heads/heads_1; do for v in rows=1 rows=1,tma=0; do
      sanitize memcheck fast-wgmma-a8w8 $v $c
    done; done; } | tee "$OUT/fast_sanitize.txt"
    grep -q "exit [^0]" "$OUT/fast_sanitize.txt" && status=1
  fi
  if step fastbench; then
    echo "== fast kernel: benchmark, the seeds' Triton kernels beside it (.peers/seed_peers.py)"
    if [ -f .peers/seed_peers.py ]; then
      (cd .peers && OUT="$OUT" python3 seed_peers.py > "$OUT/peers.log" 2>&1) ||
        { echo "seed_peers.py failed:"; tail -5 "$OUT/peers.log"; }
    else echo "no .peers/seed_peers.py (copy ../shared/peers/): no side-by-side column"; fi
    P=; [ -f "$OUT/peers.json" ] && P="--peers $OUT/peers.json"
    # other people's kernels timed the same way (scripts/gpu/third_party_bench.py): FlashMLA's
    # extensions built into (or taken from) ${MLAREF_TP_BUILD:-/tmp/mlaref-tp/build}
    if [ -d .peers/third_party ]; then
      TPB=${MLAREF_TP_BUILD:-/tmp/mlaref-tp/build}
      mkdir -p "$TPB" /tmp/mlaref-tp/bench &&
        "$CLI" gen --suite bench --out /tmp/mlaref-tp/bench >/dev/null &&
        python3 scripts/gpu/third_party_bench.py .peers/third_party "$TPB" \
          "$OUT/third_party_bench.json" /tmp/mlaref-tp/bench/*.safetensors \
          > "$OUT/third_party_bench.log" 2>&1 &&
        P="$P --peers $OUT/third_party_bench.json" ||
        { echo "third_party_bench.py failed:"; tail -5 "$OUT/third_party_bench.log"; }
    fi
    "$CLI" bench gpu $P --reps "${MLAREF_FAST_REPS:-200}" | tee "$OUT/bench_gpu.txt" || status=1
    # the largest shape under sustained load (3 s of launches first: the board then runs at its
    # power limit, and the clock drops)
    "$CLI" bench gpu --shape bs=256,kv=8192,seed=9826 --warmup 3000 \
      --reps "${MLAREF_FAST_REPS:-200}" | tee "$OUT/bench_gpu_sustained.txt" || status=1
    # the plan floor's other paths: a ragged paged batch in clusters (a token of one split among
    # merging ones), and k_merge forced (its skeleton's second kernel)
    { "$CLI" bench gpu --shape lens=1:64:65:300,page=64,seed=10 \
        --shape bs=3,kv=1000,page=16,seed=9 --reps 100 &&
      "$CLI" bench gpu --variant cluster=0 --shape bs=4,kv=1024,seed=4217 \
        --shape bs=64,kv=1024,seed=1357 --reps 100; } | tee "$OUT/bench_gpu_plans.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if step python; then
    echo "== the Python package on this machine's torch: float8 dtypes on CUDA" \
      "(scripts/gpu/python_float8_check.py), then tests/python"
    PY=${MLAREF_PYTHON:-build/default/python}
    PYTHONPATH="$PY" python3 scripts/gpu/python_float8_check.py | tee "$OUT/python_float8.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    if python3 -c "import pytest" 2>/dev/null; then
      PYTHONPATH="$PY" MLAREF_BIN="$CLI" python3 -m pytest -q -p no:cacheprovider tests/python ||
        status=1
    else
      echo "tests/python: not run, this python has no pytest"
    fi
  fi
  if step probe; then
    echo "== the probe suite on the GPU kernels (scripts/gpu/probe_check.sh)"
    FCLI=${MLAREF_GPU_FAULTS_CLI:-}
    if [ -z "$FCLI" ]; then
      cmake -S . -B build/gpu-faults -DCMAKE_BUILD_TYPE=Release -DMLAREF_TESTS=OFF \
        -DMLAREF_GPU=CUDA -DMLAREF_GPU_ENFORCE=ON -DMLAREF_GPU_FAULTS=ON >/dev/null &&
        cmake --build build/gpu-faults -j "$(nproc)" --target mlaref >/dev/null &&
        FCLI=build/gpu-faults/mlaref || { echo "probe: the planted-faults build failed"; status=1; }
    fi
    if [ -n "$FCLI" ]; then
      bash scripts/gpu/probe_check.sh "$CLI" "$FCLI" "${MLAREF_PROBE_DATA:-/tmp/mlaref-probe}" |
        tee "$OUT/probe.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    fi
  fi
  if step thirdparty; then
    echo "== other people's kernels against their recipes (scripts/gpu/third_party.sh)"
    if [ -d .peers/third_party ]; then
      bash scripts/gpu/third_party.sh "$CLI" .peers "${MLAREF_TP_DATA:-/tmp/mlaref-third-party}" |
        tee "$OUT/third_party.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    else
      echo "thirdparty: skipped: no .peers/third_party (copy the peers' folder there)"
    fi
  fi
  step bits || step torch || step peers || step mma || step sfu ||
    { echo "== status $status"; exit $status; }
  echo "== build"
  build || exit 1
  step bits && {
  echo "== bit identity (GPU vs tests/data/bits_digests.txt, GPU vs CPU on all 2^32)"
  "$BIN/bits_digest" > "$OUT/digests_gpu.txt" 2> "$OUT/digests_full.txt"; rc=$?
  cat "$OUT/digests_full.txt"
  if diff "$OUT/digests_gpu.txt" tests/data/bits_digests.txt; then
    echo "stride-7 digests: GPU = committed CPU digests"
  else
    echo "stride-7 digests DIFFER from tests/data/bits_digests.txt"; status=1
  fi
  [ $rc -eq 0 ] && echo "all-2^32 digests: GPU = CPU" ||
    { echo "all-2^32 digests DIFFER"; status=1; }
  }
  step torch && {
  echo "== PyTorch conversions (all 2^32 inputs on cuda, every 16th on cpu)"
  python3 scripts/gpu/torch_formats_check.py "$BIN/mlaref" || status=1
  echo "== mlaref files in PyTorch and numpy; the task's quantize_fp8 on CUDA" \
    "(inputs from \$MLAREF_GPU_DATA)"
  # the full CLI needs jansson: built by CMake
  if [ ! -d "$DATA" ] && [ -x build/default/mlaref ]; then
    mkdir -p "$DATA"
    for spec in bs=4,kv=1024,seed=4217,bf16kv=1 bs=2,kv=500,fmt=e4m3fnuz,seed=11,bf16kv=1 \
                lens=5:1:1000,q=2,seed=8,bf16kv=1 lens=1:64:65:300,page=64,seed=10; do
      build/default/mlaref gen --shape "$spec" \
        --out "$DATA/$(echo "$spec" | tr ',=:' '_-.').safetensors" || status=1
    done
  fi
  python3 scripts/gpu/torch_fixtures_check.py "$DATA" || status=1  # fails when $DATA holds no files
  python3 scripts/gpu/make_torch_testdata.py "$OUT/torch_written.safetensors" || status=1
  }
  step peers && {
  echo "== the seeds' Triton kernels on mlaref inputs (\$MLAREF_GPU_DATA/emu)," \
    "outputs for scripts/peer_compare.sh"
  if [ -f .peers/seed_triton_kernels.py ] && ls "$DATA"/emu/*.safetensors >/dev/null 2>&1; then
    python3 scripts/gpu/seed_triton_outputs.py "$OUT/peer" "$DATA"/emu/*.safetensors || status=1
    tar czf "$OUT/peer.tgz" -C "$OUT" peer && rm -rf "$OUT/peer"
  else
    echo "skipped: needs .peers/seed_triton_kernels.py (copy ../shared/peers/)" \
      "and inputs in $DATA/emu (mlaref gen)"
  fi
  }
  step mma && {
  echo "== matrix units: mma.sync against ref/mma (gpu/probes/mma_probe.cu)"
  "$BIN/mma_probe" --out "$OUT/mma" || status=1
  echo "== matrix units: wgmma against ref/mma (gpu/probes/wgmma_probe.cu)"
  "$BIN/wgmma_probe" --out "$OUT/wgmma" || status=1
  }
  step sfu && {
  echo "== the hardware exp2: the tables against ref/sfu's, the model on every float" \
    "(gpu/probes/ex2_table.cu)"
  "$BIN/ex2_table" "$OUT/ex2_diff.bin" "$OUT/ex2p_diff.bin" "$OUT/ex2_samples.txt" || status=1
  # rcp_diff.bin, the log2's lg2_head.bin and lg2_diff.bin, and the samples
  "$BIN/sfu_probe" "$OUT" || status=1
  # ref/sfu's log2 file: the head's first 2^18 values whole, then the steps from there on
  { head -c 1048576 "$OUT/lg2_head.bin" && tail -c +262145 "$OUT/lg2_diff.bin"; } \
    > "$OUT/lg2_diff.bin.tmp" && mv "$OUT/lg2_diff.bin.tmp" "$OUT/lg2_diff.bin" &&
    rm -f "$OUT/lg2_head.bin"
  for t in ex2:1 ex2p:2 rcp:3 lg2:4; do # README.md names the SHA-256s in this order
    want=$(grep -o "uncompressed bytes: [0-9a-f]*" ref/sfu/README.md | sed -n "${t#*:}p" |
      cut -d' ' -f3)
    got=$(sha256sum "$OUT/${t%:*}_diff.bin" | cut -d' ' -f1); rm -f "$OUT/${t%:*}_diff.bin"
    if [ "$got" = "$want" ]; then
      echo "${t%:*} table: the same as ref/sfu's (SHA-256 $got)"
    else
      echo "${t%:*} table DIFFERS from ref/sfu's: $got, not $want"; status=1
    fi
  done
  }
  echo "== status $status"
  exit $status
} 2>&1 | tee "$OUT/gpu_run.log"
exit ${PIPESTATUS[0]}
