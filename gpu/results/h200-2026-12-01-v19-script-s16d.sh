#!/usr/bin/env bash
# session 16: where the no_instruction stalls fall in k_attn_ws_wg (fast-wgmma-a8w8) at bs=4, kv=8192 and bs=4, kv=1024 (ncu source counters, SASS)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin
D=/tmp/q; mkdir -p $D
NCU=/usr/local/cuda/bin/ncu
for sh in bs=4,kv=8192,seed=4220 bs=4,kv=1024,seed=4217 bs=32,kv=8192,seed=5415; do
.gpu-bin/mlaref gen --shape $sh --out $D/in.safetensors >/dev/null
$NCU --kernel-name regex:k_attn --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
  .gpu-bin/mlaref gpu run --kernel fast --recipe fast-wgmma-a8w8 --inputs $D/in.safetensors --out $D/o.safetensors > $OUT/src_$sh.csv 2>/dev/null
echo "=== $sh"
python3 - "$OUT/src_$sh.csv" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = None
for i, r in enumerate(rows):
    if 'Source' in r and 'Address' in r: hdr = i; break
if hdr is None: print("no header", rows[:3]); sys.exit()
h = rows[hdr]; data = rows[hdr+1:]
print([c for c in h if 'Sampl' in c or 'Stall' in c][:40])
si = h.index('Source'); ai = h.index('Address')
def col(name):
    c = [k for k in h if name in k]
    return h.index(c[0]) if c else None
tot = col('Warp Stall Sampling (All Samples)')
noi = col('stall_no_instruction') or col('No Instruction')
ex = col('Instructions Executed')
print("cols", tot, noi, ex, h[tot] if tot is not None else None, h[noi] if noi is not None else None)
B = 2048
bk = collections.defaultdict(lambda: [0.0, 0.0, 0.0, collections.Counter()])
T = [0.0, 0.0]
for r in data:
    try: a = int(r[ai], 16)
    except: continue
    def f(i):
        try: return float(r[i] or 0)
        except: return 0.0
    b = bk[a // B]; t = f(tot) if tot is not None else 0; n = f(noi) if noi is not None else 0
    b[0] += t; b[1] += n; b[2] += f(ex) if ex is not None else 0
    op = r[si].strip().split(' ')
    op = op[1] if op[0].startswith('@') and len(op) > 1 else op[0]
    b[3][op.split('.')[0]] += 1
    T[0] += t; T[1] += n
print("total samples %.0f, no_instruction %.0f (%.1f%%)" % (T[0], T[1], 100 * T[1] / max(T[0], 1)))
for k in sorted(bk):
    b = bk[k]
    if b[0] < 0.002 * T[0]: continue
    print("%6x %7.0f %7.0f %9.0f  %s" % (k * B, b[0], b[1], b[2], " ".join("%s:%d" % x for x in b[3].most_common(5))))
PY
done
