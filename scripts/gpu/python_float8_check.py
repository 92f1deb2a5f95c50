"""The Python package with torch's float8 dtypes (torch 2.x; Debian's CPU torch 1.13 has none), on
CUDA tensors: float8_e4m3fn and float8_e4m3fnuz caches and fp8 Q give the bits of the same codes
passed as uint8 with their format; a CPU float8 cache is read where it lies; a plain PyTorch MLA
decode on the GPU in fp32 passes `mlaref.check` and one that drops kv_scale fails it.
Run by scripts/gpu_run.sh (step python) with PYTHONPATH at the package; exits 1 on a failure."""
import sys

import numpy as np
import torch

import mlaref

fails = 0


def expect(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += 0 if ok else 1


def same_run(a, b, recipe):
    oa, la = mlaref.run(recipe, a)
    ob, lb = mlaref.run(recipe, b)
    return torch.equal(oa.view(torch.int16), ob.view(torch.int16)) and torch.equal(la, lb)


def paged(spec):
    """gen's inputs as a paged CUDA cache [P,page,1,576] with a block table and seq_lens."""
    x = mlaref.gen(spec, framework="torch")
    t = x.tensors("torch")
    page = x.page_size
    kv = t["kv"].view(torch.uint8).reshape(-1, page, 1, 576).cuda()
    ip, ix, last = t["kv_indptr"], t["kv_indices"], t["kv_last_page_len"]
    B = ip.numel() - 1
    pages = (ip[1:] - ip[:-1]).tolist()
    table = torch.full((B, max(pages) + 2), -1, dtype=torch.int32)  # padded past each sequence
    for b in range(B):
        table[b, :pages[b]] = ix[ip[b]:ip[b + 1]]
    lens = torch.tensor([(p - 1) * page + int(last[b]) if p else 0 for b, p in enumerate(pages)],
                        dtype=torch.int64)
    return x, t, dict(q=t["q"].cuda(), kv_scale=float(t["kv_scale"][0]), block_table=table.cuda(),
                      seq_lens=lens.cuda()), kv


def main():
    print(f"torch {torch.__version__}, mlaref {mlaref.__version__}, {torch.cuda.get_device_name()}")
    x, t, args, kv = paged("lens=100:700:1,page=64,seed=21")
    a = mlaref.Inputs(kv_cache=kv.view(torch.float8_e4m3fn), **args)
    b = mlaref.Inputs(kv_cache=kv, kv_format="e4m3", **args)
    for r in ("aiter-a8w8-ps", "triton-fp8-split", "fp32-seq"):
        expect(same_run(a, b, r) and same_run(a, x, r),
               f"float8_e4m3fn CUDA cache = uint8 e4m3 = the contract file ({r})")
    cpu = kv.cpu().view(torch.float8_e4m3fn).reshape(-1, 64, 576)  # paged: the table needs pages
    c = mlaref.Inputs(kv_cache=cpu, **{k: v.cpu() if torch.is_tensor(v) else v
                                       for k, v in args.items()})
    expect(c.address("kv") == cpu.data_ptr(), "a contiguous CPU float8 cache is not copied")
    xf, tf, argsf, kvf = paged("lens=100:700:1,page=16,fmt=e4m3fnuz,seed=22")
    af = mlaref.Inputs(kv_cache=kvf.view(torch.float8_e4m3fnuz), **argsf)
    bf = mlaref.Inputs(kv_cache=kvf, kv_format="e4m3fnuz", **argsf)
    expect(same_run(af, bf, "aiter-a8w8-ps") and same_run(af, xf, "aiter-a8w8-ps"),
           "float8_e4m3fnuz CUDA cache = uint8 e4m3fnuz = the contract file")
    try:
        mlaref.Inputs(kv_cache=kv.view(torch.float8_e4m3fn), kv_format="e4m3fnuz", **args)
        expect(False, "kv_format disagreeing with a float8 dtype is refused")
    except mlaref.InputError as e:
        expect("kv_format" in str(e), f"kv_format disagreeing with float8_e4m3fn: {e}")
    # fp8 Q with its descale: the recipe's own static quantization, given as codes
    s = 6.0 / 448.0
    q8 = (args["q"].float() / np.float32(s)).clamp(-448, 448).to(torch.float8_e4m3fn)
    d = mlaref.Inputs(q=q8, q_scale=np.float32(s), kv_cache=kv.view(torch.float8_e4m3fn),
                      **{k: v for k, v in args.items() if k != "q"})
    o1, _ = mlaref.run("aiter-a8w8-ps", d)
    o2, _ = mlaref.run("aiter-a8w8-ps", a, set={"q.scale": "static", "q.absmax": 6})
    expect(torch.equal(o1.view(torch.int16), o2.view(torch.int16)),
           "float8_e4m3fn Q with q_scale = the static policy's own quantization")
    # a plain PyTorch MLA decode on the GPU in fp32, from the contract's views
    o = torch_decode(a, x, t, kv_scale=True)
    res = mlaref.check(o, a, recipe="fp32-seq")  # o is fp32: modelled with out.format = fp32
    expect(res.passed, "a float32 PyTorch decode on CUDA passes check (fa3)\n" + str(res))
    res = mlaref.check(torch_decode(a, x, t, kv_scale=False), a, recipe="fp32-seq")
    expect(not res.passed, "the same decode without kv_scale fails check")
    print(f"== python float8: {fails} failed")
    return 1 if fails else 0


def torch_decode(inp, x, t, kv_scale):
    """softmax(q k^T / 24) v per batch in fp32 on CUDA, from the contract file's tensors"""
    dev = "cuda"
    q = t["q"].to(dev).float()
    codes = t["kv"].to(dev)
    k = codes.view(torch.float8_e4m3fn).float().reshape(-1, 576)
    if kv_scale:
        k = k * float(t["kv_scale"][0])
    page = x.page_size
    ip, ix, last = t["kv_indptr"], t["kv_indices"], t["kv_last_page_len"]
    o = torch.empty(q.shape[0], q.shape[1], 512, device=dev)
    qo = t["qo_indptr"]
    for b in range(ip.numel() - 1):
        rows = [int(p) * page + j for p in ix[ip[b]:ip[b + 1]] for j in range(page)]
        n = (int(ip[b + 1] - ip[b]) - 1) * page + int(last[b]) if ip[b + 1] > ip[b] else 0
        kb = k[torch.tensor(rows[:n], dtype=torch.long, device=dev)]
        for tok in range(int(qo[b]), int(qo[b + 1])):
            s = (q[tok] @ kb.T) / 24.0
            o[tok] = torch.softmax(s, dim=-1) @ kb[:, :512] if n else 0
    return o


if __name__ == "__main__":
    sys.exit(main())
