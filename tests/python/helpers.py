"""Shared helpers of the mlaref package tests: the command, contract files made by `mlaref gen`,
and the layouts kernels take built from them with numpy."""

import os
import subprocess
from typing import Dict, List

import numpy as np

import mlaref

E4M3_NAN = 0x7F  # an OCP e4m3 NaN code: what spare KV rows hold, so that reading one shows


def mlaref_bin() -> str:
    """The command: $MLAREF_BIN (CTest sets it), else the one of the build the package is in."""
    env = os.environ.get("MLAREF_BIN")
    if env:
        return env
    build = os.path.dirname(os.path.dirname(os.path.dirname(mlaref.library_path())))
    return os.path.join(build, "mlaref")


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """Run `mlaref ARGS...`; stdout and stderr as text."""
    return subprocess.run([mlaref_bin(), *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


def gen_file(tmp_path, spec: str, name: str = "in.safetensors") -> str:
    """`mlaref gen --shape spec` into tmp_path: the file's path."""
    path = os.path.join(str(tmp_path), name)
    r = cli("gen", "--shape", spec, "--out", path)
    assert r.returncode == 0, r.stderr
    return path


def contract(path: str) -> Dict[str, np.ndarray]:
    """The tensors of a contract file as numpy arrays (copies), metadata under __metadata__."""
    t = mlaref.read_tensors(path)
    out = {k: (np.array(v) if k != "__metadata__" else dict(v)) for k, v in t.items()}
    return out


def page_of(c: dict) -> int:
    """The contract's page size."""
    return int(c["__metadata__"].get("mlaref.page_size", "1"))


def seq_lens(c: dict) -> np.ndarray:
    """KV tokens of each batch."""
    ip = c["kv_indptr"].astype(np.int64)
    if "kv_indices" not in c:
        return np.diff(ip)
    pages = np.diff(ip)
    last = c["kv_last_page_len"].astype(np.int64)
    return np.where(pages > 0, (pages - 1) * page_of(c) + last, 0)


def token_rows(c: dict) -> List[np.ndarray]:
    """For each batch, the KV row (of kv [N,1,576]) of each of its tokens."""
    ip = c["kv_indptr"].astype(np.int64)
    lens = seq_lens(c)
    out = []
    for b, n in enumerate(lens):
        pos = np.arange(n, dtype=np.int64)
        if "kv_indices" not in c:
            out.append(ip[b] + pos)
        else:
            page = page_of(c)
            pages = c["kv_indices"].astype(np.int64)[ip[b]:ip[b + 1]]
            out.append(pages[pos // page] * page + pos % page if n else pos)
    return out


def batch_pages(c: dict) -> List[np.ndarray]:
    """For each batch, its pages (the contract must be paged)."""
    ip = c["kv_indptr"].astype(np.int64)
    return [c["kv_indices"][ip[b]:ip[b + 1]] for b in range(len(ip) - 1)]


def padded(rows: List[np.ndarray], width: int, pad: int, dtype) -> np.ndarray:
    """rows as a [B, width] table, the entries past each row's end set to pad."""
    t = np.full((len(rows), width), pad, dtype=np.int64)
    for b, r in enumerate(rows):
        t[b, :len(r)] = r
    return t.astype(dtype)


def kv2d(c: dict) -> np.ndarray:
    """The contract's kv [N,1,576] as [N,576] (a view: no copy)."""
    kv = c["kv"]
    return kv.reshape(kv.shape[0], kv.shape[2])


def kv_format(c: dict) -> str:
    """The format of the contract's KV as Inputs takes it."""
    kv = c["kv"]
    if kv.dtype == np.uint16:
        return "bf16"
    return c["__metadata__"].get("mlaref.format.kv", "e4m3")


def pool(c: dict, extra: int, seed: int):
    """The contract's KV rows scattered over a bigger pool [N + extra, 576] whose spare rows hold
    NaN codes: (pool, new_row) with new_row[old row] its place in the pool."""
    kv = kv2d(c)
    n = kv.shape[0]
    rng = np.random.default_rng(seed)
    new_row = rng.permutation(n + extra)[:n]
    p = np.full((n + extra, kv.shape[1]), E4M3_NAN, dtype=kv.dtype)
    p[new_row] = kv
    return p, new_row


def same_bits(a, b) -> bool:
    """Whether two arrays (numpy or torch) hold the same bits and shape."""
    a, b = as_numpy(a), as_numpy(b)
    if a.shape != b.shape or a.dtype.itemsize != b.dtype.itemsize:
        return False
    return a.tobytes() == b.tobytes()


def as_numpy(x) -> np.ndarray:
    """x as numpy (torch bf16 as its uint16 bits)."""
    if hasattr(x, "detach"):
        import torch

        if x.dtype == torch.bfloat16:
            return x.detach().cpu().view(torch.int16).numpy().view(np.uint16)
        return x.detach().cpu().numpy()
    return np.asarray(x)
