# Runs other people's MLA decode kernels (peers kept in an ignored folder, never copied into the
# project) on mlaref input files and saves what they return, so that each can be held to its
# recipe with `mlaref check`:
#   python3 scripts/gpu/third_party_run.py PEERS BUILD OUTDIR INPUT.safetensors...
#   python3 scripts/gpu/third_party_run.py --build PEERS BUILD   (FlashMLA's extensions only)
# PEERS: a copy of the peers' third_party/ folder (aiter/, flashmla-vllm/, the CUTLASS headers);
# BUILD: a folder for FlashMLA's two SM90 extensions, built there on first use and reused after.
# For each input D/X and kernel K: OUTDIR/D-X.K.safetensors with o, lse and, where the kernel has
# them, its split partials (partial_o [T,H,S,512], partial_lse [T,H,S]) or its scheduler plan
# (FlashMLA: tile_scheduler_metadata, num_splits); where K took other inputs than X (FlashMLA fp8
# takes fp8 Q: a bf16 Q is quantized with a per-tensor scale; FlashMLA bf16 takes bf16 KV: fp8 KV
# is dequantized), OUTDIR/D-X.K.in.safetensors holds the inputs it was given. Kernels
# (MLAREF_TP_KERNELS, default all): aiter-dot (AITER's decode_attention_fwd: the grouped tl.dot
# stage it takes on NVIDIA), aiter-sum (its per-head tl.sum stage, the one ROCm takes for 576-wide
# keys, with ROCm's launch: 4 tokens a block, one warp), flashmla-fp8, flashmla-bf16, and the
# seeds' Triton kernels seeds-single and seeds-split (PEERS/../seed_triton_kernels.py, launched by
# seed_triton_outputs.py here). AITER and seeds-split run with each num_kv_splits in
# MLAREF_TP_SPLITS (default 4,16): D-X.aiter-dot.sN.safetensors; split partials are kept up to
# MLAREF_TP_PARTIALS_MAX floats a run (2^20). On the probe suite, aiter-dot and both FlashMLA
# kernels also run with each planted bug in MLAREF_TP_BUGS (default all: vscale, drop, page; see
# plant()): D-X.K~BUG[.sN].safetensors, which the check must find wrong. A cell a kernel cannot
# take is skipped with its reason on one line.
import math, os, sys
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

DQK, DV = 576, 512
PARTIALS_MAX = int(os.environ.get("MLAREF_TP_PARTIALS_MAX", 1 << 20))  # floats kept a run


class Skip(Exception):
    pass


class Cell:
    """An mlaref input file read into what every kernel needs: Q, the KV rows, each query token's
    batch, visible length and KV rows in order, the scales and sm_scale."""

    def __init__(self, path):
        self.t = load_file(path)
        with safe_open(path, "pt") as f:
            self.meta = f.metadata() or {}
        t, ps = self.t, int(self.meta.get("mlaref.page_size", "1"))
        self.kv, self.q = t["kv"].reshape(-1, DQK), t["q"]
        kvs = t["kv_scale"].item()
        self.ks, self.vs = (t[n].item() if n in t else kvs for n in ("k_scale", "v_scale"))
        self.kpe = t["kpe_scale"].item() if "kpe_scale" in t else self.ks
        self.sm = t["sm_scale"].item() if "sm_scale" in t else 1.0 / math.sqrt(DQK)
        self.causal = int(t["causal"].item()) if "causal" in t else 1
        qo, ind = t["qo_indptr"].tolist(), t["kv_indptr"].tolist()
        self.rows, self.pages, self.ps = [], [], ps
        for b in range(len(ind) - 1):
            if "kv_indices" in t:
                pg = t["kv_indices"][ind[b]:ind[b + 1]].tolist()
                n = (len(pg) - 1) * ps + int(t["kv_last_page_len"][b]) if pg else 0
                self.rows.append([pg[j // ps] * ps + j % ps for j in range(n)])
            else:
                pg = list(range(ind[b], ind[b + 1]))
                self.rows.append(pg)
            self.pages.append(pg)
        self.qlen = [qo[b + 1] - qo[b] for b in range(len(qo) - 1)]
        # query token i of a batch with n tokens and L KV tokens sees L - (n - 1 - i) (causal)
        self.tok = [(b, len(self.rows[b]) - (n - 1 - i) * self.causal)
                    for b, n in enumerate(self.qlen) for i in range(n)]

    def fp8_kv(self):
        if self.kv.dtype == torch.uint8:
            raise Skip("FNUZ KV: NVIDIA kernels take OCP e4m3")
        return self.kv.dtype == torch.float8_e4m3fn

    def uniform_q(self):
        if len(set(self.qlen)) != 1:
            raise Skip("query tokens differ between batches (FlashMLA takes one s_q)")
        return self.qlen[0]

    def one_kv_scale(self):
        if not (self.ks == self.vs == self.kpe):
            raise Skip("k_scale, v_scale and kpe_scale differ (the kernel takes one)")


# ---- AITER's Triton MLA decode ------------------------------------------------------------------

def plant(bug, lens, table, npages, ps):
    """A planted bug in what a kernel is told, the cell's data left as it is: 'drop' (each
    sequence's last token not read: its length one short), 'page' (each sequence's last page read
    from the next page of the pool: an off-by-one in the page index). lens: [B] int32, table:
    [B, width] int32 numbers of pages of ps tokens; both changed in place."""
    if bug == "page" and npages < 2:
        raise Skip("one page in the pool: no other page to read")
    for b in range(lens.shape[0]):
        n = int(lens[b])
        if n == 0:
            continue
        if bug == "drop":
            lens[b] = n - 1
        elif bug == "page":
            last = (n - 1) // ps
            table[b, last] = (int(table[b, last]) + 1) % npages


def aiter_tables(c, bug=None):
    """req_to_token (the batch's pages, or its rows at page size 1) and b_seq_len: one request a
    batch, each of one query token"""
    ps = c.ps if c.ps > 1 else 1
    width = max([len(p) for p in c.pages] + [1])
    r2t = torch.zeros(len(c.tok), width, dtype=torch.int32)
    for i, (b, _) in enumerate(c.tok):
        r2t[i, :len(c.pages[b])] = torch.tensor(c.pages[b], dtype=torch.int32)
    seq = torch.tensor([max(n, 0) for _, n in c.tok], dtype=torch.int32)
    if bug in ("drop", "page"):
        plant(bug, seq, r2t, c.kv.shape[0] // ps, ps)
    return r2t.cuda(), seq.cuda(), ps


def run_aiter(md, c, kind, ns, bug=None):
    if max(c.qlen) > 1:
        raise Skip("more than one query token a batch (AITER's decode takes one a request)")
    if c.q.dtype != torch.bfloat16:
        raise Skip("fp8 Q (AITER's decode takes bf16 Q)")
    fp8 = c.fp8_kv()
    if fp8 and c.kpe != c.ks:
        raise Skip("kpe_scale differs from k_scale (AITER applies k_scale to the rope columns)")
    if not fp8 and not (c.ks == c.vs == c.kpe == 1.0):
        raise Skip("bf16 KV with a scale (AITER scales fp8 KV only)")
    r2t, seq, ps = aiter_tables(c, bug)
    q, kv = c.q.cuda(), c.kv.cuda().view(-1, 1, DQK)
    T, H = q.shape[0], q.shape[1]
    o = torch.full((T, H, DV), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.full((T, H), float("nan"), dtype=torch.float32, device="cuda")
    mid = torch.full((T, H, ns, DV + 1), float("nan"), dtype=torch.float32, device="cuda")
    ks = torch.tensor([c.ks], dtype=torch.float32, device="cuda")
    if bug == "vscale" and (c.vs == 1.0 or not fp8):
        raise Skip("v_scale is 1 or not applied (bf16 KV): leaving it out changes nothing")
    vs = torch.tensor([1.0 if bug == "vscale" else c.vs], dtype=torch.float32, device="cuda")
    if kind == "aiter-dot":
        md.decode_attention_fwd(q, kv, kv[..., :DV], o, lse, r2t, seq, mid, ns, c.sm, ps, 0.0,
                                ks, vs)
    else:
        aiter_sum_stage(md, q, kv, mid, r2t, seq, ns, c.sm, ps, ks, vs)
        md._decode_softmax_reducev_fwd(mid, q, o, lse, kv[..., :DV], seq, ns)
    torch.cuda.synchronize()
    return {"o": o.cpu(), "lse": lse.cpu(), "partial_o": mid[..., :DV].cpu().contiguous(),
            "partial_lse": mid[..., DV].cpu().contiguous()}


def aiter_sum_stage(md, q, kv, mid, r2t, seq, ns, sm, ps, ks, vs):
    """The per-head stage as _decode_att_m_fwd launches it on ROCm for 576-wide keys (BLOCK 4,
    one warp, 512 + 64 columns), so its online-softmax blocks are AMD production's."""
    v = kv[..., :DV]
    md._fwd_kernel_stage1[(q.shape[0], q.shape[1], ns)](
        q, kv, v, sm, r2t, seq, mid, r2t.stride(0), q.stride(0), q.stride(1), kv.stride(-3),
        kv.stride(-2), v.stride(-3), v.stride(-2), mid.stride(0), mid.stride(1), mid.stride(2),
        ks, vs, kv_group_num=q.shape[1], BLOCK_DMODEL=512, BLOCK_DPE=64, BLOCK_DV=DV, BLOCK_N=4,
        NUM_KV_SPLITS=ns, PAGE_SIZE=ps, logit_cap=0.0, num_warps=1, num_stages=2, Lk=DQK, Lv=DV)


# ---- the seeds' Triton kernels (scripts/gpu/seed_triton_outputs.py launches them) -------------

def run_seeds(c, kind, ns):
    """the seeds' single-pass or split kernel on the cell's KV rows, gathered batch after batch
    (their contract: one query token, 16 heads, every batch the same length, OCP e4m3, one scale,
    sm_scale 1/sqrt(576))"""
    import seed_triton_outputs as seeds
    lens = {len(r) for r in c.rows}
    if max(c.qlen) > 1 or c.q.shape[1] != 16 or len(lens) != 1 or 0 in lens:
        raise Skip("outside the seeds' contract (q_len 1, 16 heads, one length a batch, L >= 1)")
    if not c.fp8_kv() or c.q.dtype != torch.bfloat16 or c.sm != 1.0 / math.sqrt(DQK):
        raise Skip("the seeds' kernels take bf16 Q, OCP e4m3 KV and sm_scale 1/sqrt(576)")
    c.one_kv_scale()
    rows = torch.tensor([j for r in c.rows for j in r])
    kvf = c.kv.view(torch.uint8)[rows].view(torch.float8_e4m3fn).cuda()
    ks = torch.tensor([c.ks], dtype=torch.float32, device="cuda")
    bs, L = len(c.rows), lens.pop()
    if kind == "seeds-single":
        o, _ = seeds.single(c.q.cuda(), kvf, ks, bs, L)
        return {"o": o.cpu()}
    o, ao, al, _ = seeds.split(c.q.cuda(), kvf, ks, bs, L, ns)
    return {"o": o.cpu(), "partial_o": ao.cpu(), "partial_lse": al.cpu()}


# ---- FlashMLA (vLLM's fork), SM90 dense decode --------------------------------------------------

NVCC_FLAGS = ["-O3", "-std=c++17", "-DNDEBUG", "-D_USE_MATH_DEFINES",
              "-Wno-deprecated-declarations",
              "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
              "-DNO_PYBIND11=1", "-DFLASH_MLA_DISABLE_FP16", "-gencode",
              "arch=compute_90a,code=sm_90a", "--threads", "8"]


def flashmla_build(peers, build, which):
    """FlashMLA's extension built with the flags of its setup.py for sm_90a alone; the bf16 one
    from the dense decode sources and its binding only (see stand_ins)."""
    import torch.utils.cpp_extension  # noqa: F401  (torch's libraries, which the .so needs)
    from torch.utils.cpp_extension import load
    root = os.path.join(peers, "flashmla-vllm")
    cut = os.path.join(root, "csrc", "cutlass")
    if not os.path.isdir(os.path.join(cut, "include")):
        os.makedirs(cut, exist_ok=True)
        if os.system(f"tar -xJf {peers}/cutlass-e94e888-include.tar.xz -C {cut}") != 0:
            raise RuntimeError("cannot unpack the CUTLASS headers")
    csrc = os.path.join(root, "csrc")
    if which == "fp8":
        d = os.path.join(csrc, "extension", "sm90", "dense_fp8")
        src = [os.path.join(d, f) for f in
               ("pybind.cpp", "flash_fwd_mla_fp8_sm90.cu", "flash_fwd_mla_metadata.cu")]
        inc = [d]
    else:
        src = [os.path.join(csrc, f) for f in ("pybind.cpp", "smxx/get_mla_metadata.cu",
                                                "smxx/mla_combine.cu",
                                                "sm90/decode/dense/splitkv_mla.cu")]
        inc = []
    bd = os.path.join(build, which)
    os.makedirs(bd, exist_ok=True)
    if which == "bf16":
        stand_ins(bd)
    so = os.path.join(bd, f"flashmla_{which}.so")
    if os.path.exists(so) and not os.path.exists(os.path.join(bd, "build.ninja")):
        import importlib.util  # a built extension carried without its build folder
        spec = importlib.util.spec_from_file_location(f"flashmla_{which}", so)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load(name=f"flashmla_{which}", sources=src, build_directory=bd,
                extra_cflags=["-O3", "-std=c++17", "-DNDEBUG", "-DNO_PYBIND11=1",
                              "-DFLASH_MLA_DISABLE_FP16", "-isystem",
                              "/usr/local/cuda/include/cccl"],
                extra_cuda_cflags=NVCC_FLAGS,
                extra_include_paths=inc + [csrc, os.path.join(csrc, "sm90"),
                                           os.path.join(cut, "include"),
                                           os.path.join(cut, "tools", "util", "include")])


# the kernels FlashMLA's binding names but its dense bf16 decode never calls (SM100, sparse), by
# their C++ symbols: stand-ins that abort, so the extension loads without building them
UNBUILT = ["_Z22FMHACutlassSM100FwdRunN2at6TensorES0_S0_S0_S0_S0_S0_S0_ifiib",
           "_Z22FMHACutlassSM100BwdRunN2at6TensorES0_S0_S0_S0_S0_S0_S0_S0_S0_S0_S0_ifiib",
           "_ZN4sm9014run_fwd_kernelERK19SparsePrefillParams",
           "_ZN4sm9039run_flash_splitkv_mla_fp8_sparse_kernelER14DecodingParamsP11CUstream_st",
           "_ZN5sm10014run_fwd_kernelERK19SparsePrefillParams",
           "_ZN5sm10039run_flash_splitkv_mla_fp8_sparse_kernelER14DecodingParamsP11CUstream_st"]


def stand_ins(bd):
    import ctypes
    src, lib = os.path.join(bd, "unbuilt.c"), os.path.join(bd, "libunbuilt.so")
    with open(src, "w") as f:
        f.write("#include <stdio.h>\n#include <stdlib.h>\n")
        for n in UNBUILT:
            f.write(f'void {n}(void) {{ fputs("{n}: not built\\n", stderr); abort(); }}\n')
    if os.system(f"gcc -shared -fPIC -O1 {src} -o {lib}") != 0:
        raise RuntimeError("cannot build the stand-ins")
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)


def paged64(c, kv, bug=None):
    """The cell's KV rows regathered into FlashMLA's cache of 64-token pages, a block table and
    the lengths (with a planted bug: plant())."""
    lens = [len(r) for r in c.rows]
    if min(lens) == 0:
        raise Skip("a batch with no KV tokens")
    npg = [(n + 63) // 64 for n in lens]
    cache = torch.zeros(sum(npg) * 64, DQK, dtype=kv.dtype)
    bits = torch.uint8 if kv.element_size() == 1 else torch.int16
    bt = torch.zeros(len(lens), max(npg), dtype=torch.int32)
    at = 0
    for b, r in enumerate(c.rows):
        # gathered as bytes: index_select need not take float8 on every torch
        cache.view(bits)[at * 64:at * 64 + lens[b]] = kv.view(bits)[torch.tensor(r)]
        bt[b, :npg[b]] = torch.arange(at, at + npg[b], dtype=torch.int32)
        at += npg[b]
    lens = torch.tensor(lens, dtype=torch.int32)
    if bug in ("drop", "page"):
        plant(bug, lens, bt, at, 64)
        if int(lens.min()) == 0:
            raise Skip("the planted bug leaves a batch with no KV tokens (FlashMLA takes none)")
    return cache.view(-1, 64, 1, DQK).cuda(), bt.cuda(), lens.cuda()


def given_inputs(c, **repl):
    """The cell's tensors with some replaced, and its metadata without the replaced q's or kv's
    format"""
    t, meta = dict(c.t), dict(c.meta)
    for k in repl:
        meta.pop(f"mlaref.format.{k}", None)
    for k in ("k_scale", "v_scale", "kpe_scale") if "kv" in repl else ():
        t.pop(k, None)
    t.update(repl)
    return t, meta


def run_flashmla(ext, c, kind, bug=None):
    s_q = c.uniform_q()
    c.one_kv_scale()
    B, H = len(c.rows), c.q.shape[1]
    if kind == "flashmla-fp8":
        if not c.fp8_kv():
            raise Skip("bf16 KV (FlashMLA's dense fp8 takes fp8 KV)")
        if c.q.dtype == torch.bfloat16:
            qs = (c.q.float().abs().max() / 448.0).reshape(1)
            q = (c.q.float() / qs).to(torch.float8_e4m3fn)
            given = given_inputs(c, q=q, q_scale=qs)
        else:
            q, qs, given = c.q, c.t["q_scale"].float().reshape(1), None
        kv = c.kv
    else:
        if c.q.dtype != torch.bfloat16:
            raise Skip("fp8 Q (FlashMLA's dense bf16 takes bf16 Q)")
        q, given, kv = c.q, None, c.kv
        if c.fp8_kv():
            kv = (c.kv.float() * c.ks).to(torch.bfloat16)
            given = given_inputs(c, kv=kv.view(-1, 1, DQK), kv_scale=torch.ones(1))
    if bug == "vscale":
        raise Skip("one descale for K and V (no v_scale to leave out)")
    cache, bt, lens = paged64(c, kv, bug)
    q4 = q.reshape(B, s_q, H, DQK).cuda()
    causal = bool(c.causal) and s_q > 1
    if kind == "flashmla-fp8":
        tsm, nsp = ext.get_mla_decoding_metadata_dense_fp8(lens, s_q * H, 1)
        d = torch.tensor([c.ks], dtype=torch.float32, device="cuda")
        o, lse = ext.fwd_kvcache_mla_fp8(q4, cache, DV, lens, bt, c.sm, causal, tsm, nsp,
                                         qs.cuda(), d)
    else:
        tsm, nsp = ext.get_mla_decoding_metadata(lens, s_q * H, 1, H, False, None)
        o, lse = ext.fwd_kvcache_mla(q4, cache, DV, lens, bt, c.sm, causal, tsm, nsp, False,
                                     None)
    torch.cuda.synchronize()
    out = {"o": o.cpu().contiguous(), "lse": lse.cpu().contiguous(),
           "tile_scheduler_metadata": tsm.cpu(), "num_splits": nsp.cpu()}
    return out, given


def main():
    if len(sys.argv) < 4 or (sys.argv[1] == "--build" and len(sys.argv) != 4):
        sys.exit("usage: third_party_run.py PEERS BUILD OUTDIR INPUT... | --build PEERS BUILD")
    if sys.argv[1] == "--build":  # build FlashMLA's extensions only (a step run beside others)
        for k in ("fp8", "bf16"):
            flashmla_build(sys.argv[2], sys.argv[3], k)
        return
    peers, build, outdir = sys.argv[1:4]
    os.makedirs(outdir, exist_ok=True)
    kinds = os.environ.get("MLAREF_TP_KERNELS",
                           "aiter-dot aiter-sum flashmla-fp8 flashmla-bf16 seeds-single "
                           "seeds-split").split()
    splits = [int(s) for s in os.environ.get("MLAREF_TP_SPLITS", "4,16").split(",")]
    sys.path.insert(0, os.path.join(peers, "aiter"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    os.environ.setdefault("MLAREF_SEEDS_DIR", os.path.dirname(os.path.abspath(peers)))
    md = None
    if any(k.startswith("aiter") for k in kinds):
        import mla_decode as md
    ext = {k: flashmla_build(peers, build, k[9:]) for k in kinds if k.startswith("flashmla")}
    bugs = os.environ.get("MLAREF_TP_BUGS", "vscale drop page").split()
    for path in sys.argv[4:]:
        # the cell's folder and name (suites share cell names): OUTDIR/SUITE-CELL.K.safetensors
        suite = os.path.basename(os.path.dirname(path))
        x = os.path.join(outdir, f"{suite}-{os.path.basename(path)[:-len('.safetensors')]}")
        c = Cell(path)
        for k in kinds:
            for ns in splits if k.startswith("aiter") or k == "seeds-split" else [0]:
                if not run_one(c, x, k, ns, None, md, ext):
                    break
            # planted bugs, on the probe suite: each run must fail the default rules
            for bug in bugs if suite == "probe" and k in BUGGED else []:
                run_one(c, x, k, splits[0] if k.startswith("aiter") else 0, bug, md, ext)


BUGGED = ("aiter-dot", "flashmla-fp8", "flashmla-bf16")  # the kernels given planted bugs


def run_one(c, x, k, ns, bug, md, ext):
    """kernel k (num_kv_splits ns, or 0) on cell c with a planted bug or none, saved as
    x.K[~BUG][.sN].safetensors: False where the kernel cannot take the cell"""
    name = (f"{k}~{bug}" if bug else k) + (f".s{ns}" if ns else "")
    try:
        given = None
        if k.startswith("seeds"):
            out = run_seeds(c, k, ns)
        elif ns:
            out = run_aiter(md, c, k, ns, bug)
        else:
            out, given = run_flashmla(ext[k], c, k, bug)
    except Skip as e:
        print(f"{os.path.basename(x)} {name}: skipped: {e}")
        return False
    if "partial_o" in out and out["partial_o"].numel() > PARTIALS_MAX:
        del out["partial_o"], out["partial_lse"]
    save_file(out, f"{x}.{name}.safetensors")
    if given is not None:
        save_file(given[0], f"{x}.{name}.in.safetensors", metadata=given[1])
    print(f"{os.path.basename(x)} {name}: ran")
    return True

if __name__ == "__main__":
    main()
