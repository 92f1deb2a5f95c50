"""Every input layout gives the bits of the equivalent contract file made by `mlaref gen`: the
model's o and lse on Inputs built from the layout equal those on the file, for recipes with and
without splits; contiguous buffers are read in place."""

import numpy as np
import pytest

import mlaref
from helpers import (as_numpy, batch_pages, cli, contract, kv2d, kv_format, padded, page_of,
                     pool, same_bits, seq_lens, token_rows)

RECIPES = ("aiter-a8w8-ps", "triton-fp8-split")
PAD_NEG = -1
PAD_BIG = 2**31 - 1


def _flat_o(o, lse, q4):
    """o and lse of a 4-D q ([B,s,H,512], [B,H,s]) as the contract's [T,H,512], [T,H]."""
    o, lse = as_numpy(o), as_numpy(lse)
    if not q4:
        return o, lse
    b, s, h, d = o.shape
    return o.reshape(b * s, h, d), np.ascontiguousarray(lse.transpose(0, 2, 1)).reshape(b * s, h)


def assert_same_as_file(inputs, path, q4=False, recipes=RECIPES):
    """The model on inputs gives the bits it gives on the contract file path."""
    ref_in = mlaref.load(path)
    for recipe in recipes:
        o, lse = mlaref.run(recipe, inputs)
        ro, rlse = mlaref.run(recipe, ref_in)
        o, lse = _flat_o(o, lse, q4)
        assert same_bits(o, ro), f"{recipe}: o differs from the contract file's"
        assert same_bits(lse, rlse), f"{recipe}: lse differs from the contract file's"


def _common(c):
    return dict(kv_scale=c["kv_scale"], kv_format=kv_format(c))


def _q4(c):
    q = c["q"]
    b = len(c["qo_indptr"]) - 1
    return q.reshape(b, q.shape[0] // b, q.shape[1], q.shape[2])


# ---- layouts of a paged contract (page 16), each as the keyword arguments of Inputs ----

def lay_contract(c):
    return dict(q=c["q"], kv_cache=c["kv"], kv_indptr=c["kv_indptr"],
                kv_indices=c["kv_indices"], kv_last_page_len=c["kv_last_page_len"],
                page_size=page_of(c), qo_indptr=c["qo_indptr"])


def lay_block_table_3d(c):
    page = page_of(c)
    pages = batch_pages(c)
    width = max(len(p) for p in pages) + 2
    return dict(q=c["q"], kv_cache=c["kv"].reshape(-1, page, 576),
                block_table=padded(pages, width, PAD_NEG, np.int32),
                seq_lens=seq_lens(c).astype(np.int32), qo_indptr=c["qo_indptr"])


def lay_block_table_4d(c):
    page = page_of(c)
    pages = batch_pages(c)
    width = max(len(p) for p in pages) + 3
    return dict(q=c["q"], kv_cache=c["kv"].reshape(-1, page, 1, 576), page_size=page,
                block_table=padded(pages, width, PAD_BIG, np.int32),
                seq_lens=seq_lens(c).astype(np.int32), qo_indptr=c["qo_indptr"])


def lay_block_table_int64(c):
    d = lay_block_table_3d(c)
    d.update(block_table=d["block_table"].astype(np.int64),
             seq_lens=d["seq_lens"].astype(np.int64),
             qo_indptr=c["qo_indptr"].astype(np.int64))
    return d


def lay_q4_block_table(c):
    d = lay_block_table_3d(c)
    d.update(q=_q4(c))
    del d["qo_indptr"]
    return d


def lay_q_split(c):
    d = lay_block_table_4d(c)
    q = d.pop("q")
    d.update(q_nope=q[..., :512], q_pe=q[..., 512:])
    return d


def lay_q4_split(c):
    d = lay_block_table_3d(c)
    del d["q"], d["qo_indptr"]
    q = _q4(c)
    d.update(q_nope=np.ascontiguousarray(q[..., :512]), q_pe=np.ascontiguousarray(q[..., 512:]))
    return d


def lay_req_to_token(c):
    rows = token_rows(c)
    width = int(max(len(r) for r in rows)) + 5
    return dict(q=c["q"], kv_cache=kv2d(c), req_to_token=padded(rows, width, PAD_NEG, np.int32),
                seq_lens=seq_lens(c).astype(np.int32), qo_indptr=c["qo_indptr"])


def lay_req_to_token_pool(c):
    p, new_row = pool(c, extra=37, seed=1)
    rows = [new_row[r] for r in token_rows(c)]
    width = int(max(len(r) for r in rows)) + 2
    return dict(q=c["q"], kv_cache=p, req_to_token=padded(rows, width, PAD_BIG, np.int64),
                seq_lens=seq_lens(c).astype(np.int64), qo_indptr=c["qo_indptr"])


def lay_csr_tokens(c):
    rows = token_rows(c)
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int32)
    return dict(q=c["q"], kv_cache=kv2d(c), kv_indptr=indptr,
                kv_indices=np.concatenate(rows).astype(np.int32), qo_indptr=c["qo_indptr"])


def lay_csr_tokens_pool_int64(c):
    p, new_row = pool(c, extra=100, seed=2)
    rows = [new_row[r] for r in token_rows(c)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return dict(q=c["q"], kv_cache=p[:, None, :], kv_indptr=indptr,
                kv_indices=np.concatenate(rows).astype(np.int64),
                qo_indptr=c["qo_indptr"].astype(np.int64))


def lay_csr_pages(c):
    page = page_of(c)
    return dict(q=c["q"], kv_cache=c["kv"].reshape(-1, page, 576), kv_indptr=c["kv_indptr"],
                kv_indices=c["kv_indices"], kv_last_page_len=c["kv_last_page_len"],
                qo_indptr=c["qo_indptr"])


PAGED = [lay_contract, lay_block_table_3d, lay_block_table_4d, lay_block_table_int64,
         lay_q4_block_table, lay_q_split, lay_q4_split, lay_req_to_token, lay_req_to_token_pool,
         lay_csr_tokens, lay_csr_tokens_pool_int64, lay_csr_pages]


@pytest.mark.parametrize("layout", PAGED, ids=lambda f: f.__name__[4:])
def test_paged_layouts(files, layout):
    c = contract(files["paged"])
    kwargs = layout(c)
    inputs = mlaref.Inputs(**kwargs, **_common(c))
    q4 = kwargs.get("q", kwargs.get("q_nope")).ndim == 4
    assert_same_as_file(inputs, files["paged"], q4=q4)


# ---- a contract without a page table (tokens of each batch in turn) ----

FLAT = [lay_req_to_token, lay_req_to_token_pool, lay_csr_tokens, lay_csr_tokens_pool_int64]


@pytest.mark.parametrize("layout", FLAT, ids=lambda f: f.__name__[4:])
def test_flat_layouts(files, layout):
    c = contract(files["flat"])
    inputs = mlaref.Inputs(**layout(c), **_common(c))
    assert_same_as_file(inputs, files["flat"])


def test_flat_contract_as_given(files):
    c = contract(files["flat"])
    inputs = mlaref.Inputs(q=c["q"], kv_cache=c["kv"], kv_indptr=c["kv_indptr"],
                           qo_indptr=c["qo_indptr"], **_common(c))
    assert_same_as_file(inputs, files["flat"])


def test_flat_kv_2d_with_q4(files):
    c = contract(files["flat"])
    inputs = mlaref.Inputs(q=_q4(c), kv_cache=kv2d(c), kv_indptr=c["kv_indptr"], **_common(c))
    assert_same_as_file(inputs, files["flat"], q4=True)


def test_single_token_q4(files):
    """s_q = 1: q [B,1,H,576], a 4-D cache and a block table."""
    c = contract(files["single"])
    d = lay_block_table_4d(c)
    d.update(q=_q4(c))
    del d["qo_indptr"]
    inputs = mlaref.Inputs(**d, **_common(c))
    o, lse = mlaref.run("aiter-a8w8-ps", inputs)
    assert tuple(o.shape) == (2, 1, 16, 512) and tuple(lse.shape) == (2, 16, 1)
    assert_same_as_file(inputs, files["single"], q4=True)


def test_fnuz_cache_with_block_table(files):
    """uint8 codes with kv_format = e4m3fnuz (the MI300 cache) in a 3-D paged cache."""
    c = contract(files["fnuz"])
    assert kv_format(c) == "e4m3fnuz"
    d = lay_block_table_3d(c)
    inputs = mlaref.Inputs(**d, **_common(c))
    assert inputs.kv_format == "e4m3fnuz"
    assert_same_as_file(inputs, files["fnuz"], recipes=("aiter-a8w8-ps",))


def test_split_fnuz_q_is_the_whole_q(files, tmp_path):
    """fp8 Q in the MI300 format (uint8 codes, q_format e4m3fnuz) as q_nope + q_pe (AITER's
    layout): the same model outputs as the whole q, bit for bit; the file it writes conforms."""
    c = contract(files["paged"])
    q = mlaref.encode(mlaref.decode(c["q"], "bf16"), "e4m3fnuz")
    d = lay_block_table_3d(c)
    d.pop("q")
    common = dict(_common(c), q_format="e4m3fnuz", q_scale=1.0)
    whole = mlaref.Inputs(q=q, **d, **common)
    parts = dict(q_nope=np.ascontiguousarray(q[..., :512]), q_pe=np.ascontiguousarray(q[..., 512:]))
    split = mlaref.Inputs(**parts, **d, **common)
    assert split.q_format == "e4m3fnuz"
    for a, b in zip(mlaref.run("fp32-seq", whole), mlaref.run("fp32-seq", split)):
        assert np.array_equal(a, b)
    path = str(tmp_path / "split.safetensors")
    mlaref.write_inputs(path, **parts, **d, **common)
    r = cli("inputs", "check", path)
    assert r.returncode == 0 and "conforms" in r.stdout, r.stdout + r.stderr


def test_torch_layouts(files):
    """torch tensors in, torch tensors out, with the bits of the numpy path."""
    import torch

    c = contract(files["paged"])
    d = lay_q4_block_table(c)
    q = d.pop("q")
    td = {k: torch.from_numpy(v) for k, v in d.items()}
    td["q"] = torch.from_numpy(q.view(np.int16)).view(torch.bfloat16)
    inputs = mlaref.Inputs(**td, kv_scale=torch.from_numpy(c["kv_scale"]), kv_format="e4m3")
    o, lse = mlaref.run("aiter-a8w8-ps", inputs)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.bfloat16
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (3, 16, 2)
    assert_same_as_file(inputs, files["paged"], q4=True)


def test_save_writes_the_contract(files, tmp_path):
    """save() of a layout writes a file the command takes, with the same bits."""
    from helpers import cli

    c = contract(files["paged"])
    inputs = mlaref.Inputs(**lay_req_to_token_pool(c), **_common(c))
    path = str(tmp_path / "saved.safetensors")
    inputs.save(path)
    r = cli("inputs", "check", path)
    assert r.returncode == 0, r.stderr
    assert_same_as_file(mlaref.load(path), files["paged"])


# ---- zero copy ----

def test_contiguous_buffers_are_not_copied(files):
    c = contract(files["paged"])
    kv = kv2d(c)  # [N,576] uint8 codes, contiguous
    q = c["q"]
    d = lay_req_to_token(c)
    inputs = mlaref.Inputs(**d, **_common(c))
    assert inputs.address("kv") == kv.ctypes.data
    assert inputs.address("q") == q.ctypes.data
    page = page_of(c)
    kv4 = c["kv"].reshape(-1, page, 1, 576)
    inputs4 = mlaref.Inputs(**lay_block_table_4d(c), **_common(c))
    assert inputs4.address("kv") == c["kv"].ctypes.data == kv4.ctypes.data


def test_torch_buffers_are_not_copied(files):
    import torch

    c = contract(files["paged"])
    kv = torch.from_numpy(kv2d(c))
    q = torch.from_numpy(c["q"].view(np.int16)).view(torch.bfloat16)
    d = lay_req_to_token(c)
    d.update(q=q, kv_cache=kv)
    inputs = mlaref.Inputs(**d, **_common(c))
    assert inputs.address("kv") == kv.data_ptr()
    assert inputs.address("q") == q.data_ptr()


def test_non_contiguous_is_copied_once(files):
    """A strided cache (every other row of a bigger buffer) is made contiguous: other memory,
    the same bits."""
    c = contract(files["paged"])
    kv = kv2d(c)
    big = np.full((2 * kv.shape[0], 576), 0x7F, dtype=np.uint8)
    big[::2] = kv
    strided = big[::2]
    assert not strided.flags.c_contiguous
    d = lay_req_to_token(c)
    d.update(kv_cache=strided)
    inputs = mlaref.Inputs(**d, **_common(c))
    assert inputs.address("kv") not in (0, strided.ctypes.data, big.ctypes.data)
    assert_same_as_file(inputs, files["paged"], recipes=("aiter-a8w8-ps",))
