#!/usr/bin/env bash
# The bad-input table of docs/checking.md, row by row: every row (its id in the first column)
# has at least one case in tests/bad_input.tsv, every case names a row that exists, and each case
# gives the documented exit code and message. For exit 2: nothing on stdout, one line on stderr
# starting "mlaref ", containing the expected text; nothing written to a path named never*.
# Cases marked gpu run only where `mlaref gpu info` finds a GPU (scripts/gpu_run.sh runs this
# script there); cases marked nogpu only where it does not.
#   usage: tests/bad_input.sh MLAREF [TABLE_MD] [CASES]
set -u
M=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
README=${2:-$here/../docs/checking.md}
CASES=${3:-$here/bad_input.tsv}
D=$(mktemp -d "${TMPDIR:-/tmp}/mlr_bad_input.XXXXXX")
trap 'rm -rf "$D"' EXIT
export M D
fail=0
say() { echo "bad_input: $*"; }
# fixture CMD...: runs mlaref to make a file the cases read; on failure says which and why, exit 1
fixture() {
  "$M" "$@" >/dev/null 2>"$D/fixture.err" ||
    { say "cannot make a fixture: mlaref $*: $(tail -1 "$D/fixture.err")"; exit 1; }
}

# --- the rows of the table and the cases: each covers the other ---
rows=$(awk '/^### Bad input/{f=1;next} /^## /{f=0} f && /^\| `[a-z0-9-]+` \|/' "$README" |
  sed -E 's/^\| `([a-z0-9-]+)` \|.*/\1/')
[ -n "$rows" ] || { say "no rows found in $README's Bad input table"; exit 1; }
ids=$(grep -v '^#' "$CASES" | grep -v '^$' | cut -f1 | sort -u)
for r in $rows; do
  grep -qx "$r" <<<"$ids" || { say "table row '$r' has no case in $CASES"; fail=1; }
done
for i in $ids; do
  grep -qx "$i" <<<"$rows" || { say "case id '$i' is not a row of the table"; fail=1; }
done
dups=$(sort <<<"$rows" | uniq -d)
[ -z "$dups" ] || { say "table rows named twice: $dups"; fail=1; }

# --- fixtures the cases read ---
fixture gen --shape bs=1,kv=40,seed=3 --out "$D/in.safetensors"
fixture gen --shape bs=1,kv=40,seed=3,fmt=bf16 --out "$D/bf16.safetensors"
fixture gen --shape bs=1,kv=40,seed=3,fmt=e4m3fnuz --out "$D/fnuz.safetensors"
fixture gen --shape bs=2,kv=40,seed=3,page=16 --out "$D/paged.safetensors"
fixture gen --shape bs=1,kv=40,seed=3,bf16kv=1 --out "$D/with_bf16.safetensors"
fixture run --recipe fp32-seq --inputs "$D/in.safetensors" --out "$D/out.safetensors"
mkdir -p "$D/u" "$D/p"
fixture inputs unpack "$D/in.safetensors" --dir "$D/u"
fixture inputs unpack "$D/paged.safetensors" --dir "$D/p"
# a kernel output as .npy files (o.npy, lse.npy, ...): the folder is made by unpack
fixture inputs unpack "$D/out.safetensors" --dir "$D/onpy"
python3 - "$D" <<'EOF' || exit 1
import json, struct, sys
D = sys.argv[1]
def npy_read(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<H', b[8:10])[0]
    return eval(b[10:10 + n].decode('latin1')), b[10 + n:]
def npy_write(p, descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    h += ' ' * (63 - (10 + len(h)) % 64) + '\n'
    open(p, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode('latin1')
                        + data)
# 32 heads: each token's 16 heads twice
h, q = npy_read(D + '/u/q.npy')
T, H, C = h['shape']
row = H * C * 2
npy_write(D + '/u/q32.npy', '<u2', (T, 2 * H, C),
          b''.join(q[t * row:(t + 1) * row] * 2 for t in range(T)))
# a page index past the pages of kv
h, idx = npy_read(D + '/p/kv_indices.npy')
npy_write(D + '/p/bad_indices.npy', '<i4', h['shape'], struct.pack('<i', 999) + idx[4:])
# an output folder whose lse is [1, 16, 2]: no layout of these inputs' lse (T = 1, H = 16)
import os, shutil
os.makedirs(D + '/lse3d')
shutil.copy(D + '/onpy/o.npy', D + '/lse3d/o.npy')
npy_write(D + '/lse3d/lse.npy', '<f4', (1, 16, 2), struct.pack('<32f', *([1.0] * 32)))
# float32 data where BF16 codes are expected
npy_write(D + '/f4.npy', '<f4', (2,), struct.pack('<2f', 1.0, 2.0))
# safetensors damage: truncated, and a header that says more than the file has
b = open(D + '/in.safetensors', 'rb').read()
open(D + '/truncated.safetensors', 'wb').write(b[:len(b) // 2])
open(D + '/longheader.safetensors', 'wb').write(struct.pack('<Q', 1 << 20) + b[8:200])
open(D + '/foreign.json', 'w').write(json.dumps({"schema": "something/else"}))
# the optional scalars out of range; fp8 Q codes; the paged inputs (2 batches of 40 tokens, 6 pages
# of 16) as a block table [2, 4], with an entry past the cache, or seq_lens past its columns; the
# cache as [6, 16, 576]
npy_write(D + '/neg.npy', '<f8', (1,), struct.pack('<d', -0.5))
npy_write(D + '/zero.npy', '<f4', (1,), struct.pack('<f', 0.0))
npy_write(D + '/two.npy', '<i4', (1,), struct.pack('<i', 2))
npy_write(D + '/q8.npy', '|u1', (1, 16, 576), bytes(16 * 576))
npy_write(D + '/bt_bad.npy', '<i4', (2, 4), struct.pack('<8i', 0, 1, 99, -1, 3, 4, 5, -1))
npy_write(D + '/bt.npy', '<i4', (2, 4), struct.pack('<8i', 0, 1, 2, -1, 3, 4, 5, -1))
npy_write(D + '/sl.npy', '<i8', (2,), struct.pack('<2q', 40, 40))
npy_write(D + '/sl_long.npy', '<i8', (2,), struct.pack('<2q', 40, 65))
h, kv = npy_read(D + '/p/kv.npy')
npy_write(D + '/kv3.npy', '|u1', (6, 16, 576), kv)
EOF
pack() { # pack OUT NAME=F.npy:DTYPE...: a fixture made by inputs pack
  local out=$1
  shift
  "$M" inputs pack --out "$D/$out" "$@" >/dev/null 2>"$D/fixture.err" ||
    { say "cannot make $out: $(tail -1 "$D/fixture.err")"; exit 1; }
}
one="q=$D/u/q.npy:bf16 kv=$D/u/kv.npy:e4m3 kv_scale=$D/u/kv_scale.npy:f32"
one="$one qo_indptr=$D/u/qo_indptr.npy:i32 kv_indptr=$D/u/kv_indptr.npy:i32"
pack smneg.safetensors $one sm_scale="$D/neg.npy:f64"
pack kzero.safetensors $one k_scale="$D/zero.npy:f32"
pack causal2.safetensors $one causal="$D/two.npy:i32"
pack q8.safetensors q="$D/q8.npy:e4m3" kv="$D/u/kv.npy:e4m3" kv_scale="$D/u/kv_scale.npy:f32" \
  kv_indptr="$D/u/kv_indptr.npy:i32"
two="q=$D/p/q.npy:bf16 kv_scale=$D/p/kv_scale.npy:f32 qo_indptr=$D/p/qo_indptr.npy:i32"
pack btbad.safetensors $two kv="$D/kv3.npy:e4m3" block_table="$D/bt_bad.npy:i32" \
  seq_lens="$D/sl.npy:i64"
pack sllong.safetensors $two kv="$D/kv3.npy:e4m3" block_table="$D/bt.npy:i32" \
  seq_lens="$D/sl_long.npy:i64"
pack page8.safetensors $two kv="$D/kv3.npy:e4m3" block_table="$D/bt.npy:i32" \
  seq_lens="$D/sl.npy:i64" --meta mlaref.page_size=8
"$M" inputs pack --out "$D/h32.safetensors" q="$D/u/q32.npy:bf16" kv="$D/u/kv.npy:e4m3" \
  kv_scale="$D/u/kv_scale.npy:f32" qo_indptr="$D/u/qo_indptr.npy:i32" \
  kv_indptr="$D/u/kv_indptr.npy:i32" >/dev/null 2>&1 ||
  { say "cannot make the 32-head inputs"; exit 1; }
"$M" inputs pack --out "$D/badpages.safetensors" q="$D/p/q.npy:bf16" kv="$D/p/kv.npy:e4m3" \
  kv_scale="$D/p/kv_scale.npy:f32" qo_indptr="$D/p/qo_indptr.npy:i32" \
  kv_indptr="$D/p/kv_indptr.npy:i32" kv_indices="$D/p/bad_indices.npy:i32" \
  kv_last_page_len="$D/p/kv_last_page_len.npy:i32" >/dev/null 2>&1 ||
  { say "cannot make the bad page table"; exit 1; }
fixture run --recipe fp32-seq --inputs "$D/paged.safetensors" --out "$D/out2.safetensors"
fixture run --recipe aiter-a8w8-ps --inputs "$D/in.safetensors" --out "$D/wrong.safetensors"
fixture golden --suite edge --recipe fp32-seq --digests "$D/digests.tsv"
# one changed digest: the first data row's last hex digit
awk -F'\t' 'BEGIN{OFS="\t"}
  !/^#/ && !done {d=$NF; c=substr(d,64,1); $NF=substr(d,1,63) (c=="0"?"1":"0"); done=1}
  {print}' "$D/digests.tsv" >"$D/changed.tsv"

# report shards: 1/2 and 2/2 of one quick run, a 2/2 of another (other recipes' policy axis),
# a damaged one
# (shard 2 holds the cells: shard 1 the extras), a 2/2 of another build, a 2/2 whose recipe
# differs in its SHA-256
mkdir -p "$D/sh1" "$D/sh2other" "$D/shbad" "$D/sh2build" "$D/sh2sha"
fixture report --suite edge --quick --recipe fp32-seq --gpu off --shard 1/2 --out "$D/sh1"
fixture report --suite edge --quick --recipe fp32-seq --gpu off --shard 2/2 --out "$D/sh2sha"
fixture report --suite edge --quick --recipe fp32-seq --gpu off --policy dynamic --shard 2/2 \
  --out "$D/sh2other"
python3 -c "import json, sys; d = json.load(open(sys.argv[1] + '/sh2other/summary.json')); \
d['cells'][0]['utilisation']['max'] = 'high'; \
json.dump(d, open(sys.argv[1] + '/shbad/summary.json', 'w')); \
d = json.load(open(sys.argv[1] + '/sh2other/summary.json')); d['mlaref_commit'] = 'f00'; \
json.dump(d, open(sys.argv[1] + '/sh2build/summary.json', 'w')); \
d = json.load(open(sys.argv[1] + '/sh2sha/summary.json')); d['plan']['column_sha256'][0] = '0' * 64; \
json.dump(d, open(sys.argv[1] + '/sh2sha/summary.json', 'w'))" "$D" || exit 1

gpu=0
"$M" gpu info >/dev/null 2>&1 && gpu=1

# --- the cases ---
n=0 skipped=0
while IFS=$'\t' read -r id want text cmd; do
  case "$id" in ''|'#'*) continue ;; esac
  case "$want" in
    gpu:*) [ $gpu = 1 ] || { skipped=$((skipped + 1)); continue; }; want=${want#gpu:} ;;
    nogpu:*) [ $gpu = 0 ] || { skipped=$((skipped + 1)); continue; }; want=${want#nogpu:} ;;
  esac
  n=$((n + 1))
  (cd "$D" && eval "$cmd") >"$D/stdout" 2>"$D/stderr" </dev/null
  rc=$?
  err=$(cat "$D/stderr")
  if ls "$D"/never* >/dev/null 2>&1; then
    say "[$id] $cmd: wrote a file named never*"; fail=1; rm -f "$D"/never*
  fi
  if [ "$rc" != "$want" ]; then
    say "[$id] $cmd: exit $rc, want $want; stderr: $err"; fail=1; continue
  fi
  if [ "$want" = 2 ]; then
    [ -s "$D/stdout" ] &&
      { say "[$id] $cmd: printed on stdout: $(head -c 200 "$D/stdout")"; fail=1; }
    lines=$(wc -l <"$D/stderr")
    [ "$lines" = 1 ] || { say "[$id] $cmd: $lines lines on stderr, want 1: $err"; fail=1; }
    case "$err" in
      "mlaref "* | "mlaref: "*) ;;
      *) say "[$id] $cmd: stderr does not start with 'mlaref': $err"; fail=1 ;;
    esac
  fi
  grep -qF -- "$text" "$D/stdout" "$D/stderr" ||
    { say "[$id] $cmd: no '$text' in: $err $(head -c 400 "$D/stdout")"; fail=1; }
done <"$CASES"
nrows=$(wc -w <<<"$rows")
say "$n cases run ($skipped for the other GPU state), $nrows table rows covered, gpu=$gpu"
[ $n -gt 0 ] || fail=1
exit $fail
