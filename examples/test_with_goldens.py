"""How a kernel repository tests its MLA decode kernel with mlaref's golden cells (pytest).

Each golden cell (fixtures/goldens/edge.*.safetensors; copy them into your repository, or set
MLAREF_GOLDENS to their folder) holds one edge case's inputs in the contract's layout and, for
every built-in recipe R, the model's output o.R and lse.R. The tests:

- the kernel (examples/torch_mla_decode.py here: yours in its place) passes mlaref's check of
  the recipe it claims on every edge cell;
- the golden outputs are bit for bit what the installed mlaref computes, so the numerics the
  kernel is held to are the ones the goldens were made with (a changed mlaref shows up here);
- a deliberately broken kernel fails the check: the test can fail.

Run: PYTHONPATH=build/default/python /usr/bin/python3 -m pytest examples/test_with_goldens.py
"""
import os
import sys
from pathlib import Path

import pytest

import mlaref
import mlaref.testing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_mla_decode import mla_decode_inputs  # noqa: E402  (the kernel under test)

RECIPE = "fp32-seq"  # what the kernel claims: fp32 arithmetic (its fp32 o is checked as fp32)
GOLDENS = Path(os.environ.get("MLAREF_GOLDENS",
                              Path(__file__).resolve().parent.parent / "fixtures" / "goldens"))
CELLS = sorted(GOLDENS.glob("edge.*.safetensors"))
# cells where dropping a query's last KV token changes o: every one with a KV token
DROP_VISIBLE = [c for c in CELLS if c.name != "edge.bs1_kv0.safetensors"]


def test_goldens_found():
    """The edge cells are there (an empty folder would leave nothing tested)."""
    assert len(CELLS) >= 10, f"no edge golden cells in {GOLDENS}"


@pytest.mark.parametrize("cell", CELLS, ids=lambda p: p.name)
def test_kernel_passes_check(cell):
    """The kernel's o and lse hold mlaref's default rule (fa3) against the model of RECIPE."""
    inputs = mlaref.load(cell, framework="torch")
    o, lse = mla_decode_inputs(inputs, splits=3)
    mlaref.testing.assert_mla_close(o, inputs, RECIPE, lse=lse)


@pytest.mark.parametrize("cell", CELLS, ids=lambda p: p.name)
def test_golden_is_the_model(cell):
    """The golden's o.RECIPE and lse.RECIPE are the installed model's bits."""
    inputs = mlaref.load(cell, framework="torch")
    golden = mlaref.read_tensors(cell, framework="torch")
    mlaref.testing.assert_mla_close(golden[f"o.{RECIPE}"], inputs, RECIPE,
                                    lse=golden[f"lse.{RECIPE}"], rules="exact")


@pytest.mark.parametrize("cell", DROP_VISIBLE, ids=lambda p: p.name)
def test_broken_kernel_fails_check(cell):
    """A kernel that drops each query's last KV token fails the same check."""
    inputs = mlaref.load(cell, framework="torch")
    o, lse = mla_decode_inputs(inputs, splits=3, bug="drop-last-token")
    with pytest.raises(AssertionError, match="FAIL"):
        mlaref.testing.assert_mla_close(o, inputs, RECIPE, lse=lse)
