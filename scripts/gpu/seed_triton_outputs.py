# Runs the seeds' Triton fp8 flash-decode kernels (a peer, loaded from .peers/, never copied into
# the project) on inputs written by `mlaref gen`, and saves what they produce, so the emulator's
# triton-fp8-single / triton-fp8-split recipes can be compared with a real kernel element by
# element. Also saves the PTX Triton generated (to see fma contraction and the exp it uses).
#   python3 scripts/gpu/seed_triton_outputs.py OUTDIR INPUT.safetensors...
# For each input X: OUTDIR/X.single.safetensors (o) and OUTDIR/X.splitN.safetensors (o,
# partial_o [B,H,N,512] f32, partial_lse [B,H,N] f32) for N in 2, 4, 8. Inputs must be uniform
# (every batch the same kv length), page size 1, one query token per batch: the seeds' contract.
import math, os, sys
import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.environ.get("MLAREF_SEEDS_DIR",
                                  os.path.join(os.path.dirname(__file__), "..", "..", ".peers")))
from seed_triton_kernels import (  # noqa: E402
    _flash_fp8_single, _flash_fp8_split_s1, _flash_fp8_split_s2)

H, DQK, DV = 16, 576, 512
SM = 1.0 / math.sqrt(DQK)


def single(q, kvf, ks, bs, kv):
    """the single-pass kernel: o [bs, 16, 512] bf16, and the compiled kernel"""
    out = torch.full((bs, H, DV), float("nan"), dtype=torch.bfloat16, device="cuda")
    k = _flash_fp8_single[(bs,)](q, kvf, ks, out, q.stride(0), q.stride(1), kvf.stride(0),
                                 out.stride(0), out.stride(1), SM,
                                 KV_LEN=kv, BLOCK_N=32, BLOCK_H=16, BLOCK_NOPE=512, BLOCK_ROPE=64,
                                 BLOCK_DV=512, Lnope=512, Lrope=64, Lv=512, num_warps=4,
                                 num_stages=1)
    torch.cuda.synchronize()
    return out, k


def split(q, kvf, ks, bs, kv, ns):
    """the split kernels with ns splits: o, partial_o [bs,16,ns,512], partial_lse, both kernels"""
    ao = torch.full((bs, H, ns, DV), float("nan"), dtype=torch.float32, device="cuda")
    al = torch.full((bs, H, ns), float("nan"), dtype=torch.float32, device="cuda")
    o2 = torch.full((bs, H, DV), float("nan"), dtype=torch.bfloat16, device="cuda")
    k2 = _flash_fp8_split_s1[(bs, 1, ns)](
        q, kvf, ks, SM, ao, al, q.stride(0), q.stride(1), kvf.stride(0),
        ao.stride(0), ao.stride(1), ao.stride(2), al.stride(0), al.stride(1),
        KV_LEN=kv, BLOCK_N=32, BLOCK_H=16, NUM_SPLITS=ns, BLOCK_NOPE=512, BLOCK_ROPE=64,
        BLOCK_DV=512, Lnope=512, Lrope=64, Lv=512, num_warps=4, num_stages=1)
    k3 = _flash_fp8_split_s2[(bs, H)](
        ao, al, o2, ao.stride(0), ao.stride(1), ao.stride(2), al.stride(0), al.stride(1),
        o2.stride(0), o2.stride(1), NS=ns, BDV=512, Lv=512, num_warps=4, num_stages=1)
    torch.cuda.synchronize()
    return o2, ao, al, (k2, k3)


def run(path, outdir):
    t = load_file(path, device="cuda")
    q, kv8, ks = t["q"], t["kv"], t["kv_scale"]
    ind = t["kv_indptr"].cpu().tolist()
    bs = len(ind) - 1
    kv = ind[1] - ind[0]
    assert (all(ind[i + 1] - ind[i] == kv for i in range(bs)) and q.shape[0] == bs
            and kv8.dtype == torch.float8_e4m3fn)
    kvf = kv8.view(bs * kv, DQK)
    base = os.path.join(outdir, os.path.basename(path).replace(".safetensors", ""))
    out, k1 = single(q, kvf, ks, bs, kv)
    save_file({"o": out.cpu()}, base + ".single.safetensors")
    ptx = {"single": k1.asm["ptx"]}
    for ns in (2, 4, 8):
        o2, ao, al, (k2, k3) = split(q, kvf, ks, bs, kv, ns)
        save_file({"o": o2.cpu(), "partial_o": ao.cpu(), "partial_lse": al.cpu()},
                  f"{base}.split{ns}.safetensors")
        ptx["split_s1"], ptx["split_s2"] = k2.asm["ptx"], k3.asm["ptx"]
    for k, v in ptx.items():
        with open(os.path.join(outdir, f"{k}.ptx"), "w") as fh:
            fh.write(v)
    print("ran", path, "bs", bs, "kv", kv)


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    for p in sys.argv[2:]:
        run(p, sys.argv[1])
