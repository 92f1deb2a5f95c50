"""What the optional inputs mean: fp8 Q with its q_scale, 128 heads, the output formats, and
sm_scale, k/v/kpe scales and causal, each of which changes the model's output and is caught when
a kernel got it wrong."""

import math

import numpy as np
import pytest

import mlaref
from helpers import as_numpy, batch_pages, contract, padded, page_of, same_bits, seq_lens


def e4m3_decode(codes: np.ndarray, fnuz: bool = False) -> np.ndarray:
    """Values of e4m3 codes (OCP, or FNUZ: bias 8), computed here independently of the library;
    the codes must not be NaN."""
    c = codes.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    e = (c >> 3) & 0xF
    m = (c & 7).astype(np.float64)
    bias = 8 if fnuz else 7
    v = np.where(e == 0, m / 8 * 2.0 ** (1 - bias), (1 + m / 8) * 2.0 ** (e - bias))
    return sign * v


def block_table_kwargs(c):
    """The paged contract c as a 3-D cache with a block table, as Inputs' keyword arguments."""
    page = page_of(c)
    pages = batch_pages(c)
    return dict(kv_cache=c["kv"].reshape(-1, page, 576), kv_format="e4m3",
                kv_scale=c["kv_scale"],
                block_table=padded(pages, max(len(p) for p in pages), -1, np.int32),
                seq_lens=seq_lens(c).astype(np.int32), qo_indptr=c["qo_indptr"])


def fp8_codes(shape, seed: int, fnuz: bool = False) -> np.ndarray:
    """Random e4m3 codes of magnitude below 16 (no NaN; no 0x80, FNUZ's NaN)."""
    rng = np.random.default_rng(seed)
    mag = rng.integers(1, 0x58, size=shape, dtype=np.int64)
    sign = rng.integers(0, 2, size=shape, dtype=np.int64) << 7
    return (mag | sign).astype(np.uint8)


# ---- fp8 Q ----

@pytest.mark.parametrize("fmt", ["e4m3", "e4m3fnuz"])
def test_fp8_q_is_its_values_times_q_scale(files, fmt):
    """fp8 Q codes with q_scale = 2^-3 give the bits of bf16 Q holding decode(code) x q_scale
    (exact in bf16) for recipes that take bf16 Q, and the same truth."""
    c = contract(files["paged"])
    kw = block_table_kwargs(c)
    codes = fp8_codes(c["q"].shape, seed=4, fnuz=fmt == "e4m3fnuz")
    q_scale = 0.125
    values = (e4m3_decode(codes, fnuz=fmt == "e4m3fnuz") * q_scale).astype(np.float32)
    x8 = mlaref.Inputs(q=codes, q_format=fmt, q_scale=q_scale, **kw)
    xb = mlaref.Inputs(q=mlaref.float32_to_bf16(values), **kw)
    assert x8.q_format == fmt and xb.q_format == "bf16"
    assert x8.address("q") == codes.ctypes.data
    for recipe in ("fp32-seq", "aiter-a16w8-ps"):
        o8, l8 = mlaref.run(recipe, x8)
        ob, lb = mlaref.run(recipe, xb)
        assert same_bits(o8, ob), recipe
        assert same_bits(l8, lb), recipe
    t8, tl8 = mlaref.truth(x8)
    tb, tlb = mlaref.truth(xb)
    assert np.array_equal(t8, tb) and np.array_equal(tl8, tlb)


def test_fp8_q_scale_matters_and_is_checked(files):
    """On an fp8-Q recipe: another q_scale gives other bits; each output passes its own check and
    fails the other's."""
    c = contract(files["paged"])
    kw = block_table_kwargs(c)
    codes = fp8_codes(c["q"].shape, seed=6)
    x1 = mlaref.Inputs(q=codes, q_format="e4m3", q_scale=0.125, **kw)
    x2 = mlaref.Inputs(q=codes, q_format="e4m3", q_scale=0.375, **kw)
    o1, l1 = mlaref.run("aiter-a8w8-ps", x1)
    o2, l2 = mlaref.run("aiter-a8w8-ps", x2)
    assert not same_bits(o1, o2)
    assert mlaref.check(o1, x1, "aiter-a8w8-ps", lse=l1, rules=["exact", "fa3"]).passed
    assert not mlaref.check(o1, x2, "aiter-a8w8-ps", lse=l1).passed


def test_fp8_q_needs_q_scale(files):
    c = contract(files["paged"])
    codes = fp8_codes(c["q"].shape, seed=7)
    with pytest.raises(mlaref.InputError, match="q_scale"):
        mlaref.Inputs(q=codes, q_format="e4m3", **block_table_kwargs(c))


# ---- 128 heads ----

def test_128_heads(files):
    """q [T,128,576]: each group of 16 heads gives the bits it gives alone (bf16-Q recipes,
    whose heads are independent); an fp8-Q recipe runs and checks on all 128."""
    c = contract(files["paged"])
    kw = block_table_kwargs(c)
    spec = c["__metadata__"]["mlaref.shape"]
    groups = [np.array(mlaref.gen(spec.replace("seed=7", f"seed={100 + j}")).tensors()["q"])
              for j in range(8)]
    q128 = np.ascontiguousarray(np.concatenate(groups, axis=1))
    x = mlaref.Inputs(q=q128, **kw)
    assert x.H == 128
    for recipe in ("fp32-seq", "aiter-a16w8-ps"):
        o, lse = mlaref.run(recipe, x)
        assert tuple(o.shape) == (q128.shape[0], 128, 512)
        for j, g in enumerate(groups):
            oj, lj = mlaref.run(recipe, mlaref.Inputs(q=g, **kw))
            assert same_bits(o[:, 16 * j:16 * (j + 1)], oj), (recipe, j)
            assert same_bits(lse[:, 16 * j:16 * (j + 1)], lj), (recipe, j)
    o, lse = mlaref.run("aiter-a8w8-ps", x)
    res = mlaref.check(o, x, "aiter-a8w8-ps", lse=lse, rules=["exact", "fa3"])
    assert res.passed, str(res)


# ---- output formats ----

@pytest.mark.parametrize("fmt,np_type", [("fp32", np.float32), ("fp16", np.float16)])
def test_output_formats(files, fmt, np_type):
    x = mlaref.load(files["paged"])
    o, lse = mlaref.run("aiter-a8w8-ps", x, set={"out.format": fmt})
    assert o.dtype == np_type and lse.dtype == np.float32
    res = mlaref.check(o, x, "aiter-a8w8-ps", lse=lse, set={"out.format": fmt},
                       rules=["exact", "fa3"])
    assert res.passed, str(res)
    ob, _ = mlaref.run("aiter-a8w8-ps", x)
    assert ob.dtype == np.uint16  # numpy: bf16 as its bits
    assert not same_bits(mlaref.bf16_to_float32(ob), o.astype(np.float32))


def test_torch_output_types(files):
    import torch

    x = mlaref.load(files["paged"], framework="torch")
    for fmt, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
        o, lse = mlaref.run("aiter-a8w8-ps", x, set={"out.format": fmt})
        assert o.dtype == dt and lse.dtype == torch.float32
        assert mlaref.check(o, x, "aiter-a8w8-ps", lse=lse, set={"out.format": fmt}).passed
    o, lse = mlaref.truth(x)
    assert o.dtype == torch.float64 and tuple(o.shape) == (x.T, x.H, 512)


# ---- sm_scale, k/v/kpe scales, causal ----

def _small(files):
    c = contract(files["small"])  # 2 batches of 3 query tokens, 6 and 9 KV tokens
    return c, dict(q=c["q"], kv_cache=c["kv"], kv_format="e4m3", kv_scale=c["kv_scale"],
                   kv_indptr=c["kv_indptr"], qo_indptr=c["qo_indptr"])


def _variants(kv_scale: float) -> dict:
    return {
        "sm_scale": dict(sm_scale=1 / 12),
        "k_scale": dict(k_scale=2 * kv_scale),
        "v_scale": dict(v_scale=2 * kv_scale),
        "kpe_scale": dict(kpe_scale=8 * kv_scale),
        "causal": dict(causal=False),
    }


def test_explicit_defaults_change_nothing(files):
    c, kw = _small(files)
    s = float(c["kv_scale"][0])
    x0 = mlaref.Inputs(**kw)
    x1 = mlaref.Inputs(**kw, sm_scale=1 / math.sqrt(576), k_scale=s, v_scale=s, kpe_scale=s,
                       causal=True)
    for recipe in ("fp32-seq", "aiter-a8w8-ps"):
        assert all(same_bits(a, b) for a, b in zip(mlaref.run(recipe, x0),
                                                   mlaref.run(recipe, x1)))


NAMES = ["sm_scale", "k_scale", "v_scale", "kpe_scale", "causal"]
# recipes with the KV scales in the operands take every argument; aiter-a8w8-ps folds k_scale into
# the logit scale, so it takes no kpe_scale other than k_scale (test below)
CASES = ([(n, r) for r in ("fp32-seq", "triton-fp8-split") for n in NAMES] +
         [(n, "aiter-a8w8-ps") for n in NAMES if n != "kpe_scale"])


@pytest.mark.parametrize("name,recipe", CASES)
def test_argument_changes_output_and_is_caught(files, name, recipe):
    """The argument changes the model's output and the truth; the model's output with it passes
    the default rule, a kernel's that ignored it fails."""
    c, kw = _small(files)
    base = mlaref.Inputs(**kw)
    var = mlaref.Inputs(**kw, **_variants(float(c["kv_scale"][0]))[name])
    o0, l0 = mlaref.run(recipe, base)
    o1, l1 = mlaref.run(recipe, var)
    assert not same_bits(o0, o1), f"{name} does not change the model's o"
    assert not np.array_equal(mlaref.truth(base)[0], mlaref.truth(var)[0])
    good = mlaref.check(o1, var, recipe, lse=l1)
    assert good.passed, str(good)
    bad = mlaref.check(o0, var, recipe, lse=l0)
    assert not bad.passed, f"a kernel ignoring {name} passes:\n{bad}"
    assert bad.worst is not None


def test_folded_scales_refuse_another_kpe_scale(files):
    c, kw = _small(files)
    x = mlaref.Inputs(**kw, kpe_scale=8 * float(c["kv_scale"][0]))
    with pytest.raises(mlaref.InputError, match="kpe_scale"):
        mlaref.run("aiter-a8w8-ps", x)
    mlaref.run("triton-fp8-split", x)


def test_v_scale_scales_the_truth(files):
    """v_scale = 2 kv_scale doubles the truth's o exactly; k_scale and sm_scale trade places
    (logits = sm_scale x Q.K)."""
    c, kw = _small(files)
    s = float(c["kv_scale"][0])
    t0, lse0 = mlaref.truth(mlaref.Inputs(**kw))
    t1, lse1 = mlaref.truth(mlaref.Inputs(**kw, v_scale=2 * s))
    np.testing.assert_array_equal(t1, 2 * t0)
    np.testing.assert_array_equal(lse1, lse0)
    ta, _ = mlaref.truth(mlaref.Inputs(**kw, sm_scale=2 / 24, kpe_scale=s))
    tb, _ = mlaref.truth(mlaref.Inputs(**kw, k_scale=2 * s, kpe_scale=2 * s))
    np.testing.assert_allclose(ta, tb, rtol=1e-12, atol=1e-14)


def test_causal_masks_the_last_tokens(files):
    """Causal (the default): token i of a batch's n sees its first L - (n - 1 - i) KV tokens;
    not causal: all L. The last token sees all L either way."""
    c, kw = _small(files)
    o, _ = mlaref.truth(mlaref.Inputs(**kw, causal=False))
    oc, _ = mlaref.truth(mlaref.Inputs(**kw))
    assert as_numpy(o).shape == (c["q"].shape[0], 16, 512)
    qo = c["qo_indptr"]
    for b in range(len(qo) - 1):
        last = qo[b + 1] - 1
        np.testing.assert_array_equal(o[last], oc[last])
        for t in range(qo[b], last):
            assert not np.array_equal(o[t], oc[t]), (b, t)


# ---- where the scales enter: recipe keys a kernel can get wrong ----

PLACEMENTS = [
    # (recipe, the kernel's key, what the recipe claims), inputs with distinct k/v scales
    ("triton-fp8-split", {"v.scale_at": "merged"}, {}),
    ("triton-fp8-split", {"kv.scale_at": "folded"}, {}),
    # one rounding of the logit scale instead of three moves o by an fp32 ulp or so: fp32 o shows it
    ("aiter-a8w8-ps", {"logit.scale_precision": "fp64", "out.format": "fp32"},
     {"out.format": "fp32"}),
]


@pytest.mark.parametrize("recipe,kernel,claim", PLACEMENTS,
                         ids=lambda v: ",".join(f"{k}={w}" for k, w in v.items())
                         if isinstance(v, dict) else v)
def test_scale_placement_changes_bits_and_exact_catches_it(files, recipe, kernel, claim):
    """A kernel that places a scale elsewhere than its recipe says computes other bits, which
    the exact rule catches (the default fa3 may pass them: the placements differ by roundings)."""
    c, kw = _small(files)
    s = float(c["kv_scale"][0])
    x = None
    for sm in np.linspace(0.05, 0.3, 40):  # an sm_scale for which the placements' roundings differ
        x = mlaref.Inputs(**kw, sm_scale=sm, k_scale=0.7 * s, v_scale=1.3 * s, kpe_scale=0.7 * s)
        if not same_bits(mlaref.run(recipe, x, set=kernel)[0], mlaref.run(recipe, x, set=claim)[0]):
            break
    o, lse = mlaref.run(recipe, x, set=kernel)
    assert not same_bits(o, mlaref.run(recipe, x, set=claim)[0]), f"{kernel} changes no bit"
    assert mlaref.check(o, x, recipe, lse=lse, set=kernel, rules=["exact"]).passed
    bad = mlaref.check(o, x, recipe, lse=lse, set=claim, rules=["exact"])
    assert not bad.passed and bad.worst is not None
