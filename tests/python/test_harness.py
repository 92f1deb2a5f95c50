"""mlaref.harness: Python functions as the report's kernels (docs/python.md, "Your kernel in the
report"). One report of the edge suite's quick cells runs five kernels: a correct plain torch
attention, one that drops each query's last KV token, one that declines the batches of three,
one whose `supports` declines q_len > 1, and one that raises ValueError. Each cell's verdict and
reason, the counts, the exit code and summary.json (against its schema where jsonschema is) are
checked; then a baseline and the kernels' own mistakes (a bad recipe, a bad name)."""

import json
import math
import os

import numpy as np
import pytest
import torch

import mlaref
from mlaref.harness import Kernel

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reports",
                      "summary.schema.json")
QUICK = ["bs1_kv1", "bs1_kv0", "bs2_kv33", "bs3_kv1000", "q4_kv100", "q4_kv3"]  # q_len 4: q4_*


def attention(inputs: mlaref.Inputs, drop_last: bool = False):
    """MLA decode in plain torch fp32 from the dequantized KV, over the contract's unpaged layout
    (the edge suite's quick cells): each query sees its first L - (n - 1 - i) KV tokens (causal),
    sm_scale 1/sqrt(576). drop_last: a wrong kernel, blind to each query's last token."""
    t = inputs.tensors()
    meta = t["__metadata__"]
    assert "kv_indices" not in t, "a paged cell: this reference reads the unpaged layout only"
    kv = mlaref.decode(t["kv"].reshape(-1, 576), meta["mlaref.format.kv"]) * t["kv_scale"][0]
    q = t["q"].float()
    qo, kvp = t["qo_indptr"].tolist(), t["kv_indptr"].tolist()
    scale = 1.0 / math.sqrt(576.0)
    o = torch.zeros(inputs.T, inputs.H, 512, dtype=torch.float32)
    lse = torch.full((inputs.T, inputs.H), -math.inf, dtype=torch.float32)
    for b in range(inputs.B):
        n, length = qo[b + 1] - qo[b], kvp[b + 1] - kvp[b]
        for i in range(n):
            seen = length - (n - 1 - i) - (1 if drop_last else 0)
            if seen <= 0:
                continue
            k = kv[kvp[b]:kvp[b] + seen]
            s = (q[qo[b] + i] @ k.T) * scale  # [H, seen]
            lse[qo[b] + i] = torch.logsumexp(s, dim=1)
            o[qo[b] + i] = torch.softmax(s, dim=1) @ k[:, :512]
    return o, lse


def declines_bs3(inputs):
    """Runs batches of one or two; declines larger ones."""
    if inputs.B >= 3:
        raise mlaref.Unsupported(f"batches of {inputs.B} are not implemented")
    return mlaref.run("fp32-seq", inputs)


def raises(inputs):
    raise ValueError(f"bad stride for {inputs.T} tokens\nsecond line")


KERNELS = [
    Kernel("torch", attention, recipe="fp32-seq"),
    Kernel("drop_last", lambda i: attention(i, drop_last=True), recipe="fp32-seq"),
    Kernel("unsup", declines_bs3, recipe="fp32-seq", rules="exact"),
    Kernel("decode_only", lambda i: attention(i)[0].double(), recipe="fp32-seq",
           supports=lambda c: c.q_len == 1 or f"q_len {c.q_len}: decode only"),
    Kernel("raises", raises, recipe="fp32-seq"),
]


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    """The report of the five kernels on the edge suite's quick cells, kernels alone."""
    out = tmp_path_factory.mktemp("harness") / "report"
    return mlaref.harness.report(KERNELS, suite="edge", out=out, recipes="none", quick=True)


def by_cell(summary, kernel):
    return {c.shape: c for c in summary.cells if c.kernel == kernel}


def test_correct_kernel_passes(summary):
    cells = by_cell(summary, "torch")
    assert sorted(cells) == sorted(QUICK)
    for c in cells.values():
        assert (c.verdict, c.reason) == ("pass", ""), c
        assert [(r["tensor"], r["rule"], r["verdict"]) for r in c.rules] == [
            ("o", "fa3", "pass"), ("o", "structure", "pass"), ("lse", "fa3", "pass"),
            ("lse", "structure", "pass")]


def test_broken_kernel_fails(summary):
    cells = by_cell(summary, "drop_last")
    assert cells["bs1_kv0"].verdict == "pass"  # no KV token to drop: o is 0 either way
    for name in ("bs1_kv1", "bs2_kv33", "bs3_kv1000", "q4_kv100", "q4_kv3"):
        c = cells[name]
        assert c.verdict == "fail", c
        assert c.reason.startswith(f"kernel drop_last, cell {name}: rule fa3 FAIL: "), c.reason
        assert "reproduce batch " in c.reason
        fa3 = c.rules[0]
        assert fa3["verdict"] == "FAIL" and fa3["measured"] > fa3["limit"]


def test_unsupported_skips(summary):
    cells = by_cell(summary, "unsup")
    assert cells["bs3_kv1000"].verdict == "skipped"
    assert cells["bs3_kv1000"].reason == ("kernel unsup, cell bs3_kv1000: batches of 3 are not "
                                          "implemented")
    assert cells["bs3_kv1000"].rules == []
    for name in set(QUICK) - {"bs3_kv1000"}:  # the model itself: exact holds too
        assert cells[name].verdict == "pass", cells[name]
        assert [r["rule"] for r in cells[name].rules] == ["fa3", "structure", "exact", "fa3",
                                                          "structure", "exact"]


def test_supports_skips_without_calling(summary):
    cells = by_cell(summary, "decode_only")
    for name in ("q4_kv100", "q4_kv3"):
        assert cells[name].verdict == "skipped"
        assert cells[name].reason == f"kernel decode_only, cell {name}: q_len 4: decode only"
    for name in ("bs1_kv1", "bs1_kv0", "bs2_kv33", "bs3_kv1000"):  # float64 o written as fp32
        assert cells[name].verdict == "pass", cells[name]


def test_exception_is_an_error(summary):
    cells = by_cell(summary, "raises")
    assert [c.verdict for c in cells.values()] == ["error"] * 6
    c = cells["q4_kv100"]
    assert c.reason == ("kernel raises, cell q4_kv100: ValueError: bad stride for 8 tokens "
                        "second line")


def test_three_values_is_an_error_that_says_so(tmp_path):
    k = Kernel("three", lambda i: (*mlaref.run("fp32-seq", i), None), recipe="fp32-seq")
    s = mlaref.harness.report(k, out=tmp_path, recipes="none", quick=True)
    c = s.cells[0]
    assert c.verdict == "error" and c.reason == (
        f"kernel three, cell {c.shape}: ValueError: fn returned 3 values: o, or (o, lse)"), c


def test_counts_and_exit_code(summary):
    assert summary.exit_code == 1 and not summary.passed
    assert len(summary.cells) == 30
    assert len(summary.skipped_cells) == 3
    assert {(c.kernel, c.shape) for c in summary.skipped_cells} == {
        ("unsup", "bs3_kv1000"), ("decode_only", "q4_kv100"), ("decode_only", "q4_kv3")}
    assert len(summary.failed_cells) == 5 + 6
    assert all(c.verdict in ("fail", "error") for c in summary.failed_cells)
    assert "11 failed" in repr(summary) and "3 skipped" in repr(summary)


def test_summary_json(summary):
    d = summary.data
    assert summary.path.endswith("summary.json") and os.path.isfile(summary.path)
    assert d["failures"] == 11 and d["skipped"] == 3
    skipped = [c for c in d["cells"] if c["kernel"].get("verdict") == "skipped"]
    assert len(skipped) == 3 and not any(c["pass"] for c in skipped)
    assert all("o_sha256" not in c for c in skipped)
    assert [k["name"] for k in d["kernels"]] == [k.name for k in KERNELS]
    assert all(k["timeout_s"] == 0 for k in d["kernels"])
    assert d["kernels"][2]["rules"] == ["fa3", "structure", "exact"]
    folder = os.path.dirname(summary.path)
    with open(os.path.join(folder, "summary.md"), encoding="utf-8") as f:
        md = f.read()
    assert "## Kernels: 30 cells, 5 failed, 6 errors, 3 skipped" in md
    assert "| skipped |" in md
    try:
        import jsonschema
    except ImportError:  # Debian's python3-jsonschema is optional here; tests/kernel.c needs it
        jsonschema = None
    if jsonschema is not None:
        with open(SCHEMA, encoding="utf-8") as f:
            schema = json.load(f)
        schema.pop("$id")  # its refs are local (#/$defs/...); older jsonschema resolves them
        jsonschema.validate(d, schema)  # against $id, a relative name it cannot fetch


def test_baseline_skip_is_no_regression(summary, tmp_path):
    """Against the first report: a kernel that passed and now skips is no regression, nor one
    that skipped and now fails; one that passed and now fails is."""
    def now(inputs):
        if inputs.B == 2:
            raise mlaref.Unsupported("not today")
        o, lse = attention(inputs)
        return (o * 1.5, lse) if inputs.B == 3 else (o.numpy(), lse.numpy().astype(np.float64))

    s = mlaref.harness.report([Kernel("torch", now, recipe="fp32-seq"),
                               Kernel("unsup", lambda i: attention(i, True), recipe="fp32-seq")],
                              out=tmp_path, recipes=[], quick=True, baseline=summary.path)
    assert s.exit_code == 1
    assert {(c.kernel, c.shape) for c in s.skipped_cells} == {("torch", "bs2_kv33"),
                                                              ("torch", "q4_kv100")}
    assert not any(line.startswith(("bs2_kv33 / kernel torch", "q4_kv100 / kernel torch",
                                    "bs3_kv1000 / kernel unsup")) for line in s.regressions)
    regressed = sorted(line.split(":")[0] for line in s.regressions
                       if "passed in the baseline" in line)
    assert regressed == ["bs1_kv1 / kernel unsup", "bs2_kv33 / kernel unsup",
                         "bs3_kv1000 / kernel torch", "q4_kv100 / kernel unsup",
                         "q4_kv3 / kernel unsup"]


def test_clean_report_passes(tmp_path):
    s = mlaref.harness.report(Kernel("model", lambda i: mlaref.run("fp32-seq", i),
                                     recipe="fp32-seq", rules=["exact"]),
                              out=tmp_path / "r", recipes="none", quick=True)
    assert s.passed and s.exit_code == 0 and not s.failed_cells and not s.skipped_cells
    assert [c.verdict for c in s.cells] == ["pass"] * 6


def test_bad_input_raises(tmp_path):
    good = Kernel("k", attention, recipe="fp32-seq")
    with pytest.raises(mlaref.InputError, match="not-a-recipe"):
        mlaref.harness.report(Kernel("k", attention, recipe="not-a-recipe"), out=tmp_path)
    with pytest.raises(mlaref.InputError, match="not a name"):
        mlaref.harness.report(Kernel("a b", attention, recipe="fp32-seq"), out=tmp_path)
    with pytest.raises(mlaref.InputError, match="unknown suite 'nope'"):
        mlaref.harness.report(good, suite="nope", out=tmp_path, recipes="none")
    with pytest.raises(mlaref.InputError, match="given twice"):
        mlaref.harness.report([good, good], out=tmp_path, recipes="none")
    assert os.listdir(tmp_path) == []
    # a folder made for the report goes again when the input is bad
    with pytest.raises(mlaref.InputError, match="^unknown suite 'nope'"):
        mlaref.harness.report(good, suite="nope", out=tmp_path / "new", recipes="none")
    with pytest.raises(mlaref.InputError, match="not a name"):
        mlaref.harness.report(Kernel("a b", attention, recipe="fp32-seq"), out=tmp_path / "new")
    assert os.listdir(tmp_path) == []


def paged_attention(p):
    """The same attention over the paged layout (Kernel(layout="paged")): pages through the block
    table, seq_lens tokens, q [B, s_q, H, 576]; o [B, s_q, H, 512], lse [B, H, s_q]."""
    B, s, H, _ = p.q.shape
    page = p.kv_cache.shape[1]
    if p.kv_format == "bf16":
        kv = p.kv_cache.float()
    else:
        kv = mlaref.decode(p.kv_cache.view(torch.uint8) if p.kv_cache.dtype != torch.uint8
                           else p.kv_cache, p.kv_format)
    kv = kv.reshape(-1, page, 576) * p.kv_scale
    o = torch.zeros(B, s, H, 512)
    lse = torch.full((B, H, s), -math.inf)
    for b in range(B):
        length = int(p.seq_lens[b])
        pages = p.block_table[b, :(length + page - 1) // page].long()
        k = kv[pages].reshape(-1, 576)[:length]
        for i in range(s):
            seen = length - (s - 1 - i) if p.causal else length
            if seen <= 0:
                continue
            sc = (p.q[b, i].float() @ k[:seen].T) * p.sm_scale
            lse[b, :, i] = torch.logsumexp(sc, dim=1)
            o[b, i] = torch.softmax(sc, dim=1) @ k[:seen, :512]
    return o, lse


def test_paged_layout(tmp_path):
    """A kernel that takes vLLM's layout passes every edge cell but the ones that layout cannot
    hold (batches of different q_len: skipped, saying why), paged cells included."""
    s = mlaref.harness.report(Kernel("paged", paged_attention, recipe="fp32-seq", layout="paged"),
                              suite="edge", out=tmp_path / "r", recipes="none")
    cells = by_cell(s, "paged")
    assert not s.failed_cells, [(c.shape, c.reason) for c in s.failed_cells]
    assert cells["page16"].verdict == "pass" and cells["page64"].verdict == "pass"
    for c in cells.values():
        assert c.verdict == "pass" or "different q_len" in c.reason, (c.shape, c.reason)
    with pytest.raises(ValueError, match="layout"):
        Kernel("k", paged_attention, recipe="fp32-seq", layout="csr")
