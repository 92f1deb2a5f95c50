"""mlaref.check and mlaref.testing: the command's verdict, text and JSON; the lse rule; the
worst elements."""

import json
import math

import numpy as np
import pytest

import mlaref
from helpers import cli, contract

R = "aiter-a8w8-ps"


def _flip(o: np.ndarray, where) -> np.ndarray:
    """o with one bf16 element's exponent bit flipped (a wrong element)."""
    bad = o.copy()
    bad[where] ^= np.uint16(0x0100)
    return bad


def test_check_is_the_command(files, tmp_path):
    """str(result) and to_json() are what `mlaref check` prints for the same output file."""
    path = files["paged"]
    x = mlaref.load(path)
    o, lse = mlaref.run(R, x)
    bad = _flip(o, (3, 5, 200))
    out = str(tmp_path / "out.safetensors")
    mlaref.save_tensors(out, {"o": bad, "lse": lse})
    rules = ["exact", "fa3", "budget"]
    res = mlaref.check(bad, x, R, lse=lse, rules=rules, label=out)
    args = ["check", "--inputs", path, "--output", out, "--recipe", R]
    for r in rules:
        args += ["--rule", r]
    text = cli(*args)
    js = cli(*args, "--json")
    assert text.returncode == js.returncode == res.exit_code == 1
    assert str(res) == text.stdout
    assert json.loads(res.to_json()) == json.loads(js.stdout)
    assert not res.passed


def test_result_fields(files):
    x = mlaref.load(files["paged"])
    o, lse = mlaref.run(R, x)
    res = mlaref.check(o, x, R, lse=lse, rules=["exact", "fa3"])
    assert res.passed and res.exit_code == 0
    assert [(v.tensor, v.name, v.verdict) for v in res.rules] == [
        ("o", "exact", "pass"), ("o", "fa3", "pass"), ("lse", "exact", "pass"),
        ("lse", "fa3", "pass")]
    fa3 = res.rules[1]
    assert fa3.measured is not None and fa3.limit is not None and fa3.measured <= fa3.limit
    bad = _flip(o, (4, 7, 301))  # token 4 is batch 2's first
    res = mlaref.check(bad, x, R, rules=["exact", "fa3"])
    assert not res.passed and res.exit_code == 1
    w = res.worst
    assert (w.tensor, w.batch, w.token, w.head, w.column) == ("o", 2, 4, 7, 301)
    assert w.got == float(mlaref.bf16_to_float32(bad[4, 7, 301]))
    assert w.expected == float(mlaref.bf16_to_float32(o[4, 7, 301]))
    assert "reproduce batch 2 token 4 head 7 column 301" in str(res)
    assert res.rules[0].verdict == "FAIL" and res.rules[0].name == "exact"


def test_default_rules_are_fa3_and_structure(files):
    x = mlaref.load(files["paged"])
    o, lse = mlaref.run(R, x)
    res = mlaref.check(o, x, R)
    assert [(v.tensor, v.name) for v in res.rules] == [("o", "fa3"), ("o", "structure")]
    res = mlaref.check(o, x, R, lse=lse)
    assert [(v.tensor, v.name) for v in res.rules] == [
        ("o", "fa3"), ("o", "structure"), ("lse", "fa3"), ("lse", "structure")]
    assert res.passed


def test_lse_rule_catches_a_wrong_lse_and_a_wrong_base(files):
    x = mlaref.load(files["paged"])
    o, lse = mlaref.run(R, x)
    assert mlaref.check(o, x, R, lse=lse).passed
    wrong = lse.copy()
    wrong[2, 9] += 0.1
    res = mlaref.check(o, x, R, lse=wrong)
    assert not res.passed
    assert any(v.tensor == "lse" and v.verdict == "FAIL" for v in res.rules)
    assert not any(v.tensor == "o" and v.verdict == "FAIL" for v in res.rules)
    assert (res.worst.tensor, res.worst.token, res.worst.head) == ("lse", 2, 9)
    base2 = (lse * np.float32(1 / math.log(2))).astype(np.float32)
    assert not mlaref.check(o, x, R, lse=base2).passed
    # a kernel whose recipe returns lse in base 2 (out.lse_base = 2): the base-2 lse passes, the
    # natural one fails
    s2 = {"out.lse_base": "2"}
    assert mlaref.check(o, x, R, lse=base2, set=s2, rules=["exact", "fa3"]).passed
    assert not mlaref.check(o, x, R, lse=lse, set=s2).passed
    # an lse of another type: the message says how to leave it out in Python's words
    with pytest.raises(mlaref.InputError, match=r"lse must be F32 or F64 \(lse=None checks o"):
        mlaref.check(o, x, R, lse=lse.astype(np.float16))


def test_4d_output_and_lse(files):
    """o [B,s_q,H,512] and lse [B,H,s_q] (FlashMLA's layouts) from a 4-D q are checked as such."""
    import torch

    c = contract(files["paged"])
    t = {k: torch.from_numpy(v) for k, v in c.items() if k not in ("q", "__metadata__")}
    q = torch.from_numpy(c["q"].view(np.int16)).view(torch.bfloat16).reshape(3, 2, 16, 576)
    x = mlaref.Inputs(q=q, kv_cache=t["kv"], kv_format="e4m3", kv_scale=t["kv_scale"],
                      kv_indptr=t["kv_indptr"], kv_indices=t["kv_indices"],
                      kv_last_page_len=t["kv_last_page_len"], page_size=16)
    o, lse = mlaref.run(R, x)
    assert tuple(o.shape) == (3, 2, 16, 512) and tuple(lse.shape) == (3, 16, 2)
    res = mlaref.check(o, x, R, lse=lse, rules=["exact"])
    assert res.passed, str(res)
    assert not mlaref.check(o, x, R, lse=lse.transpose(1, 2).contiguous().reshape(3, 16, 2),
                            rules=["exact"]).passed


def test_compare_places_a_bhs_lse_element(files, tmp_path):
    """`mlaref compare --tensor lse` on FlashMLA's [B, H, s_q] lse names batch, token and head of
    the element that differs (token: the batch's first plus the query index), no column."""
    x = mlaref.load(files["paged"])
    _, lse = mlaref.run(R, x)  # [T, H], T = 3 batches x 2 query tokens
    bhs = np.ascontiguousarray(lse.reshape(3, 2, 16).transpose(0, 2, 1))
    wrong = bhs.copy()
    wrong[1, 5, 1] += np.float32(0.01)  # batch 1, head 5, query 1: token 3
    a, b = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    mlaref.save_tensors(a, {"lse": wrong})
    mlaref.save_tensors(b, {"lse": bhs})
    r = cli("compare", a, b, "--tensor", "lse", "--inputs", files["paged"])
    assert r.returncode == 1 and "reproduce batch 1 token 3 head 5: " in r.stdout, r.stdout


def test_assert_mla_close(files):
    x = mlaref.load(files["paged"])
    o, lse = mlaref.run(R, x)
    res = mlaref.testing.assert_mla_close(o, x, recipe=R, lse=lse, rules=["exact", "budget"])
    assert res.passed
    bad = o.copy()
    bad[1] = 0x3F80  # every element of token 1 is 1.0 (bf16 0x3F80)
    with pytest.raises(AssertionError) as e:
        mlaref.testing.assert_mla_close(bad, x, recipe=R, lse=lse)
    msg = str(e.value)
    assert "rule fa3" in msg and "FAIL" in msg and "reproduce batch 0 token 1" in msg


def test_unwritten_elements_fail(files):
    """An element still holding the all-ones pattern was never written: every rule fails it."""
    import torch

    x = mlaref.load(files["paged"], framework="torch")
    o, _ = mlaref.run(R, x)
    o = o.clone()
    o.view(torch.int16)[2, 3, 4] = -1
    res = mlaref.check(o, x, R, rules=["allclose:1,1"])
    assert not res.passed
    assert res.worst.token == 2 and res.worst.column == 4


def test_check_options(files):
    """truth from bf16 needs kv_bf16; threads do not change the verdict."""
    path = files["paged"]
    x = mlaref.load(path)
    o, lse = mlaref.run(R, x)
    a = mlaref.check(o, x, R, threads=1)
    b = mlaref.check(o, x, R, threads=0)
    assert a.to_json() == b.to_json()
    with pytest.raises(mlaref.InputError):
        mlaref.check(o, x, R, truth="bf16")
    with pytest.raises(mlaref.InputError, match="dequantized"):
        mlaref.check(o, x, R, truth="nope")
