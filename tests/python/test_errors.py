"""Bad input raises mlaref.InputError (a ValueError) with the command's one line: the same inputs
written as given (mlaref.write_inputs) and read by the command give the same text after
"mlaref CMD: "."""

import re

import numpy as np
import pytest

import mlaref
from helpers import batch_pages, cli, contract, kv2d, padded, page_of, seq_lens, token_rows


def _paged(c):
    page = page_of(c)
    pages = batch_pages(c)
    return dict(q=c["q"], kv_cache=c["kv"].reshape(-1, page, 576), kv_format="e4m3",
                kv_scale=c["kv_scale"],
                block_table=padded(pages, max(len(p) for p in pages) + 1, -1, np.int32),
                seq_lens=seq_lens(c).astype(np.int32), qo_indptr=c["qo_indptr"])


def _req(c):
    rows = token_rows(c)
    return dict(q=c["q"], kv_cache=kv2d(c), kv_format="e4m3", kv_scale=c["kv_scale"],
                req_to_token=padded(rows, max(len(r) for r in rows), -1, np.int32),
                seq_lens=seq_lens(c).astype(np.int32), qo_indptr=c["qo_indptr"])


def case_no_q(c):
    d = _paged(c)
    del d["q"]
    return d


def case_kv_575(c):
    d = _req(c)
    d["kv_cache"] = np.ascontiguousarray(kv2d(c)[:, :575])
    return d


def case_block_table_entry_out_of_range(c):
    d = _paged(c)
    d["block_table"][1, 2] = 10**6
    return d


def case_seq_len_past_the_table(c):
    d = _paged(c)
    d["seq_lens"][2] = d["block_table"].shape[1] * page_of(c) + 1
    return d


def case_float_seq_lens(c):
    d = _paged(c)
    d["seq_lens"] = d["seq_lens"].astype(np.float32)
    return d


def case_req_to_token_row_out_of_range(c):
    d = _req(c)
    d["req_to_token"][0, 3] = d["kv_cache"].shape[0]
    return d


def case_q4_with_wrong_qo_indptr(c):
    d = _paged(c)
    d["q"] = c["q"].reshape(3, 2, 16, 576)
    d["qo_indptr"] = np.array([0, 1, 3, 6], dtype=np.int32)
    return d


def case_q_split_widths(c):
    d = _paged(c)
    q = d.pop("q")
    d.update(q_nope=np.ascontiguousarray(q[..., :500]), q_pe=np.ascontiguousarray(q[..., 500:]))
    return d


def case_csr_indptr_decreasing(c):
    rows = token_rows(c)
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int32)
    indptr[1], indptr[2] = indptr[2], indptr[1]
    return dict(q=c["q"], kv_cache=kv2d(c), kv_format="e4m3", kv_scale=c["kv_scale"],
                kv_indptr=indptr, kv_indices=np.concatenate(rows).astype(np.int32),
                qo_indptr=c["qo_indptr"])


def case_nan_scale(c):
    d = _paged(c)
    d["k_scale"] = float("nan")
    return d


def case_nonpositive_sm_scale(c):
    d = _paged(c)
    d["sm_scale"] = -0.5
    return d


def case_q_5d(c):
    d = _paged(c)
    d["q"] = c["q"].reshape(1, 3, 2, 16, 576)
    return d


def case_block_table_with_kv_last_page_len(c):
    d = _paged(c)
    d["kv_last_page_len"] = np.ones(3, dtype=np.int32)
    return d


CASES = [case_q_5d, case_block_table_with_kv_last_page_len, case_no_q, case_kv_575,
         case_block_table_entry_out_of_range, case_seq_len_past_the_table, case_float_seq_lens,
         case_req_to_token_row_out_of_range, case_q4_with_wrong_qo_indptr, case_q_split_widths,
         case_csr_indptr_decreasing, case_nan_scale, case_nonpositive_sm_scale]


@pytest.mark.parametrize("case", CASES, ids=lambda f: f.__name__[5:])
def test_bad_layouts_raise_the_commands_text(files, tmp_path, case):
    """The line of `mlaref check --inputs BAD`, which reads every layout."""
    c = contract(files["paged"])
    kwargs = case(c)
    path = str(tmp_path / "bad.safetensors")
    mlaref.write_inputs(path, **kwargs)
    with pytest.raises(mlaref.InputError) as e:
        mlaref.Inputs(**kwargs, label=path)
    assert isinstance(e.value, ValueError)
    out = str(tmp_path / "o.safetensors")
    mlaref.save_tensors(out, {"o": np.zeros((6, 16, 512), dtype=np.uint16)})
    r = cli("check", "--inputs", path, "--output", out, "--recipe", "aiter-a8w8-ps")
    assert r.returncode == 2, r.stdout
    prefix = "mlaref check: "
    assert r.stderr.startswith(prefix) and r.stderr.count("\n") == 1, r.stderr
    # byte offsets count from the file's start in a file, from the tensor's in memory
    assert _no_offsets(str(e.value)) == _no_offsets(r.stderr[len(prefix):].rstrip("\n"))
    assert "\n" not in str(e.value)


def _no_offsets(line: str) -> str:
    return re.sub(r"byte offset \d+", "byte offset _", line)


# ---- what only Python sees ----

def test_uint8_cache_needs_kv_format(files):
    c = contract(files["paged"])
    d = _req(c)
    del d["kv_format"]
    with pytest.raises(mlaref.InputError) as e:
        mlaref.Inputs(**d)
    assert str(e.value) == "inputs: kv_cache is uint8: kv_format (e4m3 or e4m3fnuz) is required"


def test_uint8_q_needs_q_format(files):
    c = contract(files["paged"])
    d = _req(c)
    d.update(q=np.zeros(c["q"].shape, dtype=np.uint8), q_scale=1.0)
    with pytest.raises(mlaref.InputError, match="q is uint8: q_format"):
        mlaref.Inputs(**d)


def test_kv_format_disagrees_with_the_type(files):
    import torch

    c = contract(files["paged"])
    d = _req(c)
    d["kv_cache"] = torch.zeros(d["kv_cache"].shape, dtype=torch.bfloat16)
    with pytest.raises(mlaref.InputError) as e:
        mlaref.Inputs(**d)
    assert str(e.value) == "inputs: kv_format is e4m3 but kv_cache is torch.bfloat16 (bf16)"
    if hasattr(torch, "float8_e4m3fnuz"):  # torch 2.x
        d["kv_cache"] = torch.from_numpy(kv2d(c)).view(torch.float8_e4m3fnuz)
        with pytest.raises(mlaref.InputError, match="kv_format is e4m3 but kv_cache is"):
            mlaref.Inputs(**d)


def test_page_size_disagrees_with_the_cache(files):
    c = contract(files["paged"])
    d = _paged(c)
    with pytest.raises(mlaref.InputError) as e:
        mlaref.Inputs(**d, page_size=32)
    assert str(e.value) == ("inputs: page_size is 32 but kv_cache [14,16,576] has pages of 16 "
                            "tokens (its second dimension)")


@pytest.mark.parametrize("bad", ["torch_int16", "torch_bool", "numpy_int8", "numpy_uint32"])
def test_unsupported_types(files, bad):
    import torch

    c = contract(files["paged"])
    d = _paged(c)
    x = {"torch_int16": torch.zeros(3, dtype=torch.int16),
         "torch_bool": torch.ones(3, dtype=torch.bool),
         "numpy_int8": np.zeros(3, dtype=np.int8),
         "numpy_uint32": np.zeros(3, dtype=np.uint32)}[bad]
    d["seq_lens"] = x
    with pytest.raises(mlaref.InputError, match="inputs: seq_lens is .*: mlaref reads"):
        mlaref.Inputs(**d)


# ---- recipes, rules, outputs, specs: the command's lines ----

def test_recipe_errors_are_the_commands(files, tmp_path):
    path = files["paged"]
    x = mlaref.load(path)
    out = str(tmp_path / "o.safetensors")
    for recipe, sets in (("no-such-recipe", None), (R_OK, ["split.count=0"]),
                         (R_OK, ["no.key=1"])):
        with pytest.raises(mlaref.RecipeError) as e:
            mlaref.run(recipe, x, set=sets)
        args = ["run", "--recipe", recipe, "--inputs", path, "--out", out]
        for s in sets or []:
            args += ["--set", s]
        r = cli(*args)
        assert r.returncode == 2
        assert str(e.value) == r.stderr[len("mlaref run: "):].rstrip("\n")
    assert isinstance(e.value, mlaref.InputError)


R_OK = "triton-fp8-split"


def test_recipe_from_text_and_file(files, tmp_path):
    x = mlaref.load(files["paged"])
    text = "base = triton-fp8-split\nsplit.count = 3\n"
    f = tmp_path / "r.recipe"
    f.write_text(text)
    a = mlaref.run(text, x)
    b = mlaref.run(str(f), x)
    c = mlaref.run(R_OK, x, set={"split.count": 3})
    d = mlaref.run(R_OK, x)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert all(np.array_equal(p, q) for p, q in zip(a, c))
    assert not np.array_equal(a[0], d[0])


def test_check_errors_are_the_commands(files, tmp_path):
    path = files["paged"]
    x = mlaref.load(path)
    o, _ = mlaref.run("aiter-a8w8-ps", x)
    out = str(tmp_path / "short.safetensors")
    short = np.ascontiguousarray(o[:, :, :500])
    mlaref.save_tensors(out, {"o": short})
    with pytest.raises(mlaref.InputError) as e:
        mlaref.check(short, x, "aiter-a8w8-ps", label=out)
    r = cli("check", "--inputs", path, "--output", out, "--recipe", "aiter-a8w8-ps")
    assert r.returncode == 2
    assert str(e.value) == r.stderr[len("mlaref check: "):].rstrip("\n")
    with pytest.raises(mlaref.InputError) as e:
        mlaref.check(o, x, "aiter-a8w8-ps", rules=["fa3:x"])
    r = cli("check", "--inputs", path, "--output", out, "--recipe", "aiter-a8w8-ps",
            "--rule", "fa3:x")
    assert str(e.value) == r.stderr[len("mlaref check: "):].rstrip("\n")


def test_gen_errors_are_the_commands(tmp_path):
    spec = "bs=2,kv=100,fmt=e9m9"
    with pytest.raises(mlaref.InputError) as e:
        mlaref.gen(spec)
    r = cli("gen", "--shape", spec, "--out", str(tmp_path / "x.safetensors"))
    assert r.returncode == 2
    assert str(e.value) == r.stderr[len("mlaref gen: "):].rstrip("\n")


def test_load_errors(tmp_path):
    with pytest.raises(mlaref.InputError, match="no-such-file"):
        mlaref.load(str(tmp_path / "no-such-file.safetensors"))


@pytest.mark.parametrize("bad", [dict(causal="no"), dict(causal=2), dict(kv_format="fp8"),
                                 dict(kv_format="e5m2"), dict(kv_format=None)])
def test_python_arguments(files, bad):
    """What the library cannot see: causal must be a bool; kv_format names e4m3, e4m3fnuz or
    bf16 ("fp8" is refused: OCP on NVIDIA, FNUZ on MI300) and is required for uint8 codes."""
    kw = _paged(contract(files["paged"]))
    kw.update(bad)
    with pytest.raises(mlaref.InputError) as e:
        mlaref.Inputs(**kw)
    key = next(iter(bad))
    assert key in str(e.value) and "\n" not in str(e.value)


def test_decode_matches_the_truths_values(files):
    """mlaref.decode gives the values the model reads: e4m3 0x38 is 1.0, 0x7F NaN; FNUZ's 0x80
    NaN; bf16 0x3F80 1.0; a torch tensor gives a torch tensor."""
    import torch

    v = mlaref.decode(np.array([0x38, 0x7F, 0xB8], dtype=np.uint8), "e4m3")
    assert v[0] == 1.0 and np.isnan(v[1]) and v[2] == -1.0
    assert np.isnan(mlaref.decode(np.array([0x80], dtype=np.uint8), "e4m3fnuz")[0])
    t = mlaref.decode(torch.tensor([0x3F80], dtype=torch.int16).view(torch.bfloat16), "bf16")
    assert isinstance(t, torch.Tensor) and t.item() == 1.0
    with pytest.raises(mlaref.InputError, match="e4m3 codes are 1-byte"):
        mlaref.decode(np.zeros(2, dtype=np.uint16), "e4m3")
    with pytest.raises(mlaref.InputError, match="is not one of e4m3, "):
        mlaref.decode(np.zeros(2, dtype=np.uint8), "e4m4")


def test_encode_is_the_quantizers_encoder():
    """mlaref.encode: every non-NaN e4m3 and bf16 code back from its value; ties to even, toward
    zero, saturation and overflow as named; fp8 codes as uint8 and bf16 as torch.bfloat16 from a
    torch tensor; bad names and non-float values refused with InputError."""
    import torch

    for fmt, dtype in (("e4m3", np.uint8), ("bf16", np.uint16)):
        codes = np.arange(256 if fmt == "e4m3" else 65536, dtype=np.int64).astype(dtype)
        vals = mlaref.decode(codes, fmt)
        keep = ~np.isnan(vals)
        back = mlaref.encode(vals[keep], fmt, overflow="nonsat")  # bf16's Inf stays Inf
        assert back.dtype == dtype and np.array_equal(back, codes[keep])
    x = np.array([1.0625, 1.1875, 1.1, -1.1, 500.0, -np.inf], dtype=np.float32)
    assert mlaref.encode(x, "e4m3").tolist() == [0x38, 0x3A, 0x39, 0xB9, 0x7E, 0xFE]
    assert mlaref.encode(x, "e4m3", rounding="rtz").tolist() == [0x38, 0x39, 0x38, 0xB8, 0x7E, 0xFE]
    assert mlaref.encode(x[4:5], "e4m3", overflow="nonsat").tolist() == [0x7F]
    assert mlaref.encode(np.array([1.0 + 2.0 ** -9]), "bf16").tolist() == [0x3F80]  # float64
    assert mlaref.encode(np.float32(1.0), "e4m3").shape == ()
    t = mlaref.encode(torch.tensor([1.0, -2.0]), "e4m3")
    assert t.dtype == torch.uint8 and t.tolist() == [0x38, 0xC0]
    b = mlaref.encode(torch.tensor([1.0, 3.0]), "bf16")
    assert b.dtype == torch.bfloat16 and b.float().tolist() == [1.0, 3.0]
    # the names Inputs takes: torch's (e4m3fn, bfloat16), any case
    assert mlaref.encode(x, "e4m3fn").tolist() == mlaref.encode(x, "E4M3").tolist()
    assert mlaref.decode(mlaref.encode(x[:2], "BFloat16"), "bf16").tolist() == [1.0625, 1.1875]
    for bad, text in ((lambda: mlaref.encode(x, "e4m4"), "fmt = 'e4m4' is not one of"),
                      (lambda: mlaref.encode(x, "e4m3", rounding="sr"), "rounding = 'sr'"),
                      (lambda: mlaref.encode(x, "e4m3", overflow="clip"), "overflow = 'clip'"),
                      (lambda: mlaref.encode(t, "e4m3"), "values are torch.uint8")):
        with pytest.raises(mlaref.InputError, match=re.escape(text)):
            bad()
