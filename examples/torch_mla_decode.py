#!/usr/bin/env python3
"""A plain PyTorch MLA decode kernel for an fp8 KV cache, to show how a kernel is checked with
mlaref (examples/README.md).

DeepSeek-style MLA decode: H query heads share one KV head of 576 values (512 latent + 64 rope);
V is the first 512. The cache holds e4m3 (or e4m3fnuz) codes and a per-tensor kv_scale (or bf16
values). The kernel works in fp32: each batch's KV tokens are cut into a fixed number of splits,
each split runs an online softmax over 64-token blocks, and the splits' partials are merged by
their log-sum-exp. It returns o [T, H, 512] and lse [T, H] (natural log).

As a command kernel (`mlaref report --kernel`, `mlaref policy-check --kernel`):

    python3 examples/torch_mla_decode.py {inputs} {out} [--splits N] [--q-scale S]
        [--dtype fp32|bf16] [--bug BUG]

reads the contract's inputs file (docs/inputs.md) and writes o and lse to {out}. --q-scale S
quantizes Q to e4m3 with the static scale S first (what an fp8-Q kernel does; give it {q_scale}).
--bug makes the kernel deliberately wrong, to see the check catch it (BUGS: each a bug of a kind
that reaches production kernels, caught on the probe suite: tests/python/test_probe.py).

As a function: `mla_decode(q, kv_cache, kv_scale, sm_scale, kv_indptr, qo_indptr, ...)` on
tensors, or `mla_decode_inputs(inputs)` on an `mlaref.Inputs`.
"""
import argparse
import math
import sys

import torch

import mlaref

BUGS = {
    "drop-last-token": "every query sees one KV token fewer (a length off by one)",
    "no-kv-scale": "the KV scales never applied",
    "no-v-scale": "V read at scale 1 (the cache's v_scale omitted)",
    "split-edge-twice": "each split reads one token past its end (that token counted twice)",
    "causal-late": "the causal mask one token late (query i sees one token more)",
    "page-off-by-one": "a batch's last page read through its previous page-table entry",
    "lse-base2": "lse returned as log2 of the sum",
    "heads-mod-16": "head h computed with head (h mod 16)'s query",
    "sm-scale-ignored": "1/sqrt(576) used whatever sm_scale the inputs give",
}
E4M3_MAX = 448.0
BLOCK = 64  # tokens an online-softmax step takes


def quantize_e4m3(x, scale):
    """x (fp32) / scale quantized to OCP e4m3 (clamped to +-448, rounded to nearest even) and
    returned as fp32 values times scale: Q as an fp8-Q kernel with a static scale sees it. The
    division is binary32, as torch's bf16 tensor / float32 scale is."""
    s = torch.tensor(scale, dtype=torch.float32)
    y = (x.float() / s).clamp(-E4M3_MAX, E4M3_MAX)
    if hasattr(torch, "float8_e4m3fn"):
        return y.to(torch.float8_e4m3fn).float() * s
    # no float8 dtype (torch 1.x): round to the e4m3 grid by hand. frexp gives |y| = m 2^e with m
    # in [0.5, 1): the binade's step is 2^(e - 4), at least 2^-9 (the subnormals').
    _, e = torch.frexp(y)
    step = torch.pow(2.0, (e - 4).clamp(min=-9).float())
    return torch.round(y / step) * step * s  # torch.round: half to even


def decode_cache(kv, kv_format):
    """The cache's values as fp32: fp8 codes (uint8, or torch's float8 types) by their format,
    bf16 as it is."""
    if kv.dtype == torch.bfloat16:
        return kv.float()
    if kv.dtype == torch.uint8:
        return mlaref.decode(kv, kv_format)  # torch 1.x has no float8 types
    return kv.float()  # torch.float8_e4m3fn / float8_e4m3fnuz


def token_rows(b, kv_indptr, kv_indices, kv_last_page_len, page_size, bug=None):
    """The cache rows of batch b's KV tokens, in order: a range of rows, or its pages'."""
    lo, hi = int(kv_indptr[b]), int(kv_indptr[b + 1])
    if kv_indices is None:
        rows = torch.arange(lo, hi)
        if bug == "page-off-by-one" and hi - lo >= 2:  # a page is a token here
            rows[-1] = rows[-2]
        return rows
    pages = kv_indices[lo:hi].long().clone()
    if bug == "page-off-by-one" and pages.numel() >= 2:
        pages[-1] = pages[-2]
    if pages.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    rows = (pages[:, None] * page_size + torch.arange(page_size)[None, :]).reshape(-1)
    return rows[:(pages.numel() - 1) * page_size + int(kv_last_page_len[b])]


def split_partial(logits, v):
    """One split's online softmax over 64-token blocks: logits [n, H, L] (masked ones -inf),
    v [L, 512]. Returns its lse [n, H] (-inf where it sees no token) and normalized o."""
    n, h, L = logits.shape
    m = torch.full((n, h), -math.inf)
    l = torch.zeros(n, h)
    acc = torch.zeros(n, h, v.shape[1])
    for j in range(0, L, BLOCK):
        x = logits[:, :, j:j + BLOCK]
        m_new = torch.maximum(m, x.max(dim=-1).values)
        base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # nothing seen yet
        alpha = torch.exp(m - base)
        p = torch.exp(x - base[:, :, None])
        l = l * alpha + p.sum(dim=-1)
        acc = acc * alpha[:, :, None] + torch.einsum("nhl,ld->nhd", p, v[j:j + BLOCK])
        m = m_new
    seen = l > 0
    lse = torch.where(seen, m + torch.log(torch.where(seen, l, torch.ones_like(l))),
                      torch.full_like(m, -math.inf))
    o = torch.where(seen[:, :, None], acc / torch.where(seen, l, torch.ones_like(l))[:, :, None],
                    torch.zeros_like(acc))
    return lse, o


def merge(parts):
    """The splits' partials [(lse, o)] merged by their log-sum-exp: lse -inf where no split saw a
    token (o 0 there)."""
    lses = torch.stack([p[0] for p in parts])
    lse = torch.logsumexp(lses, dim=0)
    finite = torch.isfinite(lse)
    w = torch.exp(lses - torch.where(finite, lse, torch.zeros_like(lse)))
    o = sum(w[s][:, :, None] * parts[s][1] for s in range(len(parts)))
    return lse, torch.where(finite[:, :, None], o, torch.zeros_like(o))


def batch_decode(q, k, v, sm_scale, causal, splits, bug):
    """One batch: q [n, H, 576], k [L, 576], v [L, 512] in fp32. Returns o [n, H, 512], lse."""
    n, L = q.shape[0], k.shape[0]
    logits = torch.einsum("nhd,ld->nhl", q, k) * sm_scale
    # query token i of n sees the first L - (n - 1 - i) tokens (causal), else all L
    seen = torch.tensor([L - (n - 1 - i) if causal else L for i in range(n)])
    if bug == "drop-last-token":
        seen = seen - 1
    if bug == "causal-late":
        seen = torch.clamp(seen + 1, max=L)
    visible = torch.arange(L)[None, :] < seen[:, None]
    logits = logits.masked_fill(~visible[:, None, :], -math.inf)
    size = max(1, -(-L // splits))
    end = size + 1 if bug == "split-edge-twice" else size
    parts = [split_partial(logits[:, :, s:s + end], v[s:s + end]) for s in range(0, L, size)]
    if not parts:  # no KV tokens: nothing to attend to
        return torch.zeros(n, q.shape[1], v.shape[1]), torch.full((n, q.shape[1]), -math.inf)
    lse, o = merge(parts)
    if bug == "lse-base2":
        lse = lse / math.log(2.0)
    return o, lse


def mla_decode(q, kv_cache, kv_scale, sm_scale, kv_indptr, qo_indptr, kv_indices=None,
               kv_last_page_len=None, page_size=1, k_scale=None, v_scale=None, kpe_scale=None,
               causal=True, kv_format="e4m3", q_static_scale=None, splits=4, bug=None,
               out_dtype=torch.float32):
    """MLA decode with split-K: q [T, H, 576] (bf16 or fp32), kv_cache [N, 1, 576] or [N, 576]
    (fp8 codes as uint8 in kv_format, torch float8, or bf16), the scales (k_scale and v_scale
    default to kv_scale, kpe_scale to k_scale), the batches' query tokens (qo_indptr) and KV
    tokens (kv_indptr: rows, or pages with kv_indices, kv_last_page_len and page_size).
    q_static_scale: quantize Q to e4m3 with this scale first. Returns o [T, H, 512] in out_dtype
    and lse [T, H] in fp32, natural log."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug = {bug!r} is not one of {', '.join(BUGS)}")
    k_scale = kv_scale if k_scale is None else k_scale
    v_scale = kv_scale if v_scale is None else v_scale
    kpe_scale = k_scale if kpe_scale is None else kpe_scale
    if bug == "no-kv-scale":
        k_scale = v_scale = kpe_scale = 1.0
    if bug == "no-v-scale":
        v_scale = 1.0
    kv = decode_cache(kv_cache.reshape(-1, kv_cache.shape[-1]), kv_format)
    k = torch.cat([kv[:, :512] * float(k_scale), kv[:, 512:] * float(kpe_scale)], dim=1)
    v = kv[:, :512] * float(v_scale)
    qf = quantize_e4m3(q, q_static_scale) if q_static_scale is not None else q.float()
    if bug == "heads-mod-16":
        qf = qf[:, torch.arange(qf.shape[1]) % 16]
    o = torch.zeros(q.shape[0], q.shape[1], 512)
    lse = torch.zeros(q.shape[0], q.shape[1])
    for b in range(len(qo_indptr) - 1):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        rows = token_rows(b, kv_indptr, kv_indices, kv_last_page_len, page_size, bug)
        o[q0:q1], lse[q0:q1] = batch_decode(qf[q0:q1], k[rows], v[rows], float(sm_scale), causal,
                                            splits, bug)
    return o.to(out_dtype), lse


def mla_decode_inputs(inputs, splits=4, q_static_scale=None, bug=None, out_dtype=torch.float32):
    """mla_decode on an mlaref.Inputs (its tensors in the contract's layout, docs/inputs.md):
    what a harness hands a kernel. Q given as fp8 codes is decoded and scaled by its q_scale."""
    t = inputs.tensors("torch")
    meta = t["__metadata__"]

    def scalar(name, default=None):
        return float(t[name][0]) if name in t else default

    q = t["q"]
    if q.dtype != torch.bfloat16:  # fp8 codes with their descale
        q = decode_cache(q, meta.get("mlaref.format.q", "e4m3")) * scalar("q_scale")
    sm_scale = scalar("sm_scale", 1 / math.sqrt(576))
    if bug == "sm-scale-ignored":
        sm_scale = 1 / math.sqrt(576)
    return mla_decode(q, t["kv"], scalar("kv_scale"), sm_scale,
                      t["kv_indptr"], t["qo_indptr"], kv_indices=t.get("kv_indices"),
                      kv_last_page_len=t.get("kv_last_page_len"),
                      page_size=int(meta.get("mlaref.page_size", "1")),
                      k_scale=scalar("k_scale"), v_scale=scalar("v_scale"),
                      kpe_scale=scalar("kpe_scale"), causal=bool(scalar("causal", 1)),
                      kv_format=inputs.kv_format, q_static_scale=q_static_scale, splits=splits,
                      bug=bug, out_dtype=out_dtype)


def main(argv=None):
    ap = argparse.ArgumentParser(description="A PyTorch MLA decode kernel (split-K, fp32) on a "
                                 "contract inputs file, writing o and lse as .safetensors.")
    ap.add_argument("inputs", help="the inputs file (docs/inputs.md)")
    ap.add_argument("out", help="where to write o and lse (.safetensors)")
    ap.add_argument("--splits", type=int, default=4, help="splits per batch (default 4)")
    ap.add_argument("--q-scale", type=float, default=None,
                    help="quantize Q to e4m3 with this static scale ({q_scale})")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="o's type")
    ap.add_argument("--bug", choices=sorted(BUGS), default=None,
                    help="a deliberately wrong kernel: "
                    + "; ".join(f"{k}: {v}" for k, v in BUGS.items()))
    a = ap.parse_args(argv)
    if a.splits < 1:
        ap.error(f"--splits {a.splits}: at least 1")
    inputs = mlaref.load(a.inputs, framework="torch")
    o, lse = mla_decode_inputs(inputs, splits=a.splits, q_static_scale=a.q_scale, bug=a.bug,
                               out_dtype=torch.float32 if a.dtype == "fp32" else torch.bfloat16)
    mlaref.save_tensors(a.out, {"o": o, "lse": lse})
    return 0


if __name__ == "__main__":
    sys.exit(main())
