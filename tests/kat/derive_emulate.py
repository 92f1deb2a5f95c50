#!/usr/bin/env python3
# An independent derivation of the emulator's expected bits on tiny inputs (tests/emulate.c).
#
# It re-implements the semantics written in ref/emulate/mlr_emulate.h, in Python, with exact
# rational arithmetic (fractions) and explicit rounding to each format, for the eight built-in
# recipes. It shares no code with the C model: if the two agree bit for bit, the C model does
# what its documentation says. exp/log come from Python's math (binary64) rounded to binary32,
# as the model rounds pmath's binary64 results.
#
# The inputs (the same formula is in tests/emulate.c): H = 16 heads, one query token, fp8 e4m3
# KV with kv_scale = 0.5, bf16 q with q[h][0] = 24, q[h][1] = h/8, q[h][575] = 2, other columns 0;
# KV row j: col 0 = K0[j%4], col 1 = K1[j%4], col 2 = 1, col 575 = R[j%4], others 0.
# The "mid" variant adds q[h][3] = 24, q[h][4] = 2^-40 and KV col 3 = K3[j%4], col 4 = 1 with
# K3 = 0, -40, 0, -20: logits 20 below the others (P near 2^-29) and Q rows spanning 2^-40 .. 24,
# so the exact dots leave binary64 for the 128-bit fixed point. The "wide" variant has
# q[h][4] = 2^-120 and K3 = 0, -40, 0, -160 (P near 2^-115): the long accumulator.
# Writes one line per case: recipe, sets, variant, L, then per head the bits of o[h][0..3], the
# largest code of o[h][4..511] and lse[h].
#   python3 tests/kat/derive_emulate.py > tests/data/emulate_kats.txt
import math
import struct
from fractions import Fraction as F

K0, K1, R = [0, 1, -0.5, 0.25], [0.5, -0.25, 1, 0], [0, 0.5, 0, -1]
K3 = {"mid": [0, -40, 0, -20], "wide": [0, -40, 0, -160]}
Q4 = {"mid": F(1, 2 ** 40), "wide": F(1, 2 ** 120)}
H, QK, DV = 16, 576, 512
KV_SCALE = F(1, 2)
INF = float("inf")


def rnd(v, t, emin, maxv=None, sat=False):
    """v (Fraction) rounded to nearest even with t fraction bits, min exponent emin."""
    if v == 0:
        return v
    s = -1 if v < 0 else 1
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if F(2) ** e > a:
        e -= 1
    e = max(e, emin)
    ulp = F(2) ** (e - t)
    q = a / ulp
    n = q.numerator // q.denominator
    r = q - n
    if r > F(1, 2) or (r == F(1, 2) and n % 2 == 1):
        n += 1
    out = n * ulp
    if maxv is not None and out > maxv:
        out = F(maxv) if sat else INF
    return s * out if out != INF else s * INF


def f32(v): return rnd(F(v), 23, -126)
def bf16(v): return rnd(F(v), 7, -126)
def fp16(v): return rnd(F(v), 10, -14)
def e4m3(v, sat=True): return rnd(F(v), 3, -6, 448, sat)
def e4m3fnuz(v, sat=True): return rnd(F(v), 3, -7, 240, sat)


def f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


def bf16_bits(v):
    b = f32_bits(v)
    assert b & 0xFFFF == 0
    return b >> 16


def add(a, b): return f32(a + b)
def sub(a, b): return f32(a - b) if a != -INF else -INF
def mul(a, b): return f32(a * b)
def div(a, b): return f32(F(a) / F(b))
def fma(a, b, c): return f32(F(a) * F(b) + F(c))
def fmax(a, b): return a if a >= b else b


def expf(base, x):
    if x == -INF:
        return F(0)
    if base == "2":
        return f32(F(2.0 ** float(x)))
    if base == "e_via_2":
        y = mul(x, F(struct.unpack("<f", struct.pack("<I", 0x3FB8AA3B))[0]))
        return f32(F(2.0 ** float(y)))
    return f32(F(math.exp(float(x))))


def logf(base, x):
    return f32(F(math.log2(float(x)))) if base == "2" else f32(F(math.log(float(x))))


OPND = {"fp32": lambda v: v, "fp16": fp16, "bf16": bf16, "fp8": lambda v: v}
PFMT = {"fp32": lambda v: v, "fp16": fp16, "bf16": bf16, "e4m3": e4m3, "e4m3fnuz": e4m3fnuz}

BASE = dict(q_format="bf16", q_scale="none", kv_scale_at="operand", qk_operand="fp32", qk_dot="seq",
            qk_result="fp32", logit_format="fp32", softmax_exp="e", softmax_block=32, clamp=1e-12,
            p_format="fp32", pv_operand="fp32", pv_dot="seq", pv_accumulate="block",
            update_fma=False, split_rule="none", split_count=1, split_cus=256, split_max=32,
            split_min_tokens=196,
            split_align=16, partial_normalized=True, lse_base="e", merge_rule="running_max")
BUILTINS = {
    "fp32-seq": {},
    "triton-fp8-single": dict(qk_operand="fp16", p_format="fp16", pv_operand="fp16",
                              softmax_exp="e_via_2", pv_accumulate="into_acc", update_fma=True),
    "triton-fp8-split": dict(qk_operand="fp16", p_format="fp16", pv_operand="fp16",
                             softmax_exp="e_via_2", pv_accumulate="into_acc", update_fma=True,
                             split_rule="fixed", split_count=8, split_align=32),
    "aiter-a8w8-ps": dict(q_format="e4m3", q_scale="dynamic", kv_scale_at="folded",
                          qk_operand="fp8", qk_dot="exact", softmax_block=0, p_format="e4m3",
                          pv_operand="fp8",
                          pv_dot="exact", split_rule="aiter_v1", merge_rule="aiter"),
    "aiter-a16w8-ps": dict(kv_scale_at="folded", qk_operand="bf16", qk_dot="exact",
                           softmax_block=0, p_format="bf16", pv_operand="bf16", pv_dot="exact",
                           split_rule="aiter_v1", merge_rule="aiter"),
    "aiter-bf16-np": dict(qk_operand="bf16", qk_dot="exact", softmax_block=0, p_format="bf16",
                          pv_operand="bf16", pv_dot="exact", split_rule="fixed", split_count=16,
                          merge_rule="running_max"),
    "torch-bmm-bf16": dict(qk_operand="bf16", qk_dot="exact", qk_result="bf16", logit_format="bf16",
                           softmax_block=0, p_format="bf16", pv_operand="bf16", pv_dot="exact"),
    "aiter-test-ref": dict(q_format="e4m3", q_scale="dynamic", kv_scale_at="folded",
                           softmax_block=0, p_format="e4m3"),
}


def inputs(L, wide):
    q = [[F(0)] * QK for _ in range(H)]
    for h in range(H):
        q[h][0], q[h][1], q[h][575] = F(24), F(h, 8), F(2)
        if wide:
            q[h][3], q[h][4] = F(24), Q4[wide]
    kv = []
    for j in range(L):
        row = [F(0)] * QK
        row[0], row[1], row[2], row[575] = F(K0[j % 4]), F(K1[j % 4]), F(1), F(R[j % 4])
        if wide:
            row[3], row[4] = F(K3[wide][j % 4]), F(1)
        kv.append([e4m3(x) for x in row])  # all exact in e4m3
    return q, kv


def quant_q(r, q):
    if r["q_format"] == "bf16":
        return q, [F(1)] * H
    amax = max(abs(x) for row in q for x in row)
    scale = bf16(amax * f32(F(1) / 448))  # mlr_task_scale: amax * fp32(1/448), rounded to bf16
    out = [[F(0)] * QK for _ in range(H)]
    for h in range(H):
        for i in range(QK):
            x = bf16(q[h][i] / scale)  # binary32 quotient rounded to bf16: double rounding is
            x = min(max(x, F(-448)), F(448))  # harmless for these values (checked: 24, 2 and h/8)
            out[h][i] = e4m3(x)
    return out, [scale] * H


def dot(model, a, b, init=None):
    if model == "exact":
        return f32(sum((x * y for x, y in zip(a, b)), F(0)) + (init or 0))
    acc = init if init is not None else F(0)
    if model == "nope_rope":
        s1, s2 = F(0), F(0)
        for i in range(512):
            s1 = fma(a[i], b[i], s1)
        for i in range(512, len(a)):
            s2 = fma(a[i], b[i], s2)
        return add(s1, s2)
    for x, y in zip(a, b):
        acc = fma(x, y, acc)
    return acc


def splits(r, bs, L):
    n = 1
    if r["split_rule"] == "fixed":
        n = r["split_count"]
    elif r["split_rule"] == "aiter_v1":
        n = max(1, min(L // r["split_min_tokens"], -(-r["split_cus"] // bs), r["split_max"]))
    if n == 1 and r["split_rule"] != "fixed":
        return 1, L
    ln = -(-L // n)
    return n, -(-ln // r["split_align"]) * r["split_align"]


def run(r, L, wide):
    q, kv = inputs(L, wide)
    qv, qs = quant_q(r, q)
    qop = [[OPND[r["qk_operand"]](x) for x in row] for row in qv]
    folded = r["kv_scale_at"] == "folded"
    kscale = (lambda v: v) if folded else (lambda v: mul(v, KV_SCALE))
    kop = [[OPND[r["qk_operand"]](kscale(x)) for x in row] for row in kv]
    vop = [[OPND[r["pv_operand"]](kscale(x)) for x in row[:DV]] for row in kv]
    c0 = F(1.0 / 24.0) if r["softmax_exp"] != "2" else F(1.0 / 24.0 * 1.4426950408889634)
    clamp = f32(F(r["clamp"]))
    ns, slen = splits(r, 1, L)
    fu = r["update_fma"]
    upd = (lambda a, al, b: fma(a, al, b)) if fu else (lambda a, al, b: add(mul(a, al), b))
    ex = lambda x: expf(r["softmax_exp"], x)
    res_o, res_lse = [], []
    for h in range(H):
        c = f32(c0)
        if r["q_format"] != "bf16":
            c = mul(c, qs[h])
        if folded:
            c = mul(c, KV_SCALE)
        parts = []
        for s in range(ns):
            lo, hi = s * slen, min((s + 1) * slen, L)
            m, l, acc = -INF, F(0), [F(0)] * DV
            blk = r["softmax_block"] or max(hi - lo, 1)
            for j0 in range(lo, hi, blk):
                j1 = min(j0 + blk, hi)
                sv = []
                for j in range(j0, j1):
                    x = dot(r["qk_dot"], qop[h], kop[j])
                    if r["qk_result"] == "bf16":
                        x = bf16(x)
                    x = mul(x, c)
                    if r["logit_format"] == "bf16":
                        x = bf16(x)
                    sv.append(x)
                mn = fmax(m, max(sv))
                al = ex(sub(m, mn))
                p = [ex(sub(x, mn)) for x in sv]
                ls = F(0)
                for x in p:
                    ls = add(ls, x)
                l = upd(l, al, ls)
                m = mn
                pp = [OPND[r["pv_operand"]](PFMT[r["p_format"]](x)) for x in p]
                for d in range(DV):
                    col = [vop[j][d] for j in range(j0, j1)]
                    if r["pv_accumulate"] == "into_acc":
                        acc[d] = dot(r["pv_dot"], pp, col, mul(acc[d], al))
                    else:
                        acc[d] = upd(acc[d], al, dot(r["pv_dot"], pp, col))
            lc = fmax(l, clamp)
            part = [div(a, lc) if r["partial_normalized"] else a for a in acc]
            if folded:
                part = [mul(v, KV_SCALE) for v in part]
            lse = (m + logf("e", lc)) if m != -INF else -INF
            lse = f32(lse) if lse != -INF else lse
            parts.append((part, lse))
        if ns == 1:
            o, lse = parts[0]
        else:
            rule = r["merge_rule"]
            if rule == "aiter":
                rule = "running_max" if ns <= 3 else "global_max"
            ebase = "e_via_2" if r["softmax_exp"] == "e_via_2" else "e"
            M, sm, acc = -INF, F(0), [F(0)] * DV
            live = [(pt, x) for pt, x in parts if x != -INF and x > -1e30]
            if rule == "global_max":
                M = max(x for _, x in live)
            for pt, x in live:
                if rule == "running_max":
                    Mn = fmax(M, x)
                    a = expf(ebase, sub(M, Mn))
                    w = expf(ebase, sub(x, Mn))
                    acc = [upd(acc[d], a, mul(pt[d], w)) for d in range(DV)]
                    sm = upd(sm, a, w)
                    M = Mn
                else:
                    w = expf(ebase, sub(x, M))
                    acc = [fma(pt[d], w, acc[d]) if fu else add(acc[d], mul(pt[d], w))
                           for d in range(DV)]
                    sm = fma(1, w, sm) if fu else add(sm, w)
            sc = fmax(sm, clamp)
            o = [div(a, sc) for a in acc]
            lse = f32(M + logf("e", sc))
        res_o.append([bf16_bits(bf16(v)) for v in o[:4]] + [max(bf16_bits(bf16(v)) for v in o[4:])])
        res_lse.append(f32_bits(lse))
    return res_o, res_lse


CASES = [(name, "", "base", L) for name in BUILTINS for L in (1, 2, 33, 40)] + [
    ("triton-fp8-split", "split.count=2", "base", 40),
    ("aiter-a8w8-ps", "split.min_tokens=8", "base", 40),
    ("aiter-a16w8-ps", "split.min_tokens=16", "base", 40),
    ("fp32-seq", "softmax.block=8;update.fma=yes", "base", 40),
] + [(name, "", v, 8) for v in ("mid", "wide") for name in BUILTINS]

KEYMAP = {"split.count": "split_count", "split.min_tokens": "split_min_tokens",
          "softmax.block": "softmax_block", "update.fma": "update_fma"}

if __name__ == "__main__":
    for name, sets, variant, L in CASES:
        r = dict(BASE, **BUILTINS[name])
        for a in filter(None, sets.split(";")):
            k, v = a.split("=")
            r[KEYMAP[k]] = (v == "yes") if k == "update.fma" else int(v)
        o, lse = run(r, L, None if variant == "base" else variant)
        print(name, sets or "-", variant, L,
              " ".join("%04x,%04x,%04x,%04x,%04x,%08x" % (*o[h], lse[h]) for h in range(H)))
