"""The probe suite (fixtures/suites, docs/checking.md) against the example PyTorch kernel: the
kernel as written passes mlaref's default check on every probe cell, though it is not bit-exact
to its recipe (fp32-seq: it sums in another order), and each of its planted bugs, each of a kind
that reaches production kernels, fails it on at least one probe cell."""

import os
import sys

import pytest

import mlaref

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
from torch_mla_decode import BUGS, mla_decode_inputs  # noqa: E402

RECIPE = "fp32-seq"


@pytest.fixture(scope="module")
def probes():
    return [(name, mlaref.gen(spec, framework="torch")) for name, spec in mlaref.suite("probe")]


def held(inputs, bug=None):
    o, lse = mla_decode_inputs(inputs, bug=bug)
    return mlaref.check(o, inputs, RECIPE, lse=lse)


def test_the_probe_suite_is_there(probes):
    names = [n for n, _ in probes]
    assert len(names) == 14 and "splits" in names and "heads128" in names
    assert {i.H for _, i in probes} >= {16, 20, 128}


def test_the_kernel_passes_every_probe(probes):
    for name, inputs in probes:
        r = held(inputs)
        assert r.passed, f"{name}: a correct kernel fails the default check:\n{r}"
        o = r.data["o"]
        assert o["identical"] < o["n"], f"{name}: bit-exact, so this proves nothing of the rules"


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_fails_a_probe(probes, bug):
    for name, inputs in probes:
        if not held(inputs, bug).passed:
            return
    pytest.fail(f"the bug '{bug}' ({BUGS[bug]}) passes the default check on every probe cell")


def test_an_unknown_suite_is_refused():
    with pytest.raises(mlaref.InputError, match=r"suite 'nope' is not a suite \(valid: .*probe"):
        mlaref.suite("nope")
