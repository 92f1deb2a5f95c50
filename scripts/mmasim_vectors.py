#!/usr/bin/env python3
"""Inner products computed by MMA-Sim (Microsoft Research's bit-accurate model of tensor and
matrix cores; a peer, run from its own folder, never copied into the project), written as
vectors for `mlaref mma check` (one a line: C D a_0 .. a_(k-1) b_0 .. b_(k-1) in hex).

    scripts/mmasim_vectors.py MMASIM_DIR OUT_DIR [--random N] [--targeted N] [--seed S]
                              [--family F]... [--jobs J]

Families (the instruction MMA-Sim models; the ref/mma unit that claims it):
    sm90-mma-f16      mma.sync m16n8k16.f32.f16.f16.f32 (Hopper)     sm90-f16
    sm90-mma-bf16     mma.sync m16n8k16.f32.bf16.bf16.f32 (Hopper)   sm90-bf16
    sm90-wgmma-f16    wgmma m64n8k16.f32.f16.f16 (Hopper)            sm90-f16
    sm90-wgmma-bf16   wgmma m64n8k16.f32.bf16.bf16 (Hopper)          sm90-bf16
    cdna3-mfma-bf16   v_mfma_f32_16x16x16_bf16 (CDNA3)               cdna3-bf16
    sm90-wgmma-e4m3   wgmma m64n8k32.f32.e4m3.e4m3 (Hopper)          sm90-e4m3 (torch float8)
    sm90-wgmma-e5m2   wgmma m64n8k32.f32.e5m2.e5m2 (Hopper)          sm90-e5m2 (torch float8)
    cdna3-mfma-fp8    v_mfma_f32_16x16x32_fp8_fp8 (CDNA3)            cdna3-fp8 (torch float8)
The fp8 families need torch's float8 dtypes (torch 2.1 on); with torch 1.x they are refused and
the others run (MMA-Sim names the float8 dtypes when it is imported: stand-ins are set for them).

Each instruction call gives one tile of inner products (128, 512 or 256); N counts inner
products. Random: normal operands, each scaled by 2^u, u uniform in [-8, 8] (fp8: [-4, 4]), C
likewise, rounded to the format. Targeted, a fifth each: cancellation (the second half of each
product the negative of the first, C small), exponent spread (2^u, u in [-30, 30]), subnormal
operands (of their format), C dominant (2^20 times the products) and C tiny (2^-30 times), signs
random. The bits depend on --seed and --jobs (each process its own seed, both in the file's
header). Writes OUT_DIR/FAMILY.txt and prints one line a family: the unit, the count, the
seconds."""
import argparse
import os
import struct
import sys
import time
from multiprocessing import Pool

import torch

FAMILIES = {
    "sm90-mma-f16": ("nv_mma", "Hopper", "m16n8k16.f32.f16.f16.f32", "sm90-f16", torch.float16),
    "sm90-mma-bf16": ("nv_mma", "Hopper", "m16n8k16.f32.bf16.bf16.f32", "sm90-bf16",
                      torch.bfloat16),
    "sm90-wgmma-f16": ("nv_wgmma", "Hopper", "m64n8k16.f32.f16.f16", "sm90-f16", torch.float16),
    "sm90-wgmma-bf16": ("nv_wgmma", "Hopper", "m64n8k16.f32.bf16.bf16", "sm90-bf16",
                        torch.bfloat16),
    "cdna3-mfma-bf16": ("amd", "CDNA3", "f32_16x16x16_bf16", "cdna3-bf16", torch.bfloat16),
    "sm90-wgmma-e4m3": ("nv_wgmma", "Hopper", "m64n8k32.f32.e4m3.e4m3", "sm90-e4m3",
                        "float8_e4m3fn"),
    "sm90-wgmma-e5m2": ("nv_wgmma", "Hopper", "m64n8k32.f32.e5m2.e5m2", "sm90-e5m2",
                        "float8_e5m2"),
    "cdna3-mfma-fp8": ("amd", "CDNA3", "f32_16x16x32_fp8_fp8", "cdna3-fp8", "float8_e4m3fnuz"),
}
FLOAT8 = ["float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float8_e4m3fnuz", "float8_e5m2fnuz"]
HAS_FLOAT8 = hasattr(torch, "float8_e4m3fn")


def load_mmasim(path):
    """MMA-Sim from its folder. torch 1.x lacks the float8 dtypes MMA-Sim names on import
    (stand-ins, never used by the other families) and the unsigned ones it writes its NaN
    patterns with (0x7FFF, 0x7FFFFFFF: the signed dtypes of the same width hold the same bits)"""
    for name in FLOAT8:
        if not hasattr(torch, name):
            setattr(torch, name, type(f"no_{name}", (), {})())
    for name, same in (("uint16", torch.int16), ("uint32", torch.int32)):
        if not hasattr(torch, name):
            setattr(torch, name, same)
    sys.path.insert(0, path)
    from mmasim.simulator import amd, nv_ptx  # noqa: E402
    return amd, nv_ptx


def instruction(mmasim, family):
    kind, arch, qual = FAMILIES[family][:3]
    amd, nv_ptx = mmasim
    if kind == "nv_mma":
        return nv_ptx.mma(arch, qual)
    if kind == "nv_wgmma":
        return nv_ptx.wgmma(arch, qual)
    return amd.mfma(arch, qual)


def dtype_of(family):
    d = FAMILIES[family][4]
    return getattr(torch, d) if isinstance(d, str) else d


def operands(g, shape, dtype, kind):
    """values of the format: a normal variate times 2^u, by kind (random or a targeted class)"""
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    lo, hi = {"spread": (-30, 30), "subnormal": (-140, -127) if dtype == torch.bfloat16
              else (-24, -15)}.get(kind, (-8, 8))
    if dtype not in (torch.bfloat16, torch.float16):  # fp8: its own range and subnormals
        sub = (-17, -15) if "e5m2" in str(dtype) else (-9, -7)
        lo, hi = {"subnormal": sub}.get(kind, (-4, 4))
    u = torch.randint(lo, hi + 1, shape, generator=g).double()
    return (x * torch.pow(2.0, u)).to(dtype)


def tile(g, ins, dtype, kind):
    """one call's A, B, C for a class of inputs"""
    m, n, k = ins.m, ins.n, ins.k
    a = operands(g, (m, k), dtype, kind)
    b = operands(g, (k, n), dtype, kind)
    if kind == "cancel":  # the second half of each product undoes the first
        b[k // 2:] = b[:k // 2]
        a[:, k // 2:] = (-a[:, :k // 2].float()).to(dtype)  # exact; fp8 has no neg on CPU
    c = torch.randn((m, n), generator=g, dtype=torch.float64)
    scale = {"c_big": 2.0 ** 20, "c_tiny": 2.0 ** -30, "cancel": 2.0 ** -12}.get(kind, 1.0)
    c = (c * scale * torch.pow(2.0, torch.randint(-8, 9, (m, n), generator=g).double())).float()
    return a, b, c


def code(x):
    """the operands' codes as unsigned integers of their width"""
    bits = x.element_size() * 8
    v = x.view({8: torch.uint8, 16: torch.int16}[bits]).to(torch.int64)
    return v & ((1 << bits) - 1), bits // 4


def lines_of(a, b, c, d):
    ca, w = code(a)
    cb, _ = code(b)
    cc = c.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    cd = d.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    out = []
    for i in range(a.shape[0]):
        ra = " ".join(f"{int(v):0{w}x}" for v in ca[i])
        for j in range(b.shape[1]):
            rb = " ".join(f"{int(v):0{w}x}" for v in cb[:, j])
            out.append(f"{int(cc[i, j]):08x} {int(cd[i, j]):08x} {ra} {rb}\n")
    return out


def work(job):
    """one process's share: (family, mmasim dir, seed, tiles of each kind) -> lines"""
    family, path, seed, plan = job
    mmasim = load_mmasim(path)
    ins, dtype = instruction(mmasim, family), dtype_of(family)
    g = torch.Generator().manual_seed(seed)
    out = []
    for kind, tiles in plan:
        for _ in range(tiles):
            a, b, c = tile(g, ins, dtype, kind)
            out += lines_of(a, b, c, ins(a, b, c))
    return out


def run(family, args):
    mmasim = load_mmasim(args.mmasim)
    per = instruction(mmasim, family)
    per = per.m * per.n
    kinds = ["cancel", "spread", "subnormal", "c_big", "c_tiny"]
    plan = [("random", -(-args.random // per))] + \
        [(k, -(-args.targeted // (per * len(kinds)))) for k in kinds]
    jobs = []
    for j in range(args.jobs):  # each process its share of every kind, its own seed
        share = [(k, t // args.jobs + (j < t % args.jobs)) for k, t in plan]
        jobs.append((family, args.mmasim, args.seed + 1000 * j, share))
    t0 = time.time()
    with Pool(args.jobs) as pool:
        parts = pool.map(work, jobs)
    path = os.path.join(args.out, f"{family}.txt")
    n = 0
    with open(path, "w") as f:
        f.write(f"# MMA-Sim {FAMILIES[family][2]} ({FAMILIES[family][1]}), seed {args.seed}, "
                f"{args.jobs} jobs: scripts/mmasim_vectors.py\n")
        for part in parts:
            f.writelines(part)
            n += len(part)
    print(f"{family}: unit {FAMILIES[family][3]}, {n} inner products, {time.time() - t0:.0f} s, "
          f"{path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mmasim", help="MMA-Sim's folder (holding mmasim/)")
    ap.add_argument("out", help="the folder for FAMILY.txt")
    ap.add_argument("--random", type=int, default=1000000)
    ap.add_argument("--targeted", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    args = ap.parse_args()
    families = args.family or [f for f in FAMILIES if HAS_FLOAT8 or
                               not isinstance(FAMILIES[f][4], str)]
    for f in families:
        if isinstance(FAMILIES[f][4], str) and not HAS_FLOAT8:
            sys.exit(f"mmasim_vectors: {f} needs torch's float8 dtypes (this torch is "
                     f"{torch.__version__})")
    os.makedirs(args.out, exist_ok=True)
    for f in families:
        run(f, args)


if __name__ == "__main__":
    main()
