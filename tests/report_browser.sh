#!/usr/bin/env bash
# The report's page in a real browser: Debian's chromium, headless, loads
# index.html of a quick report with no console message, and its screenshot shows the plots:
# the decoded PNG has thousands of coloured pixels (the heatmap and the curves; the text and
# tables are black, white and grey). A probe page that logs console.error must be caught first,
# or the console check would prove nothing.
#   tests/report_browser.sh MLAREF
# Exit 0 pass; 1 a console message or no plot in the screenshot; 2 setup (no chromium:
# scripts/setup.sh installs it).
set -uo pipefail
M=${1:?usage: tests/report_browser.sh MLAREF}
B=$(command -v chromium || command -v chromium-browser) ||
  { echo "report_browser: no chromium (scripts/setup.sh installs it)"; exit 2; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
shot() { # page png log
  timeout 120 "$B" --headless --disable-gpu --no-sandbox --hide-scrollbars --window-size=1200,1800 \
    --enable-logging=stderr --v=0 \
    --user-data-dir="$D/profile" --screenshot="$2" "file://$1" >"$3" 2>&1
}
printf '<html><body><p>probe</p><script>console.error("probe")</script></body></html>' \
  > "$D/probe.html"
shot "$D/probe.html" "$D/probe.png" "$D/probe.log"
grep -q 'CONSOLE.*"probe"' "$D/probe.log" || {
  echo "report_browser: the probe's console.error was not seen:" \
    "the console check would prove nothing"
  exit 2
}
mkdir -p "$D/rep"
"$M" report --suite edge --quick --recipe fp32-seq --recipe aiter-a8w8-ps --out "$D/rep" \
  >/dev/null || { echo "report_browser: mlaref report failed"; exit 2; }
shot "$D/rep/index.html" "$D/shot.png" "$D/shot.log" ||
  { echo "report_browser: chromium failed on the page"; tail -5 "$D/shot.log"; exit 1; }
if grep -q 'CONSOLE' "$D/shot.log"; then
  echo "report_browser: console messages:"; grep 'CONSOLE' "$D/shot.log"; exit 1
fi
python3 - "$D/shot.png" <<'PY'
import struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
at, idat, w = 8, b'', 0
while at < len(b):
    n, t = struct.unpack('>I4s', b[at:at + 8]); d = b[at + 8:at + 8 + n]; at += 12 + n
    if t == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', d[:10])
    if t == b'IDAT': idat += d
assert depth == 8 and ctype in (2, 6), \
    'expected 8-bit RGB(A), got depth %d type %d' % (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride, prev, coloured = zlib.decompress(idat), w * bpp, bytearray(w * bpp), 0
for y in range(h):
    f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):  # PNG's row filters: none, sub, up, average, Paeth
        a = row[i - bpp] if i >= bpp else 0; u = prev[i]; c = prev[i - bpp] if i >= bpp else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 2: row[i] = (row[i] + u) & 255
        elif f == 3: row[i] = (row[i] + (a + u) // 2) & 255
        elif f == 4:
            p = a + u - c; pa, pb, pc = abs(p - a), abs(p - u), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else u if pb <= pc else c)) & 255
    coloured += sum(1 for i in range(0, stride, bpp) if max(row[i:i + 3]) - min(row[i:i + 3]) > 60)
    prev = row
print('report_browser: screenshot %dx%d, %d coloured pixels' % (w, h, coloured))
sys.exit(0 if coloured > 5000 else 1)
PY
rc=$?
[ $rc -eq 0 ] && echo "report_browser: chromium loads the page with no console message;" \
  "the screenshot shows the plots"
exit $rc
