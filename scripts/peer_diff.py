#!/usr/bin/env python3
# How close two .safetensors outputs are, tensor by tensor, in the tensors' own encodings:
# count of bit-identical elements, the ulp distance histogram (ordered-integer distance between
# the encodings), max |a - b|. Standard library only (runs anywhere; the compare/ module of
# mlaref is the product's tool, this script reports the peer comparisons of docs/numerics.md).
#   python3 scripts/peer_diff.py A.safetensors B.safetensors [TENSOR...]
import json, math, struct, sys

FMT = {"BF16": ("H", 2), "F32": ("I", 4), "F16": ("H", 2)}


def load(path):
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(n))
        data = fh.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        code, size = FMT.get(v["dtype"], (None, None))
        if code is None:
            continue
        out[k] = (v["dtype"], v["shape"], struct.unpack("<%d%s" % ((b - a) // size, code), data[a:b]))
    return out


def value(dt, c):
    if dt == "BF16":
        return struct.unpack("<f", struct.pack("<I", c << 16))[0]
    if dt == "F16":
        return struct.unpack("<e", struct.pack("<H", c))[0]
    return struct.unpack("<f", struct.pack("<I", c))[0]


def ordered(dt, c):  # monotone integer of the encoding: ulp distance = difference
    bits = 16 if dt in ("BF16", "F16") else 32
    sign = 1 << (bits - 1)
    return -(c & (sign - 1)) if c & sign else c


def isnan(dt, c):
    return value(dt, c) != value(dt, c)


def diff(a, b, names):
    for name in names:
        dt, shape, x = a[name]
        dt2, shape2, y = b[name]
        if dt != dt2 or shape != shape2:
            print(f"{name}: dtype/shape differ: {dt}{shape} vs {dt2}{shape2}")
            continue
        same = 0
        hist = {}
        maxabs = 0.0
        pairs = 0
        worst = (0, 0)
        for i, (u, v) in enumerate(zip(x, y)):
            if isnan(dt, u) or isnan(dt, v):
                same += isnan(dt, u) and isnan(dt, v)
                continue
            pairs += 1
            d = abs(ordered(dt, u) - ordered(dt, v))
            if d == 0:
                same += 1
            key = d if d <= 4 else (8 if d <= 8 else (64 if d <= 64 else 1 << 30))
            hist[key] = hist.get(key, 0) + 1
            fa, fb = value(dt, u), value(dt, v)
            if not (math.isinf(fa) or math.isinf(fb)):
                if abs(fa - fb) > maxabs:
                    maxabs = abs(fa - fb)
            if d > worst[0]:
                worst = (d, i)
        labels = {0: "0", 1: "1", 2: "2", 3: "3", 4: "4", 8: "5-8", 64: "9-64", 1 << 30: ">64"}
        h = " ".join(f"{labels[k]}:{hist[k]}" for k in sorted(hist))
        print(f"{name} {dt}{shape}: {same}/{len(x)} bit-identical ({100.0 * same / len(x):.2f}%), max ulp {worst[0]} "
              f"(element {worst[1]}), max abs {maxabs:.3g}; ulp histogram {h}")


if __name__ == "__main__":
    A, B = load(sys.argv[1]), load(sys.argv[2])
    names = sys.argv[3:] or [k for k in A if k in B]
    diff(A, B, names)
